import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// An error of the model, object or context layer, batch requests included:
/// what went wrong, and where.
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectGraphError where error.code == .validationFailed {
///     for problem in error.validationErrors { print(problem) }   // Ticker.price (x-coredata://…/Ticker/p3): a value is required
/// } catch ObjectGraphError.Code.mergeConflict {
///     // another context saved first; refetch and try again
/// }
/// ```
///
/// ``code`` says what kind of failure it is (see ``CodedError``); the fields
/// that apply to that kind (``entityName``, ``key``, ``objectID``,
/// ``validationErrors``, …) say where.
///
/// Store and SQLite failures come as ``PersistentStoreError``; a predicate that
/// does not parse as ``FetchPredicateError``; a dictionary fetch's expression
/// as ``FetchExpressionError``.
///
/// ## Topics
///
/// ### Matching an error
/// - ``code``
/// - ``Code-swift.struct``
///
/// ### Where it failed
/// - ``entityName``
/// - ``key``
/// - ``objectID``
/// - ``row``
/// - ``modelProblems``
/// - ``validationErrors``
/// - ``mergeConflicts``
/// - ``uniquenessConflicts``
public struct ObjectGraphError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = ObjectGraphError
        /// The code's name, as written in Swift (`"validationFailed"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The model has problems (``ObjectGraphError/modelProblems``, one string each).
        public static let invalidModel = Code("invalidModel")
        /// The entity has no property with this key (``ObjectGraphError/key``; a key
        /// path when the request named one).
        public static let unknownKey = Code("unknownKey")
        /// The model has no entity with this name (``ObjectGraphError/entityName``).
        public static let unknownEntity = Code("unknownEntity")
        /// A value of the wrong type was given for a property.
        public static let wrongValueType = Code("wrongValueType")
        /// A number does not fit the attribute's integer type.
        public static let valueOutOfRange = Code("valueOutOfRange")
        /// No object with this ID (``ObjectGraphError/objectID``) exists, in the
        /// context or its store.
        public static let objectNotFound = Code("objectNotFound")
        /// Related objects must live in the same context.
        public static let differentContexts = Code("differentContexts")
        /// The operation needs the object to be in a context.
        public static let noContext = Code("noContext")
        /// The context or coordinator has no store that can hold the entity.
        public static let noStore = Code("noStore")
        /// The context or store may not save.
        public static let readOnly = Code("readOnly")
        /// The save failed validation (``ObjectGraphError/validationErrors``);
        /// nothing was written.
        public static let validationFailed = Code("validationFailed")
        /// Saved objects changed in the store since they were read
        /// (``ObjectGraphError/mergeConflicts``), and the merge policy is
        /// ``MergePolicy/error``; nothing was written.
        public static let mergeConflict = Code("mergeConflict")
        /// The fetch request's result type does not match the requested Swift type.
        public static let wrongResultType = Code("wrongResultType")
        /// The URI is not an object URI of a store of this coordinator.
        public static let invalidObjectURI = Code("invalidObjectURI")
        /// Objects share the values of a uniqueness constraint, with each other or
        /// with a row of the store (``ObjectGraphError/uniquenessConflicts``), and
        /// the merge policy is ``MergePolicy/error``; nothing was written.
        public static let uniquenessConflict = Code("uniquenessConflict")

        // Batch requests; each refuses the request, and nothing is changed.

        /// A batch request's predicate cannot be run against the entity's rows.
        public static let predicateDoesNotCompile = Code("predicateDoesNotCompile")
        /// A key of `propertiesToUpdate`, or of a batch insert's row, names a
        /// relationship; batch requests set attributes only.
        public static let notAnAttribute = Code("notAnAttribute")
        /// A new value in `propertiesToUpdate` uses an aggregate or a key path
        /// through a relationship: an `UPDATE` sets each row from its own
        /// columns, and cannot join another table or reduce several rows.
        public static let notComputedFromTheRow = Code("notComputedFromTheRow")
        /// A `deny` rule forbids deleting the object (``ObjectGraphError/objectID``)
        /// while the relationship (``ObjectGraphError/key``) has destinations.
        public static let deleteDenied = Code("deleteDenied")
        /// The store holding the entity does not run batch requests, or a
        /// store of the coordinator cannot keep a query generation.
        public static let unsupportedStore = Code("unsupportedStore")
        /// `propertiesToUpdate` is empty: the request would only bump every
        /// matched row's version, making every context that holds one conflict.
        public static let nothingToUpdate = Code("nothingToUpdate")
        /// The request would change several stores, which cannot share one
        /// transaction: a failure in the second would leave the first changed.
        public static let severalStores = Code("severalStores")
        /// A batch insert's row (``ObjectGraphError/row``) leaves a non-optional
        /// attribute (``ObjectGraphError/key``) without a value: it gives none
        /// (or nil) and the attribute has no default.
        public static let missingValue = Code("missingValue")
        /// A batch insert's row (``ObjectGraphError/row``) holds the values of a
        /// uniqueness constraint that a stored row or an earlier row of the
        /// request holds, and the context's merge policy is ``MergePolicy/error``
        /// — or the holder is a row of another entity of the hierarchy, which no
        /// policy may overwrite. The one ``ObjectGraphError/uniquenessConflicts``
        /// entry names the constraint and the stored holder
        /// (``UniquenessConflict/databaseObjectID``, nil for an earlier row);
        /// its `objectIDs` are empty, since a batch insert's rows have none.
        public static let duplicateKey = Code("duplicateKey")
        /// A batch insert names an abstract entity, which can have no rows of its own.
        public static let abstractEntity = Code("abstractEntity")
        /// A query generation cannot be set here: on a child context, from a
        /// token of another coordinator, or on a context without a coordinator.
        public static let invalidQueryGeneration = Code("invalidQueryGeneration")
    }

    /// The kind of failure.
    public var code: Code
    /// The entity concerned, when there is one.
    public var entityName: String?
    /// The property, relationship or key path concerned, when there is one.
    public var key: String?
    /// The object concerned: the one not found, or the one a deny rule keeps.
    public var objectID: ObjectID?
    /// The batch insert's row that was refused, counting from 0.
    public var row: Int?
    /// What is wrong with the model, one string each (``Code-swift.struct/invalidModel``).
    public var modelProblems: [String]
    /// Every broken validation rule (``Code-swift.struct/validationFailed``).
    public var validationErrors: [ValidationError]
    /// The objects whose rows changed since they were read (``Code-swift.struct/mergeConflict``).
    public var mergeConflicts: [MergeConflict]
    /// The objects or rows that share a uniqueness constraint's values
    /// (``Code-swift.struct/uniquenessConflict``, ``Code-swift.struct/duplicateKey``).
    public var uniquenessConflicts: [UniquenessConflict]
    /// What happened, in words; the error's ``description``.
    public var message: String

    /// Creates an error. The static functions named after the codes
    /// (``unknownKey(_:entity:)``, ``mergeConflict(_:)``, …) fill in the
    /// fields and the message for you.
    public init(_ code: Code, entityName: String? = nil, key: String? = nil, objectID: ObjectID? = nil, row: Int? = nil,
                modelProblems: [String] = [], validationErrors: [ValidationError] = [], mergeConflicts: [MergeConflict] = [],
                uniquenessConflicts: [UniquenessConflict] = [], message: String) {
        self.code = code
        self.entityName = entityName
        self.key = key
        self.objectID = objectID
        self.row = row
        self.modelProblems = modelProblems
        self.validationErrors = validationErrors
        self.mergeConflicts = mergeConflicts
        self.uniquenessConflicts = uniquenessConflicts
        self.message = message
    }

    public var description: String { message }
}

