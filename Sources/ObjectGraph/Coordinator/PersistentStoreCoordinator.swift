@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// Connects contexts to persistent stores through one model (Core Data:
/// `NSPersistentStoreCoordinator`).
///
/// ```swift
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(type: .sqlite, at: storeURL)
/// let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: coordinator)
/// ```
///
/// A coordinator may be used from any queue: each store serializes its own
/// work, and the row cache is shared under a lock. Adding the first store
/// freezes the model.
///
/// ## Topics
/// - ``addPersistentStore(type:configuration:at:options:)``
/// - ``remove(_:)``
/// - ``managedObjectID(forURIRepresentation:)``
public final class PersistentStoreCoordinator: Sendable {
    /// The model of every store and context of this coordinator.
    public let managedObjectModel: ManagedObjectModel
    /// Rows read recently, for faults to fire from. Only the coordinator
    /// stores and drops rows: it drops those of its own saves itself, and
    /// others tell it what they read or saw change (`didRead(_:for:)`,
    /// `objectsDidChange(updated:deleted:)`, `allObjectsMayHaveChanged()`).
    private let rowCache: RowCache

    /// How the row cache shared by this coordinator's contexts has served
    /// faults so far (hits, misses, rows held): a diagnostic, as a fetch that
    /// returns faults leaves its rows there for them.
    public var rowCacheStatistics: RowCacheStatistics { rowCache.statistics }
    /// The stores, each with the identity its object IDs carry (looked up once, when added).
    private let stores = Locked<[(store: any PersistentStore, identity: StoreIdentity)]>([])

    /// The rows a coordinator's row cache keeps unless told otherwise: 200,000.
    public static let defaultRowCacheCapacity = 200_000

    /// Creates a coordinator for a model.
    ///
    /// - Parameter rowCacheCapacity: the most rows the row cache keeps for
    ///   faults to fire from (at least 1); past it, rows not read lately make
    ///   room. Its memory grows with the rows read up to this bound, so a
    ///   reader that walks a whole store once, page by page, does better with
    ///   a bound near its page size.
    public init(managedObjectModel: ManagedObjectModel, rowCacheCapacity: Int = defaultRowCacheCapacity) {
        self.managedObjectModel = managedObjectModel
        self.rowCache = RowCache(capacity: rowCacheCapacity)
    }

    // MARK: - Stores

    /// Opens (or creates) a store and adds it.
    ///
    /// - Parameters:
    ///   - type: `.sqlite`, `.inMemory` (both from `DataStackStores`, which also
    ///     adds an overload that leaves `type` out for `.sqlite`), or a registered type.
    ///   - configuration: the model configuration the store holds; nil for all entities.
    ///   - url: the store's location; nil for an in-memory store.
    ///   - options: how to open it. The default opens read-write, in WAL mode.
    /// - Throws: ``ObjectGraphError/Code-swift.struct/invalidModel`` for a broken model,
    ///   ``ModelDeclarationError`` when a class bound to the model declares
    ///   properties its entity does not have (``ManagedObjectModel/checkManagedObjectClasses()``), or
    ///   ``PersistentStoreError`` saying what is wrong with the location or the
    ///   file. A store that needs migrating and cannot be migrated throws
    ///   `.incompatibleModel` or `.migrationFailed` and is left as it was —
    ///   unless ``StoreOptions/recreatesStoreWhenMigrationFails`` asks for a
    ///   new, empty store in its place.
    @discardableResult
    public func addPersistentStore(type: StoreType, configuration: String? = nil, at url: URL?,
                                   options: StoreOptions = StoreOptions()) throws -> any PersistentStore {
        if !managedObjectModel.isFrozen {
            // Once per model, before it is frozen: a class that disagrees with
            // its entity is an error here rather than a trap on first access.
            try managedObjectModel.checkManagedObjectClasses()
        }
        try managedObjectModel.freeze()
        if let url, persistentStore(for: url) != nil {
            throw PersistentStoreError(.alreadyAdded, url: url, message: "a store for this location is already added")
        }
        let configuration = StoreConfiguration(model: managedObjectModel, configurationName: configuration, url: url, options: options)
        let store: any PersistentStore
        do {
            store = try Self.open(type, configuration)
        } catch var error as PersistentStoreError where error.isModelMismatch {
            // Only a model that does not fit: a full disk, a busy file or a
            // failed copy must never cost a cache its rows.
            guard let url, !options.isReadOnly else { throw error }
            guard options.recreatesStoreWhenMigrationFails else {
                error.message += " (a store that is only a cache can be destroyed and created anew instead: StoreOptions.recreatesStoreWhenMigrationFails)"
                throw error
            }
            try destroyPersistentStore(at: url, type: type)
            store = try Self.open(type, configuration)
        }
        do {
            try startRemoteChangeNotifications(of: store, options: options)
            startReadSourceNotifications(of: store)
        } catch {
            store.willRemove()
            throw error
        }
        let identity = StoreIdentity.named(store.identifier)
        stores.withLock { $0.append((store, identity)) }
        return store
    }

