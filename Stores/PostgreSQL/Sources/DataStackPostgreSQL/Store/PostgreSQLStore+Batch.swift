import CLibPQ
import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Batch update and delete

@_spi(StoreImplementation) extension PostgreSQLStore: BatchRequestStore {
    /// Runs a batch request in one transaction, set-based, as the SQLite store
    /// runs it (the condition, `SET` list and history masks are the shared
    /// ones, StoreLayout+Batch.swift, in PostgreSQL's dialect):
    /// - an update is one `UPDATE … AS t0 SET …, Z_OPT = Z_OPT + 1 WHERE
    ///   <the fetch's condition> RETURNING t0.Z_PK, t0.Z_ENT` — the rows it
    ///   changed come back with it, so no second read selects them, and no
    ///   other connection can change them between the read and the write;
    /// - a delete of an entity without delete rules deletes its join-table rows
    ///   and then its rows by the same condition (`DELETE … RETURNING`);
    /// - a delete whose rows have delete rules, or that names its rows by ID,
    ///   reads them `FOR UPDATE` and follows the rules (``ObjectGraph/BatchDeletePlan``,
    ///   the rules every store applies), then deletes by key.
    ///
    /// With persistent history the transaction is numbered after the rows are
    /// written, as a save's is (the counter's row lock is then held only to
    /// the commit and never taken before a row lock, so a batch and a save
    /// cannot deadlock), and one `INSERT … SELECT … FROM unnest(<keys>)` per
    /// entity records a change per row, in key order, with the `ZCOLUMNS` of
    /// the updated attributes as the SQLite store's batches write them. Any
    /// error rolls all of it back.
    ///
    /// - Throws: ``ObjectGraph/ObjectGraphError`` (`uniquenessConflict` naming
    ///   the selected objects, `valueOutOfRange`, `deleteDenied`,
    ///   `predicateDoesNotCompile` — a predicate PostgreSQL cannot answer as
    ///   SQLite does), ``ObjectGraph/PersistentStoreError`` (read-only, a lost
    ///   connection). Nothing is changed when it throws.
    public func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges {
        try requireObjectSaves()
        let layout = try layout
        let (identifier, tracksHistory) = stateLock.withLock { (state.identifier, state.tracksHistory) }
        let history = BatchHistoryRecord(tracksHistory: tracksHistory, author: context?.transactionAuthor,
                                         contextName: context?.name, storeIdentifier: identifier)
        switch request {
        case .update(let update):
            let selection = try layout.batchSelection(for: update.fetch)
            return try withConnection { connection in
                do {
                    return try connection.transaction {
                        try batchUpdate(update, selection: selection, layout: layout, history: history, connection)
                    }
                } catch let error as PostgreSQLError where error.kind == .uniqueViolation {
                    // Rolled back; the rows the update selected are named as the SQLite store names them.
                    throw try uniquenessConflict(update, selection: selection, layout: layout, connection)
                } catch let error as PostgreSQLError where error.code == "22003" {
                    throw Self.outOfRange(update)
                }
            }
        case .delete(.matching(let fetch)) where !BatchDeletePlan.appliesRules(to: fetch):
            let selection = try layout.batchSelection(for: fetch)
            return try withConnection { connection in
                try connection.transaction {
                    try batchDelete(selection, layout: layout, history: history, connection)
                }
            }
        case .delete(let delete):
            return try withConnection { connection in
                try connection.transaction {
                    try batchDelete(delete, layout: layout, history: history, connection)
                }
            }
        case .insert(let insert):
            return try withConnection { connection in
                try connection.transaction {
                    try batchInsert(insert, layout: layout, history: history, connection)
                }
            }
        }
    }

    // MARK: Update

