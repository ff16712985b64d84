@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Batch insert

extension SQLiteStore {
    /// Runs a batch insert inside the caller's `BEGIN IMMEDIATE` transaction
    /// (``execute(_:in:)``): each row read and converted by ``BatchInsertRows``
    /// and bound to one prepared `INSERT` reused for every row, its columns in
    /// an order worked out once; primary keys taken from `Z_MAX + 1` on and
    /// allocated as one block at the end (`Z_MAX` moves once, by the rows
    /// inserted: the write lock keeps anyone else from allocating meanwhile);
    /// `Z_ENT` and `Z_OPT = 1` written as a save writes them. With persistent
    /// history, one transaction records an insert change per inserted row
    /// (one `INSERT … SELECT` over the block, as a save records its inserts)
    /// and an update change per upserted stored row. Any error rolls all of it back.
    ///
    /// Uniqueness constraints are kept by the entity's unique indexes, which
    /// the statement meets as SQLite's conflict clauses:
    /// - fail: a plain `INSERT`; the index refusing a row becomes
    ///   ``ObjectGraphError/Code-swift.struct/duplicateKey``,
    ///   naming the holder found by its values.
    /// - overwrite: `INSERT … ON CONFLICT (key) DO UPDATE SET` the columns the
    ///   row gives (one statement per set of given columns), bumping `Z_OPT`
    ///   of rows stored before the request only, `WHERE` the holder is of the
    ///   row's entity. An insert is told from an update by the connection's
    ///   last inserted rowid (reset before each row); an updated holder is
    ///   found by its key values.
    /// - keep: `INSERT … ON CONFLICT DO NOTHING`.
    ///
    /// Related SQLite documentation: <https://sqlite.org/lang_upsert.html>
    func batchInsert(_ insert: StoreBatchInsert, history: HistoryLayout?, author: String?, contextName: String?,
                     schema: TableLayout, connection: Connection) throws -> BatchChanges {
        var writer = try BatchInsertWriter(insert, schema: schema, connection: connection, store: self)
        try writer.writeRows()
        guard !writer.inserted.isEmpty || !writer.updated.isEmpty else { return BatchChanges() }
        try writer.allocateInsertedKeys()
        let updated = writer.updated.sorted { $0.key < $1.key }
        var token: PersistentHistoryToken?
        if let history {
            token = try recordBatchInsert(of: writer.mapping, inserted: writer.inserted, updated: updated, written: writer.writtenColumns,
                                          attributes: writer.rows.attributes, layout: history, author: author, contextName: contextName,
                                          connection: connection)
        }
        let scope = insert.entity.idScope(in: identity)
        return BatchChanges(inserted: writer.inserted.map { ObjectID(scope: scope, primaryKey: $0) },
                            updatedObjectIDs: Set(updated.lazy.map { ObjectID(scope: scope, primaryKey: $0.key) }),
                            historyToken: token)
    }

    /// Writes a batch insert's history transaction: an insert change per row of
    /// `inserted`, then an update change per upserted row (by key, in order) with
    /// the columns it wrote (`written[value]`, positions among the attributes).
    private func recordBatchInsert(of mapping: TableLayout.EntityMapping, inserted: Range<Int64>, updated: [(key: Int64, value: Int)],
                                   written: [Set<Int>], attributes: [AttributeDescription], layout: HistoryLayout, author: String?,
                                   contextName: String?, connection: Connection) throws -> PersistentHistoryToken {
        guard let entity = layout.entities[ObjectIdentifier(mapping.entity)] else {
            throw PersistentStoreError(.ioFailure, url: url, message: "the history cannot record the batch insert: no history layout for entity \(mapping.entity.name)")
        }
        let transaction = try HistoryLayout.insertTransaction(author: author, contextName: contextName, connection: connection, url: url)
        let count = Int64(inserted.count + updated.count)
        let firstChange = try Self.allocateKeys(count, entity: HistoryLayout.changeEntity, connection: connection, url: url) - count + 1
        var next = try recordChangeRuns(inserted.isEmpty ? [] : [(mapping, [inserted.lowerBound...(inserted.upperBound - 1)])],
                                        as: .insert, firstKey: firstChange, transaction: transaction, connection: connection)
        // Upserted rows by the columns they were given (mostly one set), each
        // set's rows copied by runs of consecutive keys as the inserted ones are.
        var keysByColumns = [[Int64]](repeating: [], count: written.count)
        for (key, columns) in updated { keysByColumns[columns].append(key) }
        for columns in keysByColumns.indices.filter({ !keysByColumns[$0].isEmpty }).sorted(by: { keysByColumns[$0][0] < keysByColumns[$1][0] }) {
            next = try recordChangeRuns([(mapping, Self.runs(of: keysByColumns[columns]))], as: .update,
                                        columns: entity.columnsMask(slots: written[columns].sorted().map { attributes[$0].index }),
                                        firstKey: next, transaction: transaction, connection: connection)
        }
        return PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: transaction)
    }
}

