import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Fetching and firing faults

extension PostgreSQLStore {
    public func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult {
        switch request {
        case .fetch(let fetch): return try execute(fetch)
        case .save(let save): return .saved(try execute(save, in: context))
        }
    }

    private func execute(_ fetch: StoreFetch) throws -> StoreResult {
        let layout = try layout
        let query = try layout.query(for: fetch)
        let result = try withReader { connection in
            do {
                return try connection.execute(cached: query.sql, query.bindings.map(PostgreSQLValue.init))
            } catch let error as PostgreSQLError where error.code == PostgreSQLSearchIndex.inexactRowSQLState {
                // A phrase search or relevance sort reached a row the index holds only approximately.
                let format = fetch.predicate?.description ?? fetch.sortDescriptors.map(\.key).joined(separator: ", ")
                throw FetchPredicateError(format: format, message: error.message)
            }
        }
        var reader = layout.rowReader(storeIdentifier: identifier)
        switch fetch.resultType {
        case .count:
            return .count(Int(try result.requiredInt64(row: 0, column: 0)))
        case .managedObjectID:
            return .objectIDs(try result.rows.map { try reader.objectID(from: $0) })
        case .managedObject where fetch.returnsObjectsAsFaults:
            // Rows for the row cache, most never read: kept as bytes, as the SQLite store keeps them.
            return .encodedNodes(try result.rows.map { try reader.encodedNode(from: $0) })
        case .managedObject:
            return .nodes(try result.rows.map { try reader.node(from: $0) })
        case .dictionary:
            return .dictionaries(try result.rows.map { try reader.dictionary(from: $0, columns: query.dictionaryColumns) })
        }
    }

    public func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
        guard let node = try newValues(forObjectsWith: [objectID], in: context).first else { throw ObjectGraphError.objectNotFound(objectID) }
        return node
    }
}

extension PostgreSQLStore: BatchFaultingStore {
    /// The rows of these objects that exist: one query per table (`Z_PK IN` an array parameter),
    /// so a batch of faults the coordinator fires together costs one round trip.
    public func newValues(forObjectsWith objectIDs: [ObjectID], in context: ManagedObjectContext?) throws -> [IncrementalStoreNode] {
        let layout = try layout
        return try withReader { try rows(of: objectIDs, layout: layout, locking: false, $0) }
    }

    /// The rows of these objects that exist, one query per table; `locking`
    /// takes their row locks (`FOR UPDATE`) until the open transaction ends.
    func rows(of objectIDs: [ObjectID], layout: StoreLayout, locking: Bool, _ connection: PostgreSQLConnection) throws -> [IncrementalStoreNode] {
        var keysByTable: [String: (entity: EntityDescription, keys: [Int64])] = [:]
        for id in objectIDs {
            guard let key = id.primaryKey else { continue }
            keysByTable[try layout.table(of: id.entity), default: (id.entity, [])].keys.append(key)
        }
        var reader = layout.rowReader(storeIdentifier: identifier)
        var nodes: [IncrementalStoreNode] = []
        for (entity, keys) in keysByTable.values {
            let sql = try layout.rowsQuery(for: entity) + (locking ? " FOR UPDATE" : "")
            let result = try connection.execute(cached: sql, [PostgreSQLValue(layout.keyArray(keys))])
            nodes += try result.rows.map { try reader.node(from: $0) }
        }
        return nodes
    }
}

extension PostgreSQLStore {
    public func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                         in context: ManagedObjectContext?) throws -> PropertyValue {
        guard relationship.isToMany else {
            return try newValues(forObjectWith: objectID, in: context).values[relationship.index]
        }
        guard let key = objectID.primaryKey, let sql = try layout.toManyQuery(for: relationship) else { return .objects([]) }
        let layout = try layout
        var reader = layout.rowReader(storeIdentifier: identifier)
        let result = try withReader { try $0.execute(cached: sql, [PostgreSQLValue(layout.keyArray([key]))]) }
        return .objects(try result.rows.map { try reader.objectID(from: $0) })
    }

    public func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] {
        try requireObjectSaves()
        return try withConnection { connection in
            try connection.transaction { try permanentIDs(for: objectIDs, connection) }
        }
    }

    /// Hands out primary keys from each root entity's `Z_PRIMARYKEY.Z_MAX`, one
    /// statement per root: its row lock, held to the end of the transaction,
    /// keeps two writers from taking the same keys.
    func permanentIDs(for objectIDs: [ObjectID], _ connection: PostgreSQLConnection) throws -> [ObjectID] {
        let layout = try layout
        var countByRoot: [Int64: Int64] = [:]
        for id in objectIDs where id.isTemporaryID { countByRoot[try layout.rootNumber(of: id.entity), default: 0] += 1 }
        var nextKey: [Int64: Int64] = [:]
        for (root, count) in countByRoot.sorted(by: { $0.key < $1.key }) {
            let result = try connection.execute(cached: "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + $1 WHERE Z_ENT = $2 RETURNING Z_MAX",
                                                [PostgreSQLValue(count), PostgreSQLValue(root)])
            guard result.rowCount == 1 else {
                throw PersistentStoreError(.ioFailure, url: reportedURL, message: "Z_PRIMARYKEY has no row for entity number \(root)")
            }
            nextKey[root] = try result.requiredInt64(row: 0, column: 0) - count + 1
        }
        return try objectIDs.map { id in
            guard id.isTemporaryID else { return id }
            let root = try layout.rootNumber(of: id.entity)
            let key = nextKey[root] ?? 1
            nextKey[root] = key + 1
            return newObjectID(for: id.entity, primaryKey: key)
        }
    }
}