    private static func open(_ type: StoreType, _ configuration: StoreConfiguration) throws -> any PersistentStore {
        let store = try type.makeStore(configuration)
        try store.loadMetadata()
        return store
    }

    /// Removes a store; its objects can no longer be fetched or saved.
    ///
    /// - Throws: ``PersistentStoreError/Code/storeNotFound`` if it is not one of this coordinator's.
    public func remove(_ store: any PersistentStore) throws {
        let removed = stores.withLock { stores -> Bool in
            guard let index = stores.firstIndex(where: { $0.store === store }) else { return false }
            stores.remove(at: index)
            return true
        }
        guard removed else {
            throw PersistentStoreError(.storeNotFound, url: store.url, message: "the store is not one of this coordinator's")
        }
        store.willRemove()
        rowCache.removeAll()
    }

    /// The coordinator's stores, in the order they were added.
    public var persistentStores: [any PersistentStore] { stores.withLock { $0.map(\.store) } }

    /// The store at a location, if it was added.
    public func persistentStore(for url: URL) -> (any PersistentStore)? {
        let path = url.standardizedFileURL.path
        return stores.withLock { $0.first { $0.store.url?.standardizedFileURL.path == path }?.store }
    }

    /// A store's metadata.
    public func metadata(for store: any PersistentStore) -> StoreMetadata {
        store.metadata
    }

    /// Replaces a store's user metadata keys; they are written with the next save
    /// that reaches the store (a context save without changes does not, as in Core Data).
    public func setMetadata(_ metadata: StoreMetadata, for store: any PersistentStore) throws {
        try store.setMetadata(metadata)
    }

    /// The ID that a URI from ``ObjectID/uriRepresentation()`` names, if one
    /// of this coordinator's stores holds that entity.
    public func managedObjectID(forURIRepresentation uri: URL) -> ObjectID? {
        guard uri.scheme == "x-coredata", let host = uri.host, !host.isEmpty else { return nil }
        let parts = uri.path.split(separator: "/")
        guard parts.count == 2, parts[1].hasPrefix("p"), let pk = Int64(parts[1].dropFirst()), pk > 0,
              let entity = managedObjectModel.entitiesByName[String(parts[0])],
              let store = persistentStores.first(where: { $0.identifier == host }) else { return nil }
        return store.newObjectID(for: entity, primaryKey: pk)
    }

    /// The store that holds an object, or would hold a new one of its entity.
    ///
    /// - Complexity: O(*s*) identity comparisons, *s* = stores; this runs for every fault.
    package func store(for objectID: ObjectID) throws -> any PersistentStore {
        if let identity = objectID.store {
            if let store = stores.withLock({ $0.first { $0.identity === identity }?.store }) { return store }
            throw ObjectGraphError.objectNotFound(objectID)
        }
        return try store(for: objectID.entity)
    }

    /// The first store whose configuration holds the entity.
    package func store(for entity: EntityDescription) throws -> any PersistentStore {
        for store in persistentStores {
            if managedObjectModel.entities(forConfigurationName: store.configurationName).contains(where: { $0 === entity.rootEntity || $0 === entity }) {
                return store
            }
        }
        throw ObjectGraphError.noStore(entity: entity.name)
    }

    // MARK: - Requests from contexts