    private func batchUpdate(_ update: StoreBatchUpdate, selection: StoreLayout.BatchSelection, layout: StoreLayout,
                             history: BatchHistoryRecord, _ connection: PostgreSQLConnection) throws -> BatchChanges {
        // The narrower integers computed come back too, to be checked: PostgreSQL's BIGINT keeps
        // what an Int16 or Int32 attribute cannot, and it would read back as another number.
        let checks = try layout.narrowIntegerChecks(of: update)
        let returning = "RETURNING t0.Z_PK, t0.Z_ENT" + checks.map { ", t0.\($0.column)" }.joined()
        let statement = try layout.batchUpdate(update, selection: selection, returning: returning)
        let result = try connection.execute(statement.sql, statement.bindings.map(PostgreSQLValue.init))
        for (offset, check) in checks.enumerated() {
            for row in 0..<result.rowCount {
                guard let value = try result.int64(row: row, column: 2 + offset), !check.range.contains(value) else { continue }
                throw ObjectGraphError.valueOutOfRange(key: check.attribute.name, entity: update.fetch.entity.name,
                                                       value: String(value), type: check.attribute.type)
            }
        }
        let rows = try BatchRows(result, layout: layout, storeIdentifier: history.storeIdentifier)
        guard !rows.isEmpty else { return BatchChanges() }
        let attributes = update.values.map(\.attribute)
        if attributes.contains(where: { $0.isIndexedBySpotlight }) {
            try reindexSearch(rows.ids.compactMap { id in id.primaryKey.map { (id.entity, $0) } }, layout: layout, connection)
        }
        let token = try history.record(rows, as: .update, entityOrder: selection.entityNumbers, store: self, layout: layout, connection) {
            try layout.batchHistoryColumns(entityNumbered: $0, attributes: attributes)
        }
        return BatchChanges(updatedObjectIDs: rows.ids, historyToken: token)
    }

    /// The error of an update a unique index refused, naming the rows it selected
    /// (read again after the rollback) and the constraint on the attributes it set.
    private func uniquenessConflict(_ update: StoreBatchUpdate, selection: StoreLayout.BatchSelection, layout: StoreLayout,
                                    _ connection: PostgreSQLConnection) throws -> ObjectGraphError {
        let result = try connection.execute("SELECT t0.Z_PK, t0.Z_ENT FROM \(selection.table) t0\(selection.whereClause)",
                                            selection.bindings.map(PostgreSQLValue.init))
        let rows = try BatchRows(result, layout: layout, storeIdentifier: identifier)
        let entity = update.fetch.entity
        let names = Set(update.values.map(\.attribute.name))
        var tree = [entity.rootEntity]
        var position = 0
        while position < tree.count {
            tree += tree[position].subentities
            position += 1
        }
        let constraint = tree.lazy.flatMap(\.uniquenessConstraints).first { !names.isDisjoint(with: $0) } ?? []
        return ObjectGraphError.uniquenessConflict([
            UniquenessConflict(entityName: entity.name, constraint: constraint, objectIDs: Array(rows.ids), databaseObjectID: nil),
        ])
    }

    /// A computed integer past 64 bits, which PostgreSQL's cast refused.
    private static func outOfRange(_ update: StoreBatchUpdate) -> ObjectGraphError {
        let integers: Set<AttributeType> = [.integer16, .integer32, .integer64]
        let attribute = update.values.first { integers.contains($0.attribute.type) }?.attribute
            ?? update.values[0].attribute
        return ObjectGraphError.valueOutOfRange(key: attribute.name, entity: update.fetch.entity.name,
                                                value: "a number past 64 bits", type: attribute.type)
    }

    // MARK: Delete

    /// Deletes the selected rows, and the join-table rows that name them, by
    /// their condition. For entities without delete rules.
    private func batchDelete(_ selection: StoreLayout.BatchSelection, layout: StoreLayout, history: BatchHistoryRecord,
                             _ connection: PostgreSQLConnection) throws -> BatchChanges {
        let parameters = selection.bindings.map(PostgreSQLValue.init)
        for (table, column) in layout.joinTableColumns(naming: selection.table) {
            _ = try connection.execute("DELETE FROM \(table) WHERE \(column) IN (\(selection.keysQuery))", parameters)
        }
        // With history, the preserved attributes' columns come back too: the tombstones.
        var returned: [String] = []
        var tombstoneColumns: [Int64: [Int]] = [:]
        if history.tracksHistory {
            for number in selection.entityNumbers {
                let attributes = layout.tombstoneAttributes(ofEntityNumbered: number)
                guard !attributes.isEmpty, let entity = layout.entity(numbered: number) else { continue }
                tombstoneColumns[number] = try layout.attributeColumns(of: attributes, in: entity).map { column in
                    if let position = returned.firstIndex(of: column) { return 2 + position }
                    returned.append(column)
                    return 1 + returned.count
                }
            }
        }
        let result = try connection.execute(
            "DELETE FROM \(selection.table) AS t0\(selection.whereClause) RETURNING t0.Z_PK, t0.Z_ENT" + returned.map { ", t0.\($0)" }.joined(),
            parameters)
        let rows = try BatchRows(result, layout: layout, storeIdentifier: history.storeIdentifier, tombstoneColumns: tombstoneColumns)
        guard !rows.isEmpty else { return BatchChanges() }
        let token = try history.record(rows, as: .delete, entityOrder: selection.entityNumbers, store: self, layout: layout, connection) { _ in nil }
        return BatchChanges(deletedObjectIDs: rows.ids, historyToken: token)
    }

