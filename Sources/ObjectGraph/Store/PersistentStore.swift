import Foundation

/// A store that a coordinator reads objects from and saves them to — the
/// incremental-store contract (Core Data: `NSIncrementalStore`).
///
/// `SQLiteStore` and `InMemoryStore` are built on this protocol, and a
/// store of your own plugs in the same way: implement it, register a
/// ``StoreType`` for it, and add it to a coordinator.
///
/// ```swift
/// let jsonStore = StoreType(rawValue: "JSON") { configuration in try JSONStore(configuration) }
/// StoreType.register(jsonStore)
/// try coordinator.addPersistentStore(type: jsonStore, at: url)
/// ```
///
/// The contract, which the built-in stores pass and a custom store must pass too:
/// - ``loadMetadata()`` opens or creates the store; its ``metadata`` then holds
///   `NSStoreType` and `NSStoreUUID`, and ``identifier`` equals the UUID.
/// - ``execute(_:in:)`` answers a fetch with all matching rows (as nodes, IDs,
///   dictionaries or a count, per the request's result type), applying the
///   predicate, sort, offset and limit; and performs a save atomically: every
///   change or none. A save gives each inserted object a permanent ID, returned
///   in the ``SaveResult``, and bumps each saved row's version by one; a row
///   whose version differs from the one in the request is a conflict, and so
///   is a row a uniqueness constraint refuses, if the store enforces them.
///   The store hands its conflicts to the request's
///   ``SaveChangesRequest/conflictResolver`` inside its write transaction and
///   writes what that returns, as ``SaveConflictResolver`` lays out;
///   without one, the whole save throws ``ObjectGraphError/Code-swift.struct/mergeConflict``
///   (or ``ObjectGraphError/Code-swift.struct/uniquenessConflict``).
/// - ``newValues(forObjectWith:in:)`` returns a row's values and version, or
///   throws ``ObjectGraphError/Code-swift.struct/objectNotFound``.
/// - Calls may come from any thread; the store serializes them as it needs.
///
/// ## Topics
/// - ``IncrementalStoreNode``
/// - ``StoreRequest``
/// - ``StoreResult``
/// - ``SaveConflictResolver``
public protocol PersistentStore: AnyObject, Sendable {
    /// Where the store lives; nil for an in-memory store.
    var url: URL? { get }
    /// The store's UUID (`NSStoreUUID`).
    var identifier: String { get }
    /// The store's type.
    var type: StoreType { get }
    /// The model configuration the store holds, or nil for the whole model.
    var configurationName: String? { get }
    /// Whether saves are refused.
    var isReadOnly: Bool { get }
    /// The store's metadata, including `NSStoreType`, `NSStoreUUID` and `NSStoreModelVersionHashes`.
    var metadata: StoreMetadata { get }

    /// Replaces the user keys of the metadata; the store persists them with its next save.
    func setMetadata(_ metadata: StoreMetadata) throws

    /// Opens or creates the store and reads its metadata. Called once, when the store is added.
    func loadMetadata() throws

    /// Runs a fetch or a save.
    func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult

    /// The values and version of one row (firing a fault).
    func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode

    /// The destinations of one relationship of one row (firing a to-many fault).
    func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                  in context: ManagedObjectContext?) throws -> PropertyValue

    /// Gives permanent IDs to temporary ones, in the same order.
    func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID]

    /// Tells the store that a context holds objects with these IDs. The default does nothing.
    func managedObjectContextDidRegisterObjects(with objectIDs: [ObjectID])

    /// Tells the store that a context no longer holds objects with these IDs. The default does nothing.
    func managedObjectContextDidUnregisterObjects(with objectIDs: [ObjectID])

    /// Called when the store is removed from its coordinator, to close files. The default does nothing.
    func willRemove()
}

extension PersistentStore {
    public func managedObjectContextDidRegisterObjects(with objectIDs: [ObjectID]) {}
    public func managedObjectContextDidUnregisterObjects(with objectIDs: [ObjectID]) {}
    public func willRemove() {}

    /// The ID of the row `primaryKey` of `entity` in this store (Core Data: `newObjectID(for:referenceObject:)`).
    public func newObjectID(for entity: EntityDescription, primaryKey: Int64) -> ObjectID {
        ObjectID(entity: entity, store: StoreIdentity.named(identifier), primaryKey: primaryKey)
    }
}

/// A store's metadata: property-list values by key.
public typealias StoreMetadata = [String: any Sendable]