    /// Runs a fetch on every store that holds the entity.
    package func execute(_ fetch: StoreFetch, in context: ManagedObjectContext?) throws -> StoreResult {
        let targets = persistentStores.filter { store in
            (fetch.affectedStoreIdentifiers?.contains(store.identifier) ?? true)
                && managedObjectModel.entities(forConfigurationName: store.configurationName).contains { $0 === fetch.entity }
        }
        guard !targets.isEmpty else { throw ObjectGraphError.noStore(entity: fetch.entity.name) }
        if targets.count == 1 { return try targets[0].execute(.fetch(fetch), in: context) }
        // Several stores: concatenate (sorting and limits apply per store).
        var combined = try targets[0].execute(.fetch(fetch), in: context)
        for store in targets.dropFirst() {
            let next = try store.execute(.fetch(fetch), in: context)
            switch (combined, next) {
            case let (.nodes(a), .nodes(b)): combined = .nodes(a + b)
            case let (.encodedNodes(a), .encodedNodes(b)): combined = .encodedNodes(a + b)
            // One store kept its rows as bytes, another did not: all as values.
            case let (.encodedNodes(a), .nodes(b)): combined = .nodes(a.map(\.node) + b)
            case let (.nodes(a), .encodedNodes(b)): combined = .nodes(a + b.map(\.node))
            case let (.objectIDs(a), .objectIDs(b)): combined = .objectIDs(a + b)
            case let (.dictionaries(a), .dictionaries(b)): combined = .dictionaries(a + b)
            case let (.count(a), .count(b)): combined = .count(a + b)
            default:
                // A store (a custom one, most likely) answered with another kind of
                // result than the stores before it: keeping either alone would drop
                // the other's rows, an error made data.
                throw PersistentStoreError(.ioFailure, url: store.url, message: """
                    the store answered a \(fetch.resultType) fetch of \(fetch.entity.name) with \(next.kindDescription), \
                    where the stores before it answered \(combined.kindDescription)
                    """)
            }
        }
        return combined
    }

    /// Saves a context's changes, each store's share atomically, then drops
    /// the cached rows of every object the save wrote or found changed: no
    /// caller needs to, for a save this coordinator runs.
    package func save(_ request: SaveChangesRequest, in context: ManagedObjectContext?) throws -> SaveResult {
        let entries = stores.withLock { $0 }
        if entries.count == 1, entries[0].store.configurationName == nil {
            // One store holding the whole model: the request goes as it is.
            let (store, identity) = entries[0]
            for nodes in [request.updatedObjects, request.deletedObjects, request.lockedObjects] {
                for node in nodes where node.objectID.store !== identity { throw ObjectGraphError.objectNotFound(node.objectID) }
            }
            if store.isReadOnly { throw PersistentStoreError.readOnly(url: store.url) }
            return try save(request, to: store, sharedWith: nil, in: context)
        }
        let shares = try shares(of: request)
        for (_, entry) in shares where entry.store.isReadOnly {
            throw PersistentStoreError.readOnly(url: entry.store.url)
        }
        var combined = SaveResult(permanentIDs: [:])
        for (_, entry) in shares {
            let result = try save(entry.request, to: entry.store, sharedWith: self, in: context)
            combined.permanentIDs.merge(result.permanentIDs) { $1 }
            combined.historyTokens += result.historyTokens
        }
        return combined
    }

    /// A request split by the store that holds (or will hold) each object.
    private func shares(of request: SaveChangesRequest) throws -> [ObjectIdentifier: (store: any PersistentStore, request: SaveChangesRequest)] {
        var byStore: [ObjectIdentifier: (store: any PersistentStore, request: SaveChangesRequest)] = [:]
        func add(_ node: IncrementalStoreNode, _ keyPath: WritableKeyPath<SaveChangesRequest, [IncrementalStoreNode]>) throws {
            let store = try store(for: node.objectID)
            byStore[ObjectIdentifier(store), default: (store, SaveChangesRequest(conflictResolver: request.conflictResolver))]
                .request[keyPath: keyPath].append(node)
        }
        for node in request.insertedObjects { try add(node, \.insertedObjects) }
        for node in request.updatedObjects { try add(node, \.updatedObjects) }
        for node in request.deletedObjects { try add(node, \.deletedObjects) }
        for node in request.lockedObjects { try add(node, \.lockedObjects) }
        return byStore
    }