/// One batch insert on its way into the table: the state that lives from the
/// first row to the last (the rows, their statements, the next free key, the
/// upserted holders), so that each step of a row is a function of its own.
private struct BatchInsertWriter {
    private let store: SQLiteStore
    let mapping: TableLayout.EntityMapping
    private let schema: TableLayout
    private let connection: Connection
    private(set) var rows: BatchInsertRows
    private var statements: BatchInsertStatements
    /// The key of the request's first row: `Z_MAX + 1` of the root entity, read as
    /// the history reads its own entities' (0 without a row: then allocating at
    /// the end throws, and the transaction rolls back).
    private let first: Int64
    /// The key the next inserted row takes.
    private var next: Int64
    /// The columns each upsert wrote into a row stored before the request, by its
    /// key: an index into ``writtenColumns``.
    private(set) var updated: [Int64: Int] = [:]
    /// Each set of columns (positions among the attributes) upserts wrote; mostly one.
    private(set) var writtenColumns: [Set<Int>] = []
    /// The given flags of the last upserted row and the index of the columns it
    /// wrote: rows giving the same attributes reuse it, with no set built per row.
    private var lastWritten: (given: [Bool], columns: Int)?
    /// Which columns take their values tagged inline: those with external binary
    /// storage (ExternalBinaryStorage.swift), as a batch writes no files.
    private let external: [Bool]
    private let tagsExternal: Bool
    /// The table's full-text index when rows are only inserted: they are indexed in one
    /// statement at the end (SearchIndexMaintenance.swift); an upsert may change
    /// stored rows, which the triggers index.
    private let searchIndex: SearchIndexLayout?

    /// The keys of the rows inserted so far.
    var inserted: Range<Int64> { first..<next }

    init(_ insert: StoreBatchInsert, schema: TableLayout, connection: Connection, store: SQLiteStore) throws {
        let mapping = try schema.mapping(for: insert.entity)
        let rows = BatchInsertRows(insert)
        let columns = try Self.columns(of: rows.attributes, in: mapping)
        let constraints = Self.constraints(insert.constraints, among: rows.attributes)
        let statements = BatchInsertStatements(table: mapping.table, entityNumber: mapping.number, columns: columns,
                                               constraints: constraints, onConflict: insert.onConflict, connection: connection)
        first = try HistoryLayout.lastKey(of: mapping.rootNumber, connection) + 1
        next = first
        searchIndex = statements.overwrites ? nil : schema.searchIndexes[mapping.table]
        external = rows.attributes.map(\.storesExternalBinaryData)
        tagsExternal = external.contains(true)
        self.store = store
        self.mapping = mapping
        self.schema = schema
        self.connection = connection
        self.rows = rows
        self.statements = statements
    }

    /// The column of each attribute a row gives, in the rows' order.
    private static func columns(of attributes: [AttributeDescription], in mapping: TableLayout.EntityMapping) throws -> [String] {
        try attributes.map { attribute in
            guard let column = mapping.columns[attribute.index]?.name else {
                throw ObjectGraphError.unknownKey(attribute.name, entity: mapping.entity.name)
            }
            return column
        }
    }