/// Well-known metadata keys.
public enum StoreMetadataKey {
    /// The store's type name (`"SQLite"`, `"InMemory"`).
    public static let storeType = "NSStoreType"
    /// The store's UUID.
    public static let storeUUID = "NSStoreUUID"
    /// Each entity's version hash, by entity name.
    public static let modelVersionHashes = "NSStoreModelVersionHashes"
    /// The model's version identifiers.
    public static let modelVersionIdentifiers = "NSStoreModelVersionIdentifiers"
}

/// One row as a store returns it: the object's ID, its values in the entity's
/// slot order, and its version (Core Data: `NSIncrementalStoreNode`).
///
/// To-many relationship slots may hold ``PropertyValue/null`` to mean "ask
/// ``PersistentStore/newValue(forRelationship:forObjectWith:in:)`` when needed".
public struct IncrementalStoreNode: Sendable {
    public var objectID: ObjectID
    public var values: ContiguousArray<PropertyValue>
    /// The row's version (`Z_OPT`); 1 after insert, +1 per saved update.
    public var version: Int64

    public init(objectID: ObjectID, values: ContiguousArray<PropertyValue>, version: Int64) {
        self.objectID = objectID
        self.values = values
        self.version = version
    }
}

/// A request a coordinator sends to a store.
public enum StoreRequest: Sendable {
    case fetch(StoreFetch)
    case save(SaveChangesRequest)
}

/// A store's answer to a ``StoreRequest``.
public enum StoreResult: Sendable {
    /// Rows, for `.managedObject` results.
    case nodes([IncrementalStoreNode])
    /// Rows as bytes, for a fetch whose objects come back as faults
    /// (``StoreFetch/returnsObjectsAsFaults``): a store may answer so instead of
    /// ``nodes(_:)``. The coordinator's row cache keeps them, and a fault
    /// decodes its row when it fires (see ``EncodedStoreNode``).
    @_spi(StoreImplementation)
    case encodedNodes([EncodedStoreNode])
    /// IDs, for `.managedObjectID` results.
    case objectIDs([ObjectID])
    /// Values by property name, for `.dictionary` results.
    case dictionaries([[String: PropertyValue]])
    /// A count, for `.count` results.
    case count(Int)
    /// The outcome of a save.
    case saved(SaveResult)

    /// What kind of result this is, for error messages.
    package var kindDescription: String {
        switch self {
        case .nodes(let nodes): "\(nodes.count) rows"
        case .encodedNodes(let nodes): "\(nodes.count) encoded rows"
        case .objectIDs(let ids): "\(ids.count) object IDs"
        case .dictionaries(let rows): "\(rows.count) dictionaries"
        case .count(let count): "a count (\(count))"
        case .saved: "a save's outcome"
        }
    }
}

/// A fetch as a store sees it: the entity resolved, nothing generic.
public struct StoreFetch: Sendable {
    public var entity: EntityDescription
    public var predicate: FetchPredicate?
    public var sortDescriptors: [FetchSort]
    public var fetchLimit: Int
    public var fetchOffset: Int
    public var includesSubentities: Bool
    public var resultType: FetchResultType
    public var propertiesToFetch: [String]?
    public var returnsDistinctResults: Bool
    /// The identifiers of the stores to search (`FetchRequest.affectedStores`); nil for all.
    public var affectedStoreIdentifiers: Set<String>? = nil
    /// For `.dictionary` results with expressions, grouping or a having predicate:
    /// what to compute, replacing ``propertiesToFetch``; nil for a plain fetch.
    /// A store without SQL answers with ``ExpressionFetch/results(for:of:)``
    /// over the objects that match the predicate.
    public var expressions: ExpressionFetch? = nil
    /// Whether the objects of a `.managedObject` fetch come back as faults
    /// (Core Data's `returnsObjectsAsFaults`, which an incremental store
    /// sees on its request): the rows are kept for faults to fire from, and
    /// a store may answer with ``StoreResult/encodedNodes(_:)``.
    public var returnsObjectsAsFaults = false

    /// The entities whose rows match: the entity and, if included, its subentities.
    public var entities: [EntityDescription] {
        includesSubentities ? entity.selfAndDescendants : [entity]
    }

    /// Describes a fetch of `entity`'s rows. The defaults fetch every row of the
    /// entity and its subentities, as objects, in no particular order.
    public init(entity: EntityDescription, predicate: FetchPredicate? = nil, sortDescriptors: [FetchSort] = [],
                fetchLimit: Int = 0, fetchOffset: Int = 0, includesSubentities: Bool = true,
                resultType: FetchResultType = .managedObject, propertiesToFetch: [String]? = nil,
                returnsDistinctResults: Bool = false, affectedStoreIdentifiers: Set<String>? = nil,
                expressions: ExpressionFetch? = nil) {
        self.entity = entity
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
        self.includesSubentities = includesSubentities
        self.resultType = resultType
        self.propertiesToFetch = propertiesToFetch
        self.returnsDistinctResults = returnsDistinctResults
        self.affectedStoreIdentifiers = affectedStoreIdentifiers
        self.expressions = expressions
    }
}