    /// One store's save. Its resolver goes to the store wrapped, so that the
    /// objects a resolution adds to the save (a stored row a new object took
    /// over, a duplicate deleted) are known here, and a store of several gets
    /// only its share of a resolved request.
    private func save(_ request: SaveChangesRequest, to store: any PersistentStore, sharedWith coordinator: PersistentStoreCoordinator?,
                      in context: ManagedObjectContext?) throws -> SaveResult {
        var request = request
        let resolver = request.conflictResolver.map { StoreShareResolver($0, store: store, sharedWith: coordinator) }
        request.conflictResolver = resolver
        defer {
            // Rows written, or found newer than the request's: a cached copy is
            // older than the store's now, whether the save stood or not.
            rowCache.removeRows(of: request.updatedObjects, request.deletedObjects, request.lockedObjects)
            if let resolver { rowCache.removeRows(of: resolver.resolvedObjects) }
        }
        guard case .saved(let result) = try store.execute(.save(request), in: context) else { return SaveResult(permanentIDs: [:]) }
        return result
    }

    /// A save's resolver as one store receives it (see `save(_:to:sharedWith:in:)`).
    private final class StoreShareResolver: SaveConflictResolver, @unchecked Sendable {
        // @unchecked Sendable: `resolvedObjects` changes only inside `resolve`, which
        // a store calls on the saving thread before its save returns (the contract),
        // and the coordinator reads it after.
        let resolver: any SaveConflictResolver
        let store: any PersistentStore
        let coordinator: PersistentStoreCoordinator?
        private(set) var resolvedObjects: [IncrementalStoreNode] = []

        init(_ resolver: any SaveConflictResolver, store: any PersistentStore, sharedWith coordinator: PersistentStoreCoordinator?) {
            self.resolver = resolver
            self.store = store
            self.coordinator = coordinator
        }

        func resolve(_ conflicts: SaveConflicts) throws -> SaveChangesRequest {
            var request = try resolver.resolve(conflicts)
            if let coordinator {
                request = try coordinator.shares(of: request)[ObjectIdentifier(store)]?.request ?? SaveChangesRequest()
            }
            resolvedObjects += request.updatedObjects
            resolvedObjects += request.deletedObjects
            return request
        }
    }

    // MARK: - The row cache

    /// Rows a fetch or a prefetch read for objects it returned as faults: the
    /// cache keeps them, so that those faults fire without a query. Rows a
    /// context pinned to a query generation read go to that generation's cache.
    package func didRead(_ rows: consuming [IncrementalStoreNode], for context: ManagedObjectContext?) {
        if !rows.isEmpty { rowCache(for: context).store(consume rows) }
    }

    /// ``didRead(_:for:)`` for rows kept as bytes. The rows move into the cache:
    /// pass an array no one else holds.
    package func didRead(_ rows: consuming [EncodedStoreNode], for context: ManagedObjectContext?) {
        if !rows.isEmpty { rowCache(for: context).store(consume rows) }
    }

    /// The cache of the rows `context` reads: its generation's when it is
    /// pinned to one, else the coordinator's. Called after the read, which
    /// has fixed the generation if the context waited for one.
    private func rowCache(for context: ManagedObjectContext?) -> RowCache {
        context?.fixedQueryGeneration?.rowCache ?? rowCache
    }

    /// The most rows the row cache keeps.
    package var rowCacheCapacity: Int { rowCache.capacity }

    /// A snapshot of every store's data as it is now, for contexts to pin.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unsupportedStore`` when a
    ///   store cannot keep one; what a store throws opening its snapshot.
    package func openQueryGeneration() throws -> QueryGeneration {
        var snapshots: [(store: any PersistentStore, snapshot: any StoreQueryGeneration)] = []
        for store in persistentStores {
            guard let pinnable = store as? any QueryGenerationStore, pinnable.canPinQueryGenerations else {
                throw ObjectGraphError.unsupportedQueryGenerations(store: store)
            }
            snapshots.append((store, try pinnable.openQueryGeneration()))
        }
        return QueryGeneration(coordinator: self, snapshots: snapshots)
    }

