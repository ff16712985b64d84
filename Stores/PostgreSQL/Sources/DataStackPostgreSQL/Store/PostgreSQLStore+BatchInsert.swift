import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Batch insert

extension PostgreSQLStore {
    /// Runs a batch insert inside the caller's transaction: each row read and
    /// converted by ``ObjectGraph/BatchInsertRows`` (the rules every store
    /// applies), gathered 1,024 at a time and written with the save's
    /// multi-row `INSERT … VALUES (…), (…)` of up to 256 rows
    /// (``DataStackStorage/StoreLayout/insertStatements(_:of:primaryKeys:permanent:)``);
    /// keys taken from `Z_PRIMARYKEY` a block per 1,024 rows (its row lock held
    /// to the commit). With history, one transaction records an insert change
    /// per inserted row and an update change per stored row an upsert wrote.
    ///
    /// Uniqueness constraints, by the merge policy as on SQLite:
    /// - fail: a plain `INSERT` under a savepoint; a unique index's refusal
    ///   rolls the block back and becomes `duplicateKey`, naming the first row of
    ///   the block whose key is held — by an earlier row of the request, or by a
    ///   stored row (named) — and its values.
    /// - keep: `INSERT … ON CONFLICT DO NOTHING RETURNING Z_PK`.
    /// - overwrite: `INSERT … ON CONFLICT (key) DO UPDATE SET` the columns the
    ///   row gives, `Z_OPT + 1` for a row stored before the request, `WHERE` the
    ///   holder is of the row's entity, `RETURNING Z_PK`: a returned key of the
    ///   block is an insert, a key before the request's first an upserted row.
    ///   PostgreSQL takes one conflict target a statement and refuses to write
    ///   a row twice in one, so a statement holds rows with distinct keys that
    ///   give the same attributes; with several constraints each row runs
    ///   alone, against the first constraint a stored row holds (SQLite's
    ///   first matching `ON CONFLICT` clause).
    ///
    /// Why not `COPY`: it has no `ON CONFLICT`, and a refused row fails the whole
    /// stream without saying which; the multi-row `INSERT` is what saves use.
    /// Keys of rows an upsert merged or kept out are not reused (a gap in
    /// `Z_PK`, which nothing reads as meaning).
    func batchInsert(_ insert: StoreBatchInsert, layout: StoreLayout, history: BatchHistoryRecord,
                     _ connection: PostgreSQLConnection) throws -> BatchChanges {
        var writer = try BatchInsertWriter(insert, layout: layout, store: self, connection: connection)
        try writer.writeRows()
        guard !writer.inserted.isEmpty || !writer.updated.isEmpty else { return BatchChanges() }
        let entity = insert.entity
        let number = try layout.number(of: entity)
        try reindexSearch((writer.inserted + writer.updated.keys).map { (entity, $0) }, layout: layout, connection)
        var token: PersistentHistoryToken?
        if history.tracksHistory {
            var groups: [BatchHistoryRecord.Group] = [(.insert, number, writer.inserted, nil, nil)]
            var keysByColumns = [[Int64]](repeating: [], count: writer.writtenColumns.count)
            for (key, columns) in writer.updated.sorted(by: { $0.key < $1.key }) { keysByColumns[columns].append(key) }
            for columns in keysByColumns.indices where !keysByColumns[columns].isEmpty {
                let attributes = writer.writtenColumns[columns].sorted().map { writer.attributes[$0] }
                groups.append((.update, number, keysByColumns[columns],
                               try layout.batchHistoryColumns(entityNumbered: number, attributes: attributes), nil))
            }
            token = try history.record(groups, store: self, connection)
        }
        return BatchChanges(inserted: writer.inserted.map { newObjectID(for: entity, primaryKey: $0) },
                            updatedObjectIDs: Set(writer.updated.keys.map { newObjectID(for: entity, primaryKey: $0) }),
                            historyToken: token)
    }
}

/// One batch insert on its way into the table.
private struct BatchInsertWriter {
    private struct Constraint {
        let owner: EntityDescription
        let keys: [String]
        let positions: [Int]
    }

    /// A row read and waiting for its block.
    private struct Pending {
        let index: Int
        let values: [PropertyValue]
        let given: [Bool]
    }

    private let store: PostgreSQLStore
    private let layout: StoreLayout
    private let connection: PostgreSQLConnection
    private let entity: EntityDescription
    private let table: String
    private let entityNumber: Int64
    private let rootNumber: Int64
    private let columns: [String]
    private let constraints: [Constraint]
    private let onConflict: StoreBatchInsert.OnConflict
    private var rows: BatchInsertRows
    private var pending: [Pending] = []
    /// The request's first key (nil before the first block).
    private var first: Int64?
    /// The keys of the rows inserted, in order.
    private(set) var inserted: [Int64] = []
    /// The stored rows upserts wrote, by key: an index into ``writtenColumns``.
    private(set) var updated: [Int64: Int] = [:]
    /// Each set of columns (positions among the attributes) upserts wrote.
    private(set) var writtenColumns: [Set<Int>] = []
    var attributes: [AttributeDescription] { rows.attributes }

