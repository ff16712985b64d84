import Foundation

/// An error of the model, object or context layer: what went wrong, and where.
///
/// ```swift
/// do {
///     try ticker.setValue("high", forKey: "price")
/// } catch ObjectGraphError.wrongValueType(let key, let entity, _, _) {
///     print("\(entity).\(key) takes a number")   // Ticker.price takes a number
/// }
/// ```
///
/// Store and SQLite failures come as ``PersistentStoreError``; failed validation
/// on save as ``ValidationError`` values inside ``validationFailed(_:)``.
public enum ObjectGraphError: Error, Sendable, Equatable {
    /// The model has problems; each string names one.
    case invalidModel([String])
    /// The entity has no property with this key.
    case unknownKey(String, entity: String)
    /// The model has no entity with this name.
    case unknownEntity(String)
    /// A value of the wrong type was given for a property.
    case wrongValueType(key: String, entity: String, expected: String, actual: String)
    /// A number does not fit the attribute's integer type.
    case valueOutOfRange(key: String, entity: String, value: String, type: AttributeType)
    /// No object with this ID exists (in the context or its store).
    case objectNotFound(ObjectID)
    /// Related objects must live in the same context.
    case differentContexts(key: String, entity: String)
    /// The operation needs the object to be in a context.
    case noContext(String)
    /// The context or coordinator has no store that can hold the entity.
    case noStore(entity: String)
    /// The context or store may not save.
    case readOnly(String)
    /// The save failed validation; nothing was written.
    case validationFailed([ValidationError])
    /// Saved objects changed in the store since they were read, and the merge
    /// policy is ``MergePolicy/error``; nothing was written.
    case mergeConflict([MergeConflict])
    /// The fetch request's result type does not match the requested Swift type.
    case wrongResultType(expected: String, requested: String)
    /// The URI is not an object URI of a store of this coordinator.
    case invalidObjectURI(String)
    /// Objects share the values of a uniqueness constraint, with each other or
    /// with a row of the store, and the merge policy is ``MergePolicy/error``;
    /// nothing was written.
    case uniquenessConflict([UniquenessConflict])
}

extension ObjectGraphError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidModel(let problems):
            "invalid model: " + problems.joined(separator: "; ")
        case .unknownKey(let key, let entity):
            "entity \(entity) has no property named '\(key)'"
        case .unknownEntity(let name):
            "the model has no entity named '\(name)'"
        case .wrongValueType(let key, let entity, let expected, let actual):
            "\(entity).\(key) takes \(expected), not \(actual)"
        case .valueOutOfRange(let key, let entity, let value, let type):
            "\(entity).\(key): \(value) does not fit in \(type.rawValue)"
        case .objectNotFound(let id):
            "no object with ID \(id)"
        case .differentContexts(let key, let entity):
            "\(entity).\(key): related objects must be in the same context"
        case .noContext(let what):
            "\(what) needs the object to be in a context"
        case .noStore(let entity):
            "no persistent store can hold objects of entity \(entity)"
        case .readOnly(let what):
            "\(what) is read-only"
        case .validationFailed(let errors):
            "validation failed: " + errors.map(\.description).joined(separator: "; ")
        case .mergeConflict(let conflicts):
            "merge conflict: " + conflicts.map(\.description).joined(separator: "; ")
        case .wrongResultType(let expected, let requested):
            "the fetch returns \(expected), not \(requested)"
        case .invalidObjectURI(let uri):
            "'\(uri)' is not an object URI of this coordinator's stores"
        case .uniquenessConflict(let conflicts):
            "uniqueness conflict: " + conflicts.map(\.description).joined(separator: "; ")
        }
    }
}

extension ObjectGraphError: LocalizedError {
    public var errorDescription: String? { description }
}

/// One broken validation rule: which object, which key, and why.
public struct ValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The object that failed.
    public var objectID: ObjectID
    /// The property, or nil for a rule over the whole object.
    public var key: String?
    /// What is wrong, in words.
    public var reason: String

    public init(objectID: ObjectID, key: String?, reason: String) {
        self.objectID = objectID
        self.key = key
        self.reason = reason
    }

    public var description: String {
        "\(objectID.entityName)\(key.map { ".\($0)" } ?? "") (\(objectID)): \(reason)"
    }
}

/// A saved object whose row changed in the store since the context read it
/// (Core Data: `NSMergeConflict`).
public struct MergeConflict: Sendable, Equatable, CustomStringConvertible {
    /// The object in conflict.
    public var objectID: ObjectID
    /// The row version the context read (`Z_OPT`).
    public var objectSnapshotVersion: Int64
    /// The row version now in the store; nil if the row was deleted there.
    public var persistedSnapshotVersion: Int64?

    public init(objectID: ObjectID, objectSnapshotVersion: Int64, persistedSnapshotVersion: Int64?) {
        self.objectID = objectID
        self.objectSnapshotVersion = objectSnapshotVersion
        self.persistedSnapshotVersion = persistedSnapshotVersion
    }

    public var description: String {
        "\(objectID) was read at version \(objectSnapshotVersion) but the store has "
            + (persistedSnapshotVersion.map { "version \($0)" } ?? "deleted it")
    }
}

/// Objects that break a uniqueness constraint (Core Data: `NSConstraintConflict`):
/// several objects of the saving context share the constraint's values, or one
/// shares them with a row already in the store.
///
/// The values themselves, which are user data, stay out of ``description``.
public struct UniquenessConflict: Sendable, Equatable, CustomStringConvertible {
    /// The entity that declares the constraint.
    public var entityName: String
    /// The constraint's keys.
    public var constraint: [String]
    /// The context's objects that hold the same values.
    public var objectIDs: [ObjectID]
    /// The row of the store that already holds them, if any (Core Data's `databaseObject`).
    public var databaseObjectID: ObjectID?

    public init(entityName: String, constraint: [String], objectIDs: [ObjectID], databaseObjectID: ObjectID?) {
        self.entityName = entityName
        self.constraint = constraint
        self.objectIDs = objectIDs
        self.databaseObjectID = databaseObjectID
    }

    public var description: String {
        "\(entityName) (\(constraint.joined(separator: ", "))): "
            + objectIDs.map(\.description).joined(separator: ", ")
            + (databaseObjectID.map { " and the stored \($0)" } ?? "")
            + " hold the same values"
    }
}