    /// Objects that changed where this coordinator did not save them —
    /// another coordinator's save merged here, a batch request, a history
    /// transaction: their cached rows are dropped, so that no read through
    /// this coordinator returns a row older than that change (SPEC §3.8).
    /// This coordinator's own saves need no call.
    ///
    /// - Complexity: O(min(*c*, *k*)), *c* = rows cached, *k* = objects changed.
    package func objectsDidChange(updated: Set<ObjectID>, deleted: Set<ObjectID>) {
        if !updated.isEmpty || !deleted.isEmpty { rowCache.removeRows(of: updated, and: deleted) }
    }

    /// Any row may have changed unseen (the history that would say which is
    /// gone): every cached row is dropped.
    package func allObjectsMayHaveChanged() {
        rowCache.removeAll()
    }

    /// One row, from the row cache if fresh enough, else from its store.
    ///
    /// A context pinned to a query generation reads its generation's cache,
    /// whose rows never go stale, and its generation in the store.
    package func node(for objectID: ObjectID, stalenessInterval: TimeInterval, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
        let (cache, maxAge) = try rowCache(for: context, stalenessInterval: stalenessInterval)
        if maxAge != 0, let node = cache.node(for: objectID, maxAge: maxAge) {
            return node
        }
        return try store(for: objectID).newValues(forObjectWith: objectID, in: context)
    }

    /// The cache a read of `context` looks in, and the oldest row it takes
    /// from it; pins the context if it waits for its first read.
    private func rowCache(for context: ManagedObjectContext?, stalenessInterval: TimeInterval) throws -> (RowCache, TimeInterval) {
        if let generation = try context?.pinnedQueryGeneration() { return (generation.rowCache, -1) }
        return (rowCache, stalenessInterval)
    }

    /// Several rows: cached ones no older than `stalenessInterval` seconds
    /// (negative: any age; 0: none) from the cache, the rest in one request per store.
    package func nodes(for objectIDs: [ObjectID], stalenessInterval: TimeInterval,
                       in context: ManagedObjectContext?) throws -> [IncrementalStoreNode] {
        var found: [IncrementalStoreNode] = []
        var missing: [ObjectIdentifier: (store: any PersistentStore, ids: [ObjectID])] = [:]
        let (cache, maxAge) = try rowCache(for: context, stalenessInterval: stalenessInterval)
        for id in objectIDs {
            if maxAge != 0, let node = cache.node(for: id, maxAge: maxAge) { found.append(node); continue }
            let store = try store(for: id)
            missing[ObjectIdentifier(store), default: (store, [])].ids.append(id)
        }
        for (_, entry) in missing {
            if let batching = entry.store as? any BatchFaultingStore {
                found.append(contentsOf: try batching.newValues(forObjectsWith: entry.ids, in: context))
            } else {
                for id in entry.ids {
                    do {
                        found.append(try entry.store.newValues(forObjectWith: id, in: context))
                    } catch ObjectGraphError.Code.objectNotFound {
                        // A row that is gone is left out, as a batching store leaves it out.
                    }
                }
            }
        }
        return found
    }

    /// The destinations of a relationship of one object.
    package func objectIDs(for relationship: RelationshipDescription, of objectID: ObjectID,
                           in context: ManagedObjectContext?) throws -> [ObjectID] {
        let value = try store(for: objectID).newValue(forRelationship: relationship, forObjectWith: objectID, in: context)
        switch value {
        case .object(let id): return [id]
        case .objects(let ids): return ids
        default: return []
        }
    }

    /// Permanent IDs for temporary ones, from the stores that will hold them.
    public func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] {
        var result = objectIDs
        var byStore: [ObjectIdentifier: (store: any PersistentStore, positions: [Int])] = [:]
        for (position, id) in objectIDs.enumerated() where id.isTemporaryID {
            let store = try store(for: id.entity)
            byStore[ObjectIdentifier(store), default: (store, [])].positions.append(position)
        }
        for (_, entry) in byStore {
            let permanent = try entry.store.obtainPermanentIDs(for: entry.positions.map { objectIDs[$0] })
            for (position, id) in zip(entry.positions, permanent) { result[position] = id }
        }
        return result
    }
}

/// A store that can read many rows in one request, so a batch of faults fires in one query.
public protocol BatchFaultingStore: PersistentStore {
    /// The rows for these IDs; IDs without a row are left out.
    func newValues(forObjectsWith objectIDs: [ObjectID], in context: ManagedObjectContext?) throws -> [IncrementalStoreNode]
}