    private static let blockSize = 1_024

    init(_ insert: StoreBatchInsert, layout: StoreLayout, store: PostgreSQLStore, connection: PostgreSQLConnection) throws {
        let rows = BatchInsertRows(insert)
        self.rows = rows
        self.store = store
        self.layout = layout
        self.connection = connection
        entity = insert.entity
        table = try layout.table(of: insert.entity)
        entityNumber = try layout.number(of: insert.entity)
        rootNumber = try layout.rootNumber(of: insert.entity)
        columns = try layout.attributeColumns(of: rows.attributes, in: insert.entity)
        onConflict = insert.onConflict
        constraints = insert.constraints.compactMap { owner, keys in
            let positions = keys.compactMap { key in rows.attributes.firstIndex { $0.name == key } }
            // A constraint on a relationship has no attribute to take from a row (nor a unique index).
            guard positions.count == keys.count else { return nil }
            return Constraint(owner: owner, keys: keys, positions: positions)
        }
    }

    private var overwrites: Bool { onConflict == .overwrite && !constraints.isEmpty }

    mutating func writeRows() throws {
        while try rows.next() {
            let row = Pending(index: rows.index, values: rows.values, given: rows.given)
            if overwrites, let last = pending.last, constraints.count > 1 || last.given != row.given || holdsKey(of: row) {
                try flush()
            }
            pending.append(row)
            if pending.count == Self.blockSize { try flush() }
        }
        try flush()
    }

    /// Whether a waiting row has the row's values of the (one) constraint: they cannot share an upsert.
    private func holdsKey(of row: Pending) -> Bool {
        guard let constraint = constraints.first else { return false }
        let key = constraint.positions.map { row.values[$0] }
        if key.contains(where: \.isNull) { return false }
        return pending.contains { waiting in constraint.positions.map { waiting.values[$0] } == key }
    }

    /// Writes the waiting rows under keys allocated for them.
    private mutating func flush() throws {
        guard !pending.isEmpty else { return }
        let keys = try allocate(pending.count)
        if first == nil { first = keys.first }
        let nodes = pending.indices.map { node(pending[$0], key: keys[$0]) }
        switch onConflict {
        case _ where constraints.isEmpty || onConflict == .fail:
            try insertFailingOnDuplicates(nodes, keys: keys)
        case .keep:
            for (statement, _) in try layout.insertStatements(nodes, of: entity, primaryKeys: keys, permanent: { $0 }) {
                let result = try run(statement.sql + " ON CONFLICT DO NOTHING RETURNING Z_PK", statement.values)
                for row in 0..<result.rowCount { inserted.append(try result.requiredInt64(row: row, column: 0)) }
            }
        case .overwrite, .fail:
            try upsert(nodes, keys: keys)
        }
        pending.removeAll(keepingCapacity: true)
    }

    private func node(_ row: Pending, key: Int64) -> IncrementalStoreNode {
        var values = ContiguousArray<PropertyValue>(repeating: .null, count: entity.slotProperties.count)
        for (position, attribute) in rows.attributes.enumerated() { values[attribute.index] = row.values[position] }
        return IncrementalStoreNode(objectID: store.newObjectID(for: entity, primaryKey: key), values: values, version: 1)
    }

    /// `count` keys from the root entity's `Z_MAX`, in order.
    private func allocate(_ count: Int) throws -> [Int64] {
        let result = try connection.execute(cached: "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + $1 WHERE Z_ENT = $2 RETURNING Z_MAX",
                                            [PostgreSQLValue(Int64(count)), PostgreSQLValue(rootNumber)])
        guard result.rowCount == 1 else {
            throw PersistentStoreError(.ioFailure, url: store.url, message: "Z_PRIMARYKEY has no row for entity number \(rootNumber)")
        }
        let last = try result.requiredInt64(row: 0, column: 0)
        return Array((last - Int64(count) + 1)...last)
    }

    private func run(_ sql: String, _ values: [StoredValue]) throws -> PostgreSQLResult {
        try connection.execute(cached: sql, values.map(PostgreSQLValue.init))
    }

    /// Plain inserts; under a savepoint when a unique index may refuse a row,
    /// so that the refusal can be explained row by row.
    private mutating func insertFailingOnDuplicates(_ nodes: [IncrementalStoreNode], keys: [Int64]) throws {
        let guarded = !constraints.isEmpty
        if guarded { _ = try connection.execute("SAVEPOINT datastack_batch_insert") }
        do {
            for (statement, _) in try layout.insertStatements(nodes, of: entity, primaryKeys: keys, permanent: { $0 }) {
                _ = try run(statement.sql, statement.values)
            }
        } catch let error as PostgreSQLError where guarded && error.kind == .uniqueViolation {
            _ = try connection.execute("ROLLBACK TO SAVEPOINT datastack_batch_insert")
            throw try duplicateKey() ?? error
        }
        if guarded { _ = try connection.execute("RELEASE SAVEPOINT datastack_batch_insert") }
        inserted += keys
    }

