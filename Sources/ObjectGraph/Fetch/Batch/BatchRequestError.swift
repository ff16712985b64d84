import Foundation

/// Why a batch request was refused. Nothing was changed.
///
/// Errors the rest of the framework already names keep their type:
/// ``ObjectGraphError/unknownEntity(_:)``, ``ObjectGraphError/unknownKey(_:entity:)``,
/// ``ObjectGraphError/wrongValueType(key:entity:expected:actual:)``,
/// ``ObjectGraphError/uniquenessConflict(_:)`` and ``PersistentStoreError`` for a read-only store.
public enum BatchRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The predicate cannot be run against the entity's rows.
    case predicateDoesNotCompile(predicate: String, entity: String, reason: String)
    /// A key of `propertiesToUpdate` names a relationship; a batch update sets attributes only.
    case notAnAttribute(key: String, entity: String)
    /// Arithmetic in `propertiesToUpdate` uses a value that is not an integer or floating-point number.
    case notNumeric(key: String, entity: String, operand: String)
    /// A `deny` rule forbids deleting the object while the relationship has destinations.
    case deleteDenied(objectID: ObjectID, relationship: String)
    /// The store holding the entity does not run batch requests.
    case unsupportedStore(type: String, entity: String)

    public var description: String {
        switch self {
        case .predicateDoesNotCompile(let predicate, let entity, let reason):
            "the predicate \(predicate) does not compile for entity \(entity): \(reason)"
        case .notAnAttribute(let key, let entity):
            "\(entity).\(key) is a relationship; a batch update sets attributes only"
        case .notNumeric(let key, let entity, let operand):
            "the new value of \(entity).\(key) does arithmetic on \(operand), which is not an integer or floating-point number"
        case .deleteDenied(let objectID, let relationship):
            "\(objectID) cannot be deleted: its relationship \(relationship) has the deny rule and is not empty"
        case .unsupportedStore(let type, let entity):
            "the \(type) store holding entity \(entity) does not run batch requests"
        }
    }
}
