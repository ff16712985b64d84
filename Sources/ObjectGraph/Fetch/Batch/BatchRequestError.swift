import Foundation

/// Why a batch request was refused. Nothing was changed.
///
/// Errors the rest of the framework already names keep their type:
/// ``ObjectGraphError/unknownEntity(_:)``, ``ObjectGraphError/unknownKey(_:entity:)``,
/// ``ObjectGraphError/wrongValueType(key:entity:expected:actual:)``,
/// ``ObjectGraphError/uniquenessConflict(_:)``, ``PersistentStoreError`` for a read-only store,
/// and ``FetchExpressionError`` for a new value whose arithmetic is not on numbers.
public enum BatchRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The predicate cannot be run against the entity's rows.
    case predicateDoesNotCompile(predicate: String, entity: String, reason: String)
    /// A key of `propertiesToUpdate` names a relationship; a batch update sets attributes only.
    case notAnAttribute(key: String, entity: String)
    /// A new value in `propertiesToUpdate` uses an aggregate or a key path through
    /// a relationship: an `UPDATE` sets each row from its own columns, and cannot
    /// join another table or reduce several rows.
    case notComputedFromTheRow(key: String, entity: String, expression: String)
    /// A `deny` rule forbids deleting the object while the relationship has destinations.
    case deleteDenied(objectID: ObjectID, relationship: String)
    /// The store holding the entity does not run batch requests.
    case unsupportedStore(type: String, entity: String)
    /// `propertiesToUpdate` is empty: the request would only bump every
    /// matched row's version, making every context that holds one conflict.
    case nothingToUpdate(entity: String)
    /// The request would change several stores, which cannot share one
    /// transaction: a failure in the second would leave the first changed.
    case severalStores(entity: String, stores: Int)

    public var description: String {
        switch self {
        case .predicateDoesNotCompile(let predicate, let entity, let reason):
            "the predicate \(predicate) does not compile for entity \(entity): \(reason)"
        case .notAnAttribute(let key, let entity):
            "\(entity).\(key) is a relationship; a batch update sets attributes only"
        case .notComputedFromTheRow(let key, let entity, let expression):
            "the new value of \(entity).\(key), \(expression), must be computed from the row's own attributes: "
                + "a batch update cannot join another table or aggregate rows"
        case .deleteDenied(let objectID, let relationship):
            "\(objectID) cannot be deleted: its relationship \(relationship) has the deny rule and is not empty"
        case .unsupportedStore(let type, let entity):
            "the \(type) store holding entity \(entity) does not run batch requests"
        case .nothingToUpdate(let entity):
            "the batch update of \(entity) sets no property (propertiesToUpdate is empty)"
        case .severalStores(let entity, let stores):
            "the batch request on \(entity) would change \(stores) stores, which cannot change in one transaction; "
                + "run one request per store"
        }
    }
}