    /// The error for the first waiting row whose key is held: by an earlier
    /// waiting row, or by a row in the table (named when stored before the request).
    private func duplicateKey(among rows: [Pending]? = nil) throws -> ObjectGraphError? {
        let rows = rows ?? pending
        for (offset, row) in rows.enumerated() {
            for constraint in constraints {
                let values = constraint.positions.map { row.values[$0] }
                if values.contains(where: \.isNull) { continue }
                if rows[..<offset].contains(where: { earlier in constraint.positions.map { earlier.values[$0] } == values }) {
                    return .duplicateKey(entity: constraint.owner.name, constraint: constraint.keys, values: values, row: row.index,
                                         storedObjectID: nil)
                }
                if let holder = try holder(of: row, constraint) {
                    let stored = holder.key < (first ?? .max)
                    let entity = layout.entity(numbered: holder.entityNumber) ?? entity
                    return .duplicateKey(entity: constraint.owner.name, constraint: constraint.keys, values: values, row: row.index,
                                         storedObjectID: stored ? store.newObjectID(for: entity, primaryKey: holder.key) : nil)
                }
            }
        }
        return nil
    }

    /// The row of the table holding the row's values of a constraint.
    private func holder(of row: Pending, _ constraint: Constraint) throws -> (key: Int64, entityNumber: Int64)? {
        let condition = constraint.positions.enumerated().map { "\(columns[$0.element]) = $\($0.offset + 1)" }.joined(separator: " AND ")
        let result = try connection.execute("SELECT Z_PK, Z_ENT FROM \(table) WHERE \(condition) LIMIT 1",
                                            constraint.positions.map { PostgreSQLValue(StoredValue(row.values[$0])) })
        guard result.rowCount == 1 else { return nil }
        return (try result.requiredInt64(row: 0, column: 0), try result.requiredInt64(row: 0, column: 1))
    }

    /// Upserts rows giving the same attributes, with distinct keys (or one row).
    private mutating func upsert(_ nodes: [IncrementalStoreNode], keys: [Int64]) throws {
        guard let sample = pending.first, let first else { return }
        // With several constraints the one row runs against the first a stored row holds.
        var target = constraints[0]
        if constraints.count > 1 {
            target = try constraints.first { try holder(of: sample, $0) != nil } ?? target
        }
        let keyPositions = Set(constraints.flatMap(\.positions))
        let written = sample.given.indices.filter { sample.given[$0] && !target.positions.contains($0) }
        let sets = written.map { "\(columns[$0]) = excluded.\(columns[$0])" }
            + ["Z_OPT = \(table).Z_OPT + CASE WHEN \(table).Z_PK < \(first) THEN 1 ELSE 0 END"]
        let clause = " ON CONFLICT (\(target.positions.map { columns[$0] }.joined(separator: ", "))) DO UPDATE SET "
            + sets.joined(separator: ", ") + " WHERE \(table).Z_ENT = \(entityNumber) RETURNING Z_PK"
        let block = Set(keys)
        var blockInserted: [Int64] = []
        var returned = 0
        do {
            for (statement, _) in try layout.insertStatements(nodes, of: entity, primaryKeys: keys, permanent: { $0 }) {
                let result = try run(statement.sql + clause, statement.values)
                returned += result.rowCount
                for row in 0..<result.rowCount {
                    let key = try result.requiredInt64(row: row, column: 0)
                    if block.contains(key) {
                        blockInserted.append(key)
                    } else if key < first {
                        // A row stored before the request; a later key is an earlier row of it, which stays an insert.
                        let columns = index(of: Set(written.filter { !keyPositions.contains($0) }))
                        if let earlier = updated.updateValue(columns, forKey: key), earlier != columns {
                            updated[key] = index(of: writtenColumns[earlier].union(writtenColumns[columns]))
                        }
                    }
                }
            }
        } catch let error as PostgreSQLError where error.kind == .uniqueViolation {
            // Another constraint's index refused a row: the transaction is lost, and with it the holders to name.
            throw ObjectGraphError.duplicateKey(entity: entity.name, constraint: constraints.flatMap(\.keys), values: [],
                                                row: sample.index, storedObjectID: nil)
        }
        // DO UPDATE's WHERE refused a holder of another entity of the hierarchy: neither inserted nor merged.
        if returned != nodes.count {
            throw try duplicateKey(among: pending.filter { row in try holder(of: row, target).map { $0.entityNumber != entityNumber } ?? false })
                ?? PersistentStoreError(.ioFailure, url: store.url, message: "rows of the batch insert of \(entity.name) were neither inserted nor merged")
        }
        inserted += blockInserted.sorted()
    }

    private mutating func index(of columns: Set<Int>) -> Int {
        if let found = writtenColumns.firstIndex(of: columns) { return found }
        writtenColumns.append(columns)
        return writtenColumns.count - 1
    }
}
