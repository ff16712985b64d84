import Foundation

/// The errors of batch requests, as ``ObjectGraphError`` codes
/// (``ObjectGraphError/Code-swift.struct/predicateDoesNotCompile`` through
/// ``ObjectGraphError/Code-swift.struct/abstractEntity``), and the functions that write their messages.
///
/// Errors the rest of the framework already names keep their code:
/// ``ObjectGraphError/Code-swift.struct/unknownEntity``, ``ObjectGraphError/Code-swift.struct/unknownKey``,
/// ``ObjectGraphError/Code-swift.struct/wrongValueType``, ``ObjectGraphError/Code-swift.struct/uniquenessConflict``,
/// ``PersistentStoreError`` for a read-only store, and ``FetchExpressionError``
/// for a new value whose arithmetic is not on numbers. A batch insert's duplicate
/// key is its own code, ``ObjectGraphError/Code-swift.struct/duplicateKey``: its
/// rows have no object IDs, so the error names the row by its position and the
/// key by its values.
extension ObjectGraphError {
    public static func predicateDoesNotCompile(predicate: String, entity: String, reason: String) -> ObjectGraphError {
        ObjectGraphError(.predicateDoesNotCompile, entityName: entity,
                         message: "the predicate \(predicate) does not compile for entity \(entity): \(reason)")
    }

    package static func notAnAttribute(key: String, entity: String) -> ObjectGraphError {
        ObjectGraphError(.notAnAttribute, entityName: entity, key: key,
                         message: "\(entity).\(key) is a relationship; a batch request sets attributes only")
    }

    package static func notComputedFromTheRow(key: String, entity: String, expression: String) -> ObjectGraphError {
        ObjectGraphError(.notComputedFromTheRow, entityName: entity, key: key,
                         message: "the new value of \(entity).\(key), \(expression), must be computed from the row's own attributes: "
                             + "a batch update cannot join another table or aggregate rows")
    }

    package static func deleteDenied(objectID: ObjectID, relationship: String) -> ObjectGraphError {
        ObjectGraphError(.deleteDenied, entityName: objectID.entityName, key: relationship, objectID: objectID,
                         message: "\(objectID) cannot be deleted: its relationship \(relationship) has the deny rule and is not empty")
    }

    package static func unsupportedStore(type: String, entity: String) -> ObjectGraphError {
        ObjectGraphError(.unsupportedStore, entityName: entity,
                         message: "the \(type) store holding entity \(entity) does not run batch requests")
    }

    package static func nothingToUpdate(entity: String) -> ObjectGraphError {
        ObjectGraphError(.nothingToUpdate, entityName: entity,
                         message: "the batch update of \(entity) sets no property (propertiesToUpdate is empty)")
    }

    package static func severalStores(entity: String, stores: Int) -> ObjectGraphError {
        ObjectGraphError(.severalStores, entityName: entity,
                         message: "the batch request on \(entity) would change \(stores) stores, which cannot change in one transaction; "
                             + "run one request per store")
    }

    /// `row` counts from 0.
    package static func missingValue(key: String, entity: String, row: Int) -> ObjectGraphError {
        ObjectGraphError(.missingValue, entityName: entity, key: key, row: row,
                         message: "row \(row) of the batch insert gives no value for \(entity).\(key), which is not optional and has no default")
    }

    /// `entity` declares the constraint; `row` counts from 0; `storedObjectID`
    /// is the stored row holding the values, nil for an earlier row of the request.
    public static func duplicateKey(entity: String, constraint: [String], values: [PropertyValue], row: Int,
                                     storedObjectID: ObjectID?) -> ObjectGraphError {
        let conflict = UniquenessConflict(entityName: entity, constraint: constraint, objectIDs: [], databaseObjectID: storedObjectID)
        return ObjectGraphError(.duplicateKey, entityName: entity, row: row, uniquenessConflicts: [conflict],
                                message: "row \(row) of the batch insert holds \(entity) (\(constraint.joined(separator: ", "))) = "
                                    + "(\(values.map(\.constraintDescription).joined(separator: ", "))), which "
                                    + (storedObjectID.map { "the stored \($0) holds" } ?? "an earlier row of the request holds"))
    }

    package static func abstractEntity(_ entity: String) -> ObjectGraphError {
        ObjectGraphError(.abstractEntity, entityName: entity,
                         message: "entity \(entity) is abstract: a batch insert needs an entity whose rows are of that entity")
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
