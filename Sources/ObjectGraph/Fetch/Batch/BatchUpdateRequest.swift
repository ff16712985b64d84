import Foundation

/// Changes attributes of every row that matches a predicate, in the store,
/// without loading objects (Core Data: `NSBatchUpdateRequest`).
///
/// ```swift
/// var request = BatchUpdateRequest(entityName: "Stock", predicate: try FetchPredicate(format: "exchange == %@", "XNAS"))
/// request.propertiesToUpdate = ["price": .attribute("price") * 1.1]
/// request.resultType = .objectIDs
/// let result = try context.execute(request)
/// ```
///
/// Why it exists: repricing a hundred thousand rows through managed objects
/// reads, validates and writes each one; a batch update is one statement per
/// table in one transaction. The price is Core Data's: no validation rules, no
/// `willSave`, and contexts learn of the change only by a merge — see
/// ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)`` for what is kept
/// (uniqueness constraints, `Z_OPT`, history) and what is not.
public struct BatchUpdateRequest: Sendable {
    /// The entity whose rows change.
    public var entityName: String
    /// Which rows change; nil for all of them.
    public var predicate: FetchPredicate?
    /// Whether rows of subentities change too. The default is `true`.
    public var includesSubentities = true
    /// The new value of each attribute, by name. Relationships cannot be set.
    public var propertiesToUpdate: [String: BatchUpdateValue]
    /// What ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)`` returns. The default is ``BatchResultType/statusOnly``.
    public var resultType: BatchResultType = .statusOnly

    public init(entityName: String, predicate: FetchPredicate? = nil, propertiesToUpdate: [String: BatchUpdateValue] = [:]) {
        self.entityName = entityName
        self.predicate = predicate
        self.propertiesToUpdate = propertiesToUpdate
    }
}