/// The changes of one save (Core Data: `NSSaveChangesRequest`).
///
/// ## Topics
/// - ``conflictResolver``
/// - ``writeResolvingConflicts(attempt:currentRows:)``
public struct SaveChangesRequest: Sendable {
    /// New objects, with temporary IDs, their values and version 0.
    public var insertedObjects: [IncrementalStoreNode]
    /// Changed objects with their new values and the version they were read at.
    public var updatedObjects: [IncrementalStoreNode]
    /// Deleted objects with the version they were read at (values empty).
    public var deletedObjects: [IncrementalStoreNode]
    /// Unchanged objects whose version must still match (optimistic locking).
    public var lockedObjects: [IncrementalStoreNode]
    /// Who settles the conflicts the store meets, inside its write
    /// transaction (``SaveConflictResolver`` says how a store calls it): a
    /// root context's save carries one that applies the context's merge
    /// policy. Nil: conflicts are the save's error.
    public var conflictResolver: (any SaveConflictResolver)?
    /// For the updated objects, in ``updatedObjects``' order, the slots each
    /// changed since the context's snapshot of its row (``SnapshotChanges``);
    /// empty, or an entry that does not name its node's object and version,
    /// when the context did not give them. A store may ignore them.
    package var updatedSnapshotChanges: [SnapshotChanges] = []

    public init(insertedObjects: [IncrementalStoreNode] = [], updatedObjects: [IncrementalStoreNode] = [],
                deletedObjects: [IncrementalStoreNode] = [], lockedObjects: [IncrementalStoreNode] = [],
                conflictResolver: (any SaveConflictResolver)? = nil) {
        self.insertedObjects = insertedObjects
        self.updatedObjects = updatedObjects
        self.deletedObjects = deletedObjects
        self.lockedObjects = lockedObjects
        self.conflictResolver = conflictResolver
    }

    /// Whether the request changes nothing.
    public var isEmpty: Bool { insertedObjects.isEmpty && updatedObjects.isEmpty && deletedObjects.isEmpty }
}

/// What a save produced.
public struct SaveResult: Sendable {
    /// The permanent ID of each inserted object, by its temporary ID.
    ///
    /// When the store gave the IDs in the request's order (as the SQLite store
    /// does), the dictionary is built from them at each read: read it once.
    public var permanentIDs: [ObjectID: ObjectID] {
        get {
            guard let inserted else { return mappedIDs }
            var mapping: [ObjectID: ObjectID] = [:]
            mapping.reserveCapacity(inserted.nodes.count)
            for (node, permanentID) in zip(inserted.nodes, inserted.permanentIDs) where node.objectID.isTemporaryID {
                mapping[node.objectID] = permanentID
            }
            return mapping
        }
        set {
            mappedIDs = newValue
            inserted = nil
        }
    }
    /// The persistent-history transaction each store recorded the save as;
    /// empty when no store tracks history.
    public var historyTokens: [PersistentHistoryToken]

    private var mappedIDs: [ObjectID: ObjectID]
    /// The request's inserted objects and the ID each has after the save, in
    /// the request's order, when the store gave them so: a context settling
    /// the objects it saved reads their IDs by position, without the
    /// dictionary (a hash of each temporary ID to build it and one to read
    /// it, ~5 % of an import).
    package private(set) var inserted: (nodes: [IncrementalStoreNode], permanentIDs: [ObjectID])?

    public init(permanentIDs: [ObjectID: ObjectID], historyTokens: [PersistentHistoryToken] = []) {
        self.mappedIDs = permanentIDs
        self.historyTokens = historyTokens
    }

    /// A result giving each inserted object's ID after the save (its permanent
    /// ID; an ID that was permanent already, as it was) in the order of
    /// `insertedObjects`, the request's.
    package init(insertedObjects: [IncrementalStoreNode], permanentIDs: [ObjectID], historyTokens: [PersistentHistoryToken] = []) {
        precondition(insertedObjects.count == permanentIDs.count, "one ID per inserted object")
        self.mappedIDs = [:]
        self.inserted = (insertedObjects, permanentIDs)
        self.historyTokens = historyTokens
    }
}