    /// Deletes rows read first, by the delete rules: cascades, nullified
    /// to-ones (their version goes up), join-table rows, then the rows.
    private func batchDelete(_ delete: StoreBatchDelete, layout: StoreLayout, history: BatchHistoryRecord,
                             _ connection: PostgreSQLConnection) throws -> BatchChanges {
        let matched: [IncrementalStoreNode]
        switch delete {
        case .matching(let fetch): matched = try lockedRows(matching: fetch, layout: layout, connection)
        case .objectIDs(let ids): matched = try lockedRows(ids, layout: layout, connection)
        }
        let plan = try BatchDeletePlan(matched: matched,
                                       rows: { try lockedRows($0, layout: layout, connection) },
                                       toMany: { try toManyDestinations($0, of: $1, layout: layout, connection) })
        guard !plan.deleted.isEmpty else { return BatchChanges() }

        // Cleared to-ones: rows clearing the same columns share one statement.
        var clearing: [String: [Int64]] = [:]
        for (row, relationships) in plan.cleared {
            let entity = row.objectID.entity
            let set = (try layout.toOneColumns(of: relationships, in: entity).map { "\($0) = NULL" } + ["Z_OPT = Z_OPT + 1"])
                .joined(separator: ", ")
            clearing["UPDATE \(try layout.table(of: entity)) SET \(set) WHERE Z_PK", default: []].append(row.objectID.primaryKey ?? 0)
        }
        for (sql, keys) in clearing {
            _ = try connection.execute(sql + " " + layout.dialect.keyMembership(parameter: 1), [PostgreSQLValue(layout.keyArray(keys))])
        }
        var keysByTable: [String: [Int64]] = [:]
        for row in plan.deleted {
            keysByTable[try layout.table(of: row.objectID.entity), default: []].append(row.objectID.primaryKey ?? 0)
        }
        for (table, keys) in keysByTable.sorted(by: { $0.key < $1.key }) {
            let parameter = [PostgreSQLValue(layout.keyArray(keys))]
            for (join, column) in layout.joinTableColumns(naming: table) {
                _ = try connection.execute("DELETE FROM \(join) WHERE \(column) \(layout.dialect.keyMembership(parameter: 1))", parameter)
            }
            _ = try connection.execute("DELETE FROM \(table) WHERE Z_PK \(layout.dialect.keyMembership(parameter: 1))", parameter)
        }
        var token: PersistentHistoryToken?
        if history.tracksHistory {
            let before = Dictionary((plan.deleted + plan.cleared.map(\.row)).map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
            token = try recordHistory(of: SaveChangesRequest(updatedObjects: plan.clearedRows, deletedObjects: plan.deleted),
                                      before: before, permanent: { $0 }, author: history.author, contextName: history.contextName,
                                      storeIdentifier: history.storeIdentifier, layout: layout, connection)
        }
        return plan.changes(historyToken: token)
    }

    /// The rows a fetch matches, locked (`FOR UPDATE`) to the transaction's end.
    private func lockedRows(matching fetch: StoreFetch, layout: StoreLayout,
                            _ connection: PostgreSQLConnection) throws -> [IncrementalStoreNode] {
        let query: StoreLayout.Query
        do {
            query = try layout.query(for: fetch)
        } catch {
            throw ObjectGraphError.predicateDoesNotCompile(predicate: fetch.predicate?.description ?? "", entity: fetch.entity.name,
                                                           reason: "\(error)")
        }
        // OF t0: a predicate's LEFT JOINs read other rows, which stay unlocked (and may be NULL).
        let result = try connection.execute(query.sql + " FOR UPDATE OF t0", query.bindings.map(PostgreSQLValue.init))
        var reader = layout.rowReader(storeIdentifier: identifier)
        return try result.rows.map { try reader.node(from: $0) }
    }

    /// The rows of these IDs that exist, locked, in the order given.
    private func lockedRows(_ ids: [ObjectID], layout: StoreLayout, _ connection: PostgreSQLConnection) throws -> [IncrementalStoreNode] {
        let found = Dictionary(try rows(of: ids, layout: layout, locking: true, connection).map { ($0.objectID, $0) },
                               uniquingKeysWith: { first, _ in first })
        return ids.compactMap { found[$0] }
    }

    /// The destinations of a to-many relationship of several owners, by owner: one query.
    private func toManyDestinations(_ relationship: RelationshipDescription, of owners: [ObjectID], layout: StoreLayout,
                                    _ connection: PostgreSQLConnection) throws -> [ObjectID: [ObjectID]] {
        guard let sql = layout.toManyQuery(for: relationship) else { return [:] }
        let byKey = Dictionary(owners.compactMap { id in id.primaryKey.map { ($0, id) } }, uniquingKeysWith: { first, _ in first })
        var reader = layout.rowReader(storeIdentifier: identifier)
        var members: [ObjectID: [ObjectID]] = [:]
        for row in try connection.execute(cached: sql, [PostgreSQLValue(layout.keyArray(byKey.keys.sorted()))]).rows {
            if let owner = byKey[try row.int64(at: 2)] { members[owner, default: []].append(try reader.objectID(from: row)) }
        }
        return members
    }
}

/// The rows a batch statement returned (`RETURNING t0.Z_PK, t0.Z_ENT`): their
/// keys by entity number, and their IDs.
struct BatchRows {
    private(set) var keysByEntity: [Int64: [Int64]] = [:]
    /// Each row's tombstone values (as their columns' text), by entity, in the order of ``keysByEntity``.
    private(set) var tombstonesByEntity: [Int64: [[String?]]] = [:]
    private(set) var ids: Set<ObjectID> = []

