import Foundation

/// A store that runs batch inserts, updates and deletes itself, in one transaction,
/// without managed objects. `SQLiteStore` and `InMemoryStore` are.
@_spi(StoreImplementation) public protocol BatchRequestStore: PersistentStore {
    /// Runs a batch request checked against the model, atomically: every change or none.
    func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges
}

/// A batch request as a store sees it: names resolved, values converted.
@_spi(StoreImplementation) public enum StoreBatchRequest: Sendable {
    case update(StoreBatchUpdate)
    case delete(StoreBatchDelete)
    case insert(StoreBatchInsert)
}

/// A batch update checked against the model.
@_spi(StoreImplementation) public struct StoreBatchUpdate: Sendable {
    /// The rows to change (a `.managedObject` fetch without sort or limit).
    public var fetch: StoreFetch
    /// Each changed attribute and its new value, in a stable order: a constant
    /// already converted to the attribute's type, or an expression that reads
    /// only the row's own attributes and whose type fits the attribute.
    public var values: [(attribute: AttributeDescription, value: FetchExpression)]
}

/// A batch delete checked against the model.
@_spi(StoreImplementation) public enum StoreBatchDelete: Sendable {
    /// The rows a `.managedObject` fetch matches.
    case matching(StoreFetch)
    /// These rows, all in this store.
    case objectIDs([ObjectID])
}

/// A batch insert checked against the model: a concrete entity, rows read
/// and converted one at a time by ``BatchInsertRows``.
@_spi(StoreImplementation) public struct StoreBatchInsert: Sendable {
    /// What a row does whose unique key is already held, by a stored row or
    /// an earlier row of the same request (from the context's merge policy).
    public enum OnConflict: Sendable, Equatable {
        /// The request fails with ``ObjectGraphError/Code-swift.struct/duplicateKey``.
        case fail
        /// The row's given values replace the holder's (an upsert): object trump.
        case overwrite
        /// The holder is kept as it is and the row dropped: store trump.
        case keep
    }

    public var entity: EntityDescription
    public var rows: BatchInsertRequest.Rows
    public var onConflict: OnConflict

    public init(entity: EntityDescription, rows: BatchInsertRequest.Rows, onConflict: OnConflict) {
        self.entity = entity
        self.rows = rows
        self.onConflict = onConflict
    }

    /// The uniqueness constraints a row of the entity must keep: its own and
    /// its superentities', each with the entity that declares it.
    public var constraints: [(owner: EntityDescription, keys: [String])] {
        var result: [(owner: EntityDescription, keys: [String])] = []
        var level: EntityDescription? = entity
        while let current = level {
            result += current.uniquenessConstraints.map { (current, $0) }
            level = current.superentity
        }
        return result
    }
}