// MARK: - Creating errors

extension ObjectGraphError {
    /// ``Code-swift.struct/invalidModel``: `problems` lists each problem.
    public static func invalidModel(_ problems: [String]) -> ObjectGraphError {
        ObjectGraphError(.invalidModel, modelProblems: problems, message: "invalid model: " + problems.joined(separator: "; "))
    }

    /// ``Code-swift.struct/unknownKey``.
    public static func unknownKey(_ key: String, entity: String) -> ObjectGraphError {
        ObjectGraphError(.unknownKey, entityName: entity, key: key, message: "entity \(entity) has no property named '\(key)'")
    }

    /// ``Code-swift.struct/unknownEntity``.
    public static func unknownEntity(_ name: String) -> ObjectGraphError {
        ObjectGraphError(.unknownEntity, entityName: name, message: "the model has no entity named '\(name)'")
    }

    /// ``Code-swift.struct/wrongValueType``: `expected` and `actual` describe the types.
    public static func wrongValueType(key: String, entity: String, expected: String, actual: String) -> ObjectGraphError {
        ObjectGraphError(.wrongValueType, entityName: entity, key: key, message: "\(entity).\(key) takes \(expected), not \(actual)")
    }

    /// ``Code-swift.struct/valueOutOfRange``: `value` as text, `type` the attribute's.
    public static func valueOutOfRange(key: String, entity: String, value: String, type: AttributeType) -> ObjectGraphError {
        ObjectGraphError(.valueOutOfRange, entityName: entity, key: key, message: "\(entity).\(key): \(value) does not fit in \(type.rawValue)")
    }