    /// The request's uniqueness constraints that a row can break.
    private static func constraints(_ constraints: [(owner: EntityDescription, keys: [String])],
                                    among attributes: [AttributeDescription]) -> [BatchInsertConstraint] {
        constraints.compactMap { owner, keys in
            let positions = keys.compactMap { key in attributes.firstIndex { $0.name == key } }
            // A constraint on a relationship has no attribute to take from a row (nor a unique index here).
            guard positions.count == keys.count else { return nil }
            return BatchInsertConstraint(owner: owner, keys: keys, positions: positions)
        }
    }

    /// Writes every row of the request, each inserted, upserted or kept out.
    mutating func writeRows() throws {
        // Rows run with their bindings kept (each binds every parameter again), cleared once at the end.
        defer { statements.clearBindings() }
        if searchIndex != nil { try SearchIndexMaintenance.setFlag(true, on: connection) }
        while try rows.next() { try writeRow() }
        if let searchIndex {
            try SearchIndexMaintenance.index(inserted, of: searchIndex, on: connection)
            try SearchIndexMaintenance.setFlag(false, on: connection)
        }
    }

    private mutating func writeRow() throws {
        let statement = try statements.statement(for: rows.given)
        try bindRow(to: statement)
        guard statements.resolvesConflicts else {
            try execute(statement)
            next += 1
            return
        }
        if statements.overwrites { try statement.bind(first, at: statements.firstKeyParameter) }
        // Which the row became is read from the connection, not from a
        // `RETURNING Z_PK`: SQLite buffers returned rows in a temporary
        // table, which cost more than the inserts themselves.
        connection.resetLastInsertedRowID()
        try execute(statement)
        if connection.lastInsertedRowID == next {
            next += 1
        } else if statements.overwrites {
            try noteUpdatedHolder()
        }
        // Keep: the holder stays as it is.
    }

    /// Binds the row's key and values, tagging those of external binary storage columns.
    ///
    /// Text is bound for the row's execution only, from the statement's own
    /// buffer (``Statement/bindForExecution(_:at:)-(PropertyValue,_)``, as a
    /// save binds its rows): SQLite's own copy of each string (`SQLITE_TRANSIENT`)
    /// cost a `malloc` and a `free` per string, ~600 instructions, a tenth of a row's insert.
    private func bindRow(to statement: Statement) throws {
        try statement.bind(next, at: 1)
        try rows.values.withUnsafeBufferPointer { values in
            for position in values.indices {
                if tagsExternal, external[position], case .data(let bytes) = values[position] {
                    try statement.bind(.data(ExternalBinaryStorage.inlineColumn(bytes)), at: Int32(position + 2))
                } else {
                    try statement.bindForExecution(values[position], at: Int32(position + 2))
                }
            }
        }
    }

    /// Runs the row's statement; a unique index refusing the row becomes the error naming the holder.
    private func execute(_ statement: Statement) throws {
        do {
            try statement.executeRebindingEveryParameter()
        } catch let error as SQLiteError where error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE {
            throw try duplicateKey() ?? error
        }
    }

    /// Records the columns an upsert's `DO UPDATE` wrote into a row stored before
    /// the request, for the history and the changes the request reports.
    private mutating func noteUpdatedHolder() throws {
        // DO UPDATE wrote the holder, unless its WHERE refused it: a row of another entity of the hierarchy.
        guard connection.changes == 1, let key = try statements.holder(of: rows)?.key else {
            throw try duplicateKey()
                ?? PersistentStoreError(.ioFailure, url: store.url, message: "row \(rows.index) of the batch insert of \(mapping.entity.name) was neither inserted nor merged")
        }
        // A key from `first` on is an earlier row of this request, which stays an insert.
        guard key < first else { return }
        let columns: Int
        if let lastWritten, lastWritten.given == rows.given {
            columns = lastWritten.columns
        } else {
            columns = index(of: Set(rows.given.indices.filter { rows.given[$0] && !statements.keyPositions.contains($0) }))
            lastWritten = (rows.given, columns)
        }
        // A row upserted twice by the request: the columns of both.
        if let earlier = updated.updateValue(columns, forKey: key), earlier != columns {
            updated[key] = index(of: writtenColumns[earlier].union(writtenColumns[columns]))
        }
    }

