import Foundation

/// Why a batch request was refused. Nothing was changed.
///
/// Errors the rest of the framework already names keep their type:
/// ``ObjectGraphError/unknownEntity(_:)``, ``ObjectGraphError/unknownKey(_:entity:)``,
/// ``ObjectGraphError/wrongValueType(key:entity:expected:actual:)``,
/// ``ObjectGraphError/uniquenessConflict(_:)``, ``PersistentStoreError`` for a read-only store,
/// and ``FetchExpressionError`` for a new value whose arithmetic is not on numbers.
/// A batch insert's duplicate key is its own case,
/// ``duplicateKey(entity:constraint:values:row:storedObjectID:)``: its rows have
/// no object IDs, so the error names the row by its position and the key by its values.
public enum BatchRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The predicate cannot be run against the entity's rows.
    case predicateDoesNotCompile(predicate: String, entity: String, reason: String)
    /// A key of `propertiesToUpdate`, or of a batch insert's row, names a
    /// relationship; batch requests set attributes only.
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
    /// A batch insert's row leaves a non-optional attribute without a value:
    /// it gives none (or nil) and the attribute has no default. `row` counts from 0.
    case missingValue(key: String, entity: String, row: Int)
    /// A batch insert's row holds the values of a uniqueness constraint that a
    /// stored row (`storedObjectID`) or an earlier row of the request (nil)
    /// holds, and the context's merge policy is ``MergePolicy/error`` — or the
    /// holder is a row of another entity of the hierarchy, which no policy
    /// may overwrite. `entity` declares the constraint; `row` counts from 0.
    case duplicateKey(entity: String, constraint: [String], values: [PropertyValue], row: Int, storedObjectID: ObjectID?)
    /// A batch insert names an abstract entity, which can have no rows of its own.
    case abstractEntity(String)

    public var description: String {
        switch self {
        case .predicateDoesNotCompile(let predicate, let entity, let reason):
            "the predicate \(predicate) does not compile for entity \(entity): \(reason)"
        case .notAnAttribute(let key, let entity):
            "\(entity).\(key) is a relationship; a batch request sets attributes only"
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
        case .missingValue(let key, let entity, let row):
            "row \(row) of the batch insert gives no value for \(entity).\(key), which is not optional and has no default"
        case .duplicateKey(let entity, let constraint, let values, let row, let stored):
            "row \(row) of the batch insert holds \(entity) (\(constraint.joined(separator: ", "))) = "
                + "(\(values.map(\.constraintDescription).joined(separator: ", "))), which "
                + (stored.map { "the stored \($0) holds" } ?? "an earlier row of the request holds")
        case .abstractEntity(let entity):
            "entity \(entity) is abstract: a batch insert needs an entity whose rows are of that entity"
        }
    }
}

extension PropertyValue {
    /// A constraint value as a message shows it: text quoted, numbers as they are.
    var constraintDescription: String {
        switch self {
        case .null: "nil"
        case .integer(let value): String(value)
        case .double(let value): String(value)
        case .bool(let value): String(value)
        case .string(let value): "\"\(value)\""
        case .date(let value): value.formatted(.iso8601)
        case .data(let value): "\(value.count) bytes"
        case .uuid(let value): value.uuidString
        case .uri(let value): value.absoluteString
        case .decimal(let value): "\(value)"
        case .object(let id): id.description
        case .objects(let ids): "\(ids.count) objects"
        }
    }
}