    /// ``Code-swift.struct/objectNotFound``.
    public static func objectNotFound(_ objectID: ObjectID) -> ObjectGraphError {
        ObjectGraphError(.objectNotFound, entityName: objectID.entityName, objectID: objectID, message: "no object with ID \(objectID)")
    }

    /// ``Code-swift.struct/differentContexts``.
    public static func differentContexts(key: String, entity: String) -> ObjectGraphError {
        ObjectGraphError(.differentContexts, entityName: entity, key: key, message: "\(entity).\(key): related objects must be in the same context")
    }

    /// ``Code-swift.struct/noContext``: `operation` names what needed one.
    public static func noContext(_ operation: String) -> ObjectGraphError {
        ObjectGraphError(.noContext, message: "\(operation) needs the object to be in a context")
    }

    /// ``Code-swift.struct/noStore``.
    public static func noStore(entity: String) -> ObjectGraphError {
        ObjectGraphError(.noStore, entityName: entity, message: "no persistent store can hold objects of entity \(entity)")
    }

    /// ``Code-swift.struct/readOnly``: `what` names the context or store.
    public static func readOnly(_ what: String) -> ObjectGraphError {
        ObjectGraphError(.readOnly, message: "\(what) is read-only")
    }

    /// ``Code-swift.struct/validationFailed``.
    public static func validationFailed(_ errors: [ValidationError]) -> ObjectGraphError {
        ObjectGraphError(.validationFailed, validationErrors: errors,
                         message: "validation failed: " + errors.map(\.description).joined(separator: "; "))
    }

    /// ``Code-swift.struct/mergeConflict``.
    public static func mergeConflict(_ conflicts: [MergeConflict]) -> ObjectGraphError {
        ObjectGraphError(.mergeConflict, mergeConflicts: conflicts,
                         message: "merge conflict: " + conflicts.map(\.description).joined(separator: "; "))
    }

    /// ``Code-swift.struct/wrongResultType``: what the fetch returns, and the Swift type asked for.
    public static func wrongResultType(expected: String, requested: String) -> ObjectGraphError {
        ObjectGraphError(.wrongResultType, message: "the fetch returns \(expected), not \(requested)")
    }

    /// ``Code-swift.struct/invalidObjectURI``.
    public static func invalidObjectURI(_ uri: String) -> ObjectGraphError {
        ObjectGraphError(.invalidObjectURI, message: "'\(uri)' is not an object URI of this coordinator's stores")
    }

    /// ``Code-swift.struct/uniquenessConflict``.
    public static func uniquenessConflict(_ conflicts: [UniquenessConflict]) -> ObjectGraphError {
        ObjectGraphError(.uniquenessConflict, uniquenessConflicts: conflicts,
                         message: "uniqueness conflict: " + conflicts.map(\.description).joined(separator: "; "))
    }
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
