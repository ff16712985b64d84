import Foundation

/// A store that runs batch updates and deletes itself, in one transaction,
/// without managed objects. ``SQLiteStore`` and ``InMemoryStore`` are.
package protocol BatchRequestStore: PersistentStore {
    /// Runs a batch request checked against the model, atomically: every change or none.
    func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges
}

/// A batch request as a store sees it: names resolved, values converted.
package enum StoreBatchRequest: Sendable {
    case update(StoreBatchUpdate)
    case delete(StoreBatchDelete)
}

/// A batch update checked against the model.
package struct StoreBatchUpdate: Sendable {
    /// The rows to change (a `.managedObject` fetch without sort or limit).
    package var fetch: StoreFetch
    /// Each changed attribute and its new value, in a stable order: a constant
    /// already converted to the attribute's type, or an expression that reads
    /// only the row's own attributes and whose type fits the attribute.
    package var values: [(attribute: AttributeDescription, value: FetchExpression)]
}

/// A batch delete checked against the model.
package enum StoreBatchDelete: Sendable {
    /// The rows a `.managedObject` fetch matches.
    case matching(StoreFetch)
    /// These rows, all in this store.
    case objectIDs([ObjectID])
}
