import Foundation

/// Deletes rows in the store without loading objects, chosen by a fetch
/// request's predicate or by object IDs (Core Data: `NSBatchDeleteRequest`).
///
/// ```swift
/// var request = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Quote",
///                                  predicate: try FetchPredicate(format: "date < %@", cutoff)))
/// request.resultType = .objectIDs
/// let result = try context.execute(request)
/// ```
///
/// Delete rules are applied in the store, as a context applies them to
/// objects: `cascade` deletes the destinations too (and theirs), `nullify`
/// clears the destinations' inverse, `deny` refuses the whole request when a
/// matched row has a destination. Core Data documents none of this for its
/// batch delete; see ``ManagedObjectContext/execute(_:)-(BatchDeleteRequest)``
/// for why this is the choice here.
public struct BatchDeleteRequest: Sendable {
    /// Which rows a request deletes.
    package enum Selection: Sendable {
        case matching(entityName: String, predicate: FetchPredicate?, includesSubentities: Bool)
        case objectIDs([ObjectID])
    }

    package let selection: Selection
    /// What ``ManagedObjectContext/execute(_:)-(BatchDeleteRequest)`` returns. The default is ``BatchResultType/statusOnly``.
    public var resultType: BatchResultType = .statusOnly

    /// Deletes the rows the fetch request matches: its entity, predicate and
    /// `includesSubentities` count; its sort, limit and offset do not.
    public init<Result>(fetchRequest: FetchRequest<Result>) {
        selection = .matching(entityName: fetchRequest.entityName, predicate: fetchRequest.predicate,
                              includesSubentities: fetchRequest.includesSubentities)
    }

    /// Deletes these rows; IDs without a row are skipped.
    public init(objectIDs: [ObjectID]) {
        selection = .objectIDs(objectIDs)
    }
}