    var isEmpty: Bool { ids.isEmpty }

    /// - Parameter tombstoneColumns: for an entity with preserved attributes,
    ///   the result's column of each, in tombstone order.
    /// - Throws: ``ObjectGraph/PersistentStoreError`` for a row of an entity number the model does not have.
    init(_ result: PostgreSQLResult, layout: StoreLayout, storeIdentifier: String, tombstoneColumns: [Int64: [Int]] = [:]) throws {
        var reader = layout.rowReader(storeIdentifier: storeIdentifier)
        ids.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            let key = try result.key(row: row, column: 0)
            let number = try result.key(row: row, column: 1)
            keysByEntity[number, default: []].append(key)
            if let columns = tombstoneColumns[number] {
                tombstonesByEntity[number, default: []].append(columns.map { result.string(row: row, column: $0) })
            }
            ids.insert(try reader.objectID(entityNumber: number, primaryKey: key))
        }
        // History records a batch's rows in key order, as the SQLite store's does; a
        // statement returns them in the table's order, mostly sorted already.
        if tombstoneColumns.isEmpty {
            for (number, keys) in keysByEntity where !keys.isSorted { keysByEntity[number] = keys.sorted() }
        } else {
            for (number, keys) in keysByEntity where !keys.isSorted {
                let order = keys.indices.sorted { keys[$0] < keys[$1] }
                keysByEntity[number] = order.map { keys[$0] }
                if let tombstones = tombstonesByEntity[number] { tombstonesByEntity[number] = order.map { tombstones[$0] } }
            }
        }
    }
}

extension Array where Element == Int64 {
    fileprivate var isSorted: Bool { zip(self, dropFirst()).allSatisfy { $0 <= $1 } }
}