    /// The index of a set of written columns in ``writtenColumns``, added when new.
    private mutating func index(of columns: Set<Int>) -> Int {
        if let found = writtenColumns.firstIndex(of: columns) { return found }
        writtenColumns.append(columns)
        return writtenColumns.count - 1
    }

    /// The error for a row a unique index refused: the first constraint whose
    /// values the row shares with a row of the table, and that row when it was
    /// stored before the request (nil when none is found: the caller rethrows).
    private func duplicateKey() throws -> ObjectGraphError? {
        guard let holder = try statements.holder(of: rows) else { return nil }
        let entity = schema.entitiesByNumber[holder.entityNumber] ?? mapping.entity
        return .duplicateKey(entity: holder.constraint.owner.name, constraint: holder.constraint.keys,
                             values: holder.constraint.positions.map { rows.values[$0] }, row: rows.index,
                             storedObjectID: holder.key < first ? ObjectID(entity: entity, store: store.identity, primaryKey: holder.key) : nil)
    }

    /// Takes the inserted rows' keys as one block (`Z_MAX` moves once, by the rows
    /// inserted), checking that nobody allocated meanwhile.
    func allocateInsertedKeys() throws {
        guard next > first else { return }
        let last = try SQLiteStore.allocateKeys(next - first, entity: mapping.rootNumber, connection: connection, url: store.url)
        guard last == next - 1 else {
            throw PersistentStoreError(.ioFailure, url: store.url, message: """
                Z_PRIMARYKEY of \(mapping.entity.rootEntity.name) moved during the batch insert: its last key is \(last), \
                the rows took \(first)...\(next - 1)
                """)
        }
    }
}

/// A uniqueness constraint as a batch insert meets it: the positions of its
/// keys among the row's attributes.
private struct BatchInsertConstraint {
    let owner: EntityDescription
    let keys: [String]
    let positions: [Int]
}

/// A batch insert's prepared statements: one `INSERT` for every row, or under
/// the overwrite choice one upsert per set of given columns (most requests
/// give the same columns in every row, so one), reused from row to row.
///
/// Parameters: `?1` the row's key, `?2…` its values in attribute order, and
/// for an upsert the request's first key after them.
private struct BatchInsertStatements {
    let connection: Connection
    let table: String
    let insertSQL: String
    let columns: [String]
    let constraints: [BatchInsertConstraint]
    let onConflict: StoreBatchInsert.OnConflict
    let entityNumber: Int64
    /// Whether a row may meet a stored key without failing (an upsert, or keep).
    let resolvesConflicts: Bool
    /// Whether a row meeting a stored key overwrites it: each set of given columns has its own statement.
    var overwrites: Bool { resolvesConflicts && onConflict == .overwrite }
    /// An upsert's parameter for the request's first key, after the row's key and values.
    var firstKeyParameter: Int32 { Int32(columns.count + 2) }
    /// The positions of every constraint's keys: an upsert does not rewrite them.
    let keyPositions: Set<Int>
    private var single: Statement?
    private var last: (given: [Bool], statement: Statement)?
    private var upserts: [[Bool]: Statement] = [:]
    /// Each constraint's `SELECT` of the row holding a row's key values, made once
    /// (an upsert runs it for every row it merges).
    private let holderSQL: [String]
    private let holders: HolderStatements

