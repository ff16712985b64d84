import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Prefetching and uniqueness lookups

extension PostgreSQLStore: RelationshipPrefetchingStore, UniquenessCheckingStore {
    /// The destinations of `relationship` for each owner, with their rows: one
    /// query for all owners (their keys as one array parameter).
    public func prefetch(_ relationship: RelationshipDescription, forObjectsWith objectIDs: [ObjectID]) throws -> RelationshipPrefetch {
        let layout = try layout
        guard let query = layout.prefetchQuery(for: relationship) else { return RelationshipPrefetch() }
        var ownerByKey: [Int64: ObjectID] = [:]
        for id in objectIDs { if let key = id.primaryKey { ownerByKey[key] = id } }
        guard !ownerByKey.isEmpty else { return RelationshipPrefetch() }
        let result = try withReader { try $0.execute(cached: query.sql, [PostgreSQLValue(layout.keyArray(ownerByKey.keys.sorted()))]) }
        var reader = layout.rowReader(storeIdentifier: identifier)
        var prefetch = RelationshipPrefetch()
        for row in result.rows {
            let node = try reader.node(from: row)
            let ownerKey = try row.int64(at: query.ownerColumn)
            guard let owner = ownerByKey[ownerKey] else {
                throw PersistentStoreError(.ioFailure, url: reportedURL, message: """
                    \(relationship.entity?.name ?? "?").\(relationship.name) of row \(ownerKey) was read for an owner not asked for
                    """)
            }
            prefetch.destinations[owner, default: []].append(node.objectID)
            prefetch.nodes.append(node)
        }
        return prefetch
    }

    /// For each tuple of `values`, the ID of a row of `entity` (or a subentity)
    /// holding them in `keys`, or nil; a tuple with a nil matches nothing, as in
    /// a unique index. One query per tuple, on one prepared statement.
    public func objectIDs(of entity: EntityDescription, matching keys: [String], values: [[PropertyValue]]) throws -> [ObjectID?] {
        let layout = try layout
        let sql = try layout.rowLookupQuery(for: entity, keys: keys)
        var reader = layout.rowReader(storeIdentifier: identifier)
        return try withReader { connection in
            try values.map { tuple -> ObjectID? in
                guard tuple.count == keys.count, !tuple.contains(where: \.isNull) else { return nil }
                let result = try connection.execute(cached: sql, tuple.map { PostgreSQLValue(StoredValue($0)) })
                return try result.rows.first.map { try reader.objectID(from: $0) }
            }
        }
    }
}