extension PostgreSQLResult {
    /// A key (`Z_PK`, `Z_ENT`) the statement returned, read from the text libpq
    /// holds without making a `String` of it: a batch reads a million of them.
    ///
    /// - Throws: ``PostgreSQLError`` naming the column for NULL or anything but decimal digits.
    fileprivate func key(row: Int, column: Int) throws -> Int64 {
        guard !isNull(row: row, column: column), let text = PQgetvalue(result, Int32(row), Int32(column)) else {
            return try requiredInt64(row: row, column: column)
        }
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        var value: Int64 = 0
        var valid = length > 0 && length <= 18
        for index in 0..<length where valid {
            let digit = Int64(UInt8(truncatingIfNeeded: text[index])) - 48
            if digit < 0 || digit > 9 { valid = false } else { value = value * 10 + digit }
        }
        // Signs, 19 digits and anything else: the general reader, which also names what is wrong.
        return valid ? value : try requiredInt64(row: row, column: column)
    }
}

/// A batch request's persistent history: one transaction, as a save records
/// one, or nothing when the store does not track history.
struct BatchHistoryRecord {
    let tracksHistory: Bool
    let author: String?
    let contextName: String?
    let storeIdentifier: String

    /// One statement's worth of change rows: a type, an entity number, the
    /// rows' keys (in key order: recorded in the order given, as the SQLite store
    /// records them) and their `ZCOLUMNS`.
    typealias Group = (type: PersistentHistoryChange.ChangeType, entity: Int64, keys: [Int64], columns: Data?, tombstones: [[String?]]?)

    /// Records the rows a batch statement returned, as changes of `type`, entity
    /// by entity in `entityOrder`, with `columns(entity number)` as `ZCOLUMNS`.
    func record(_ rows: BatchRows, as type: PersistentHistoryChange.ChangeType, entityOrder: [Int64], store: PostgreSQLStore,
                layout: StoreLayout, _ connection: PostgreSQLConnection,
                columns: (Int64) throws -> Data?) throws -> PersistentHistoryToken? {
        let order = entityOrder + rows.keysByEntity.keys.filter { !entityOrder.contains($0) }.sorted()
        let groups: [Group] = try order.compactMap { entity in
            guard let keys = rows.keysByEntity[entity] else { return nil }
            return (type, entity, keys, try columns(entity), rows.tombstonesByEntity[entity])
        }
        return try record(groups, store: store, connection)
    }

    /// Numbers a transaction (after the batch's writes, as a save numbers its
    /// own), records each group with one `INSERT … SELECT … FROM unnest(keys)`
    /// (rows numbered in the array's order; sorting them in the server cost a
    /// third of the insert), then announces it (`NOTIFY`, delivered at commit).
    func record(_ groups: [Group], store: PostgreSQLStore, _ connection: PostgreSQLConnection) throws -> PersistentHistoryToken? {
        guard tracksHistory else { return nil }
        let number = try store.insertHistoryTransaction(author: author, contextName: contextName, connection)
        let tombstoneCount = groups.compactMap { $0.tombstones?.first?.count }.max() ?? 0
        if tombstoneCount > 0 { try store.ensureTombstoneColumns(tombstoneCount, connection) }
        for group in groups where !group.keys.isEmpty {
            // Per tombstone column, the rows' values: the SELECT's t0, t1… beside the key.
            let count = group.tombstones?.first?.count ?? 0
            let tombstones = (0..<count).map { index in group.tombstones?.map { $0[index] } ?? [] }
            let names = (0..<count).map { ", t\($0)" }.joined()
            let arrays = (0..<count).map { ", $\($0 + 6)::text[]" }.joined()
            _ = try connection.execute(cached: """
                INSERT INTO ACHANGE (ZTRANSACTIONID, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZCOLUMNS\(PostgreSQLStore.tombstoneColumnList(count))) \
                SELECT $1::bigint, $2::bigint, $3::bigint, k, $4::bytea\(names) FROM unnest($5::bigint[]\(arrays)) AS c(k\(names))
                """, [PostgreSQLValue(number), PostgreSQLValue(group.type.rawValue), PostgreSQLValue(group.entity),
                      group.columns.map { .bytes(Array($0)) } ?? .null, .text("{" + group.keys.map(String.init).joined(separator: ",") + "}")]
                    + tombstones.map { .text(PostgreSQLStore.textArray($0)) })
        }
        _ = try connection.execute(cached: "SELECT pg_notify($1, $2)",
                                   [.text(PostgreSQLStore.historyChannel), .text("\(storeIdentifier):\(number)")])
        return PersistentHistoryToken(storeIdentifier: storeIdentifier, transactionNumber: number)
    }
}