    init(table tableName: String, entityNumber: Int64, columns: [String], constraints: [BatchInsertConstraint],
         onConflict: StoreBatchInsert.OnConflict, connection: Connection) {
        self.connection = connection
        self.columns = columns
        self.constraints = constraints
        self.onConflict = onConflict
        self.entityNumber = entityNumber
        keyPositions = Set(constraints.flatMap(\.positions))
        insertSQL = "INSERT INTO \(tableName) (" + (["Z_PK", "Z_ENT", "Z_OPT"] + columns).joined(separator: ", ") + ") VALUES (?1, \(entityNumber), 1"
            + columns.indices.map { ", ?\($0 + 2)" }.joined() + ")"
        resolvesConflicts = onConflict != .fail && !constraints.isEmpty
        table = tableName
        holderSQL = constraints.map { constraint in
            "SELECT Z_PK, Z_ENT FROM \(tableName) WHERE " + constraint.positions.map { "\(columns[$0]) = ?" }.joined(separator: " AND ") + " LIMIT 1"
        }
        holders = HolderStatements(count: constraints.count)
    }

    /// Unbinds the rows' statements, run with their bindings kept, once the last row has run.
    func clearBindings() {
        single?.clearBindings()
        for statement in upserts.values { statement.clearBindings() }
    }

    /// The statement for a row giving these attributes, reset and ready to bind.
    mutating func statement(for given: [Bool]) throws -> Statement {
        if !resolvesConflicts || onConflict == .keep {
            if let single { return single }
            let sql = resolvesConflicts ? insertSQL + " ON CONFLICT DO NOTHING" : insertSQL
            let statement = try connection.cachedStatement(sql)
            single = statement
            return statement
        }
        if let last, last.given == given { return last.statement }
        let statement: Statement
        if let known = upserts[given] {
            statement = known
        } else {
            statement = try connection.cachedStatement(upsertSQL(given: given))
            upserts[given] = statement
        }
        last = (given, statement)
        return statement
    }

    /// `INSERT … ON CONFLICT (key) DO UPDATE SET` the given columns of the row
    /// (not the key's), for each constraint; only a holder of the row's entity
    /// is updated, and only a row stored before the request (key below the
    /// request's first) gets a new version.
    private func upsertSQL(given: [Bool]) -> String {
        let clauses = constraints.map { constraint in
            let targets = constraint.positions.map { columns[$0] }.joined(separator: ", ")
            let sets = columns.indices.filter { given[$0] && !constraint.positions.contains($0) }
                .map { "\(columns[$0]) = excluded.\(columns[$0])" }
            return " ON CONFLICT (\(targets)) DO UPDATE SET "
                + (sets + ["Z_OPT = Z_OPT + (Z_PK < ?\(firstKeyParameter))"]).joined(separator: ", ")
                + " WHERE Z_ENT = \(entityNumber)"
        }
        return insertSQL + clauses.joined()
    }

    /// The row holding the row's values of the first constraint that has a
    /// holder — the one SQLite's first matching `ON CONFLICT` clause met — with
    /// that constraint and the holder's entity number; nil when no row does.
    func holder(of rows: BatchInsertRows) throws -> (constraint: BatchInsertConstraint, key: Int64, entityNumber: Int64)? {
        for (index, constraint) in constraints.enumerated() {
            guard !constraint.positions.contains(where: { rows.values[$0].isNull }) else { continue }
            let statement = try holders.statement(index, sql: holderSQL[index], on: connection)
            defer { statement.reset() }
            for (offset, position) in constraint.positions.enumerated() { try statement.bind(rows.values[position], at: Int32(offset + 1)) }
            if try statement.step() { return (constraint, statement.int64(at: 0), statement.int64(at: 1)) }
        }
        return nil
    }
}

/// The holder `SELECT`s of a request's constraints, each taken from the
/// connection's cache the first time it runs and kept for the request.
private final class HolderStatements {
    private var statements: [Statement?]

    init(count: Int) {
        statements = Array(repeating: nil, count: count)
    }

    func statement(_ index: Int, sql: String, on connection: Connection) throws -> Statement {
        if let statement = statements[index] { return statement }
        let statement = try connection.cachedStatement(sql)
        statements[index] = statement
        return statement
    }
}
