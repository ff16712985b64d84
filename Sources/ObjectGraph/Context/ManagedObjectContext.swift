@_spi(DataStackInternal) import DataStackSupport
import Foundation
import Synchronization

/// A scratch pad of objects on one queue, saved to a coordinator or to a
/// parent context (Core Data: `NSManagedObjectContext`).
///
/// ```swift
/// let context = ManagedObjectContext(concurrencyType: .privateQueue)
/// context.persistentStoreCoordinator = coordinator
/// try await context.perform {
///     let ticker = Ticker(context: context)
///     ticker.symbol = "ACME"
///     try context.save()
/// }
/// ```
///
/// A context and its objects belong to its queue. Use them inside
/// ``perform(_:)-(()->Void)`` or ``performAndWait(_:)`` — or directly on the main
/// queue for a ``ConcurrencyType/mainQueue`` context — and pass ``ObjectID``s
/// between queues. Debug builds check this on every object access; set the
/// environment variable `DATASTACK_QUEUE_CHECKS=1` to check in release builds too.
///
/// The context keeps changed objects and lets unchanged ones go, as if it held
/// them weakly: an object you no longer reference and did not change leaves the
/// context (at the latest when ``registeredObjects`` is read, a merge reaches
/// it, or the registry next doubles), unless ``retainsRegisteredObjects``.
///
/// ## Topics
/// ### Running work
/// - ``perform(_:)-(()->Void)``
/// - ``performAndWait(_:)``
/// ### Objects
/// - ``insert(_:)``
/// - ``delete(_:)``
/// - ``object(with:)``
/// - ``existingObject(with:)``
/// - ``registeredObject(for:)``
/// ### Saving and discarding
/// - ``save()``
/// - ``rollback()``
/// - ``reset()``
/// ### Reading one generation of the data
/// - ``setQueryGenerationFrom(_:)``
/// - ``queryGenerationToken``
/// - ``QueryGenerationToken``
// @unchecked Sendable: mutable state is touched only on `queue` (assertOnQueue()). The
// settable configuration properties are set before the context is shared, as in Core Data
// (a stack sets them on contexts it has not handed out yet), and are then only read, from
// the context's queue and its children's (`parent`, read by a child's save and merge);
// `isReadOnly`, which a stack changes while the context is in use, is atomic.
public final class ManagedObjectContext: @unchecked Sendable {
    /// The context's queue kind.
    public let concurrencyType: ConcurrencyType
    /// A name for debugging; also the label of a private queue.
    public var name: String?
    /// The author recorded with each transaction this context saves to a store
    /// with persistent history (Core Data: `transactionAuthor`), so a reader of
    /// the history can tell its own saves from others'. The default is nil.
    public var transactionAuthor: String?
    /// How a save resolves conflicts with the store. The default is `.error`.
    public var mergePolicy: MergePolicy = .error
    /// Whether the Observation framework can watch this context's objects:
    /// a typed (`@Managed`) read or ``ManagedObject/value(forKey:)`` registers
    /// the property with the tracking in progress (`withObservationTracking`),
    /// and changes call its `onChange`.
    ///
    /// The default is false: turn it on for the context your screens or view
    /// models read — a stack's main context (`StackManager.mainContext`) —
    /// before its objects are read. Observation gives no way to know at a
    /// read whether a tracking is in progress, so an observable context gives
    /// every object it reads a registrar at its first read (some 4,000
    /// instructions and three heap blocks); a context that is not observable
    /// pays a load and a test per read. Objects read while it was on keep
    /// telling their observers. See “Observing objects” in the DataStack documentation.
    @exclusivity(unchecked) public var isObservable: Bool
    /// Whether saves of other contexts on the same coordinator, or of the parent
    /// context, are merged into this one automatically. The default is false.
    public var automaticallyMergesChangesFromParent = false {
        didSet { updateAutomaticMerging() }
    }
    /// The longest time, in seconds, that cached row data may be used to fire a
    /// fault — one, or a batch of them, prefetched destinations, or the rows a
    /// merge refreshes objects from; negative for no limit (the default), 0 to
    /// always read the store.
    ///
    /// The cache keeps a row's time to the microsecond, rounded to older, so
    /// a row is never used staler than the interval; one cached more than
    /// about ten hours ago may count as older than any finite interval, and
    /// is read again (see `RowCache`).
    public var stalenessInterval: TimeInterval = -1
    /// Whether a fault whose row is gone turns into a deleted object (true, the
    /// default, as in Core Data) instead of trapping.
    ///
    /// Only "the row does not exist" makes a fault inaccessible. A read that
    /// fails for any other reason — an I/O error, a damaged page, a busy
    /// database — never turns into a deleted object, an empty relationship or
    /// a missing row: the object stays a fault (the to-many stays unloaded),
    /// the error is thrown by throwing paths (``ManagedObject/loadValues()``,
    /// ``ManagedObject/value(forKey:)``, fetches, saves) and posted on
    /// ``events`` for the others, a save that involves the object throws it,
    /// and the next access tries again. See ``FaultFulfillmentError``.
    public var shouldDeleteInaccessibleFaults = true
    /// Whether the context keeps every registered object alive. The default is false.
    public var retainsRegisteredObjects = false

    /// Whether saving is refused: ``save()`` throws ``ObjectGraphError/Code-swift.struct/readOnly``
    /// and the changes stay in the context. The default is false.
    ///
    /// Unlike the other settings it may change while the context is in use,
    /// from any thread (a stack's ``isMainContextReadOnly``), and a child's
    /// save reads its parents' on the child's queue: it is atomic.
    public var isReadOnly: Bool {
        get { readOnlyFlag.load(ordering: .relaxed) }
        set { readOnlyFlag.store(newValue, ordering: .relaxed) }
    }
    private let readOnlyFlag = Atomic<Bool>(false)

    /// Whether ``save()`` of a child context goes on to save each parent in
    /// turn, so the changes reach the store in one call (RestKit's
    /// `saveToPersistentStore`). The default is false: a child saves into its
    /// parent only, as in Core Data.
    ///
    /// Such a save checks its parents first: if one is ``isReadOnly``, it
    /// throws ``ObjectGraphError/Code-swift.struct/readOnly`` naming that parent before
    /// pushing anything, so no change is left stuck in a parent that cannot
    /// save it.
    public var savesToPersistentStore = false

    /// The coordinator the context saves to, directly or through its parents.
    public var persistentStoreCoordinator: PersistentStoreCoordinator? {
        get { parent?.persistentStoreCoordinator ?? coordinator }
        set {
            coordinator = newValue
            if newValue != nil { parent = nil }
            // A generation is of one coordinator's stores: another's are read as they are.
            pinnedToken = nil
        }
    }

    /// The context this one saves into, for a child context.
    // `@exclusivity(unchecked)`, as `coordinator`: read for every object a
    // context makes (through ``persistentStoreCoordinator``), set before use.
    @exclusivity(unchecked) public var parent: ManagedObjectContext? {
        didSet {
            if let parent {
                coordinator = nil
                // A child reads its root's generation, not one of its own.
                pinnedToken = nil
                parent.childContextsExist.withLock { $0 = true }
            }
        }
    }

    let queue: DispatchQueue
    private let queueToken: QueueToken
    @exclusivity(unchecked) private var coordinator: PersistentStoreCoordinator?

    // MARK: - Internal state (protected by `queue`)
    //
    // `@exclusivity(unchecked)`: this state is confined to the context's queue
    // (checked in debug builds), and the runtime's dynamic exclusivity check
    // on every access of a class's stored property cost about a sixth of an
    // import's instructions. The test suite runs with the checks' findings
    // already fixed: no access here overlaps another.

    /// Every registered object.
    ///
    /// Held strongly, and swept: an unchanged object that nothing but the
    /// registry holds is dropped (see `sweepRegistry()`), which is what a weak
    /// reference would do, found by `isKnownUniquelyReferenced` instead. Weak
    /// references would give every object a side table, and every retain and
    /// release of the object would take the runtime's slow path.
    @exclusivity(unchecked) var registry = ObjectRegistry()
    /// Registry size at which the next sweep runs.
    @exclusivity(unchecked) var sweepThreshold = 1024
    /// Objects inserted, updated and deleted since the last save, by ID.
    @exclusivity(unchecked) var unsavedInserts = ChangedObjects(marking: .insertedChange, listing: .insertedListed)
    @exclusivity(unchecked) var unsavedUpdates = ChangedObjects(marking: .updatedChange, listing: .updatedListed)
    @exclusivity(unchecked) var unsavedDeletes = ChangedObjects(marking: .deletedChange, listing: .deletedListed)

    /// Whether `object` is among the objects the next save inserts, updates or deletes.
    func hasUnsavedChange(_ object: ManagedObject) -> Bool {
        unsavedInserts.contains(object) || unsavedUpdates.contains(object) || unsavedDeletes.contains(object)
    }
    /// Changes not yet reported by `processPendingChanges()`.
    @exclusivity(unchecked) var pendingChanges = PendingChanges()
    /// Reads that failed and are not resolved yet, by object (see `noteReadFailure`).
    @exclusivity(unchecked) var readFailures: [ObjectID: FaultFulfillmentError] = [:]
    /// Objects inserted and then deleted since the last save: the store never
    /// hears of them, but the context has changed (``hasChanges``), as in Core Data.
    @exclusivity(unchecked) var deletedInsertedObjectIDs: Set<ObjectID> = []
    /// Values of a uniqueness constraint that a fetch just found in no row,
    /// for the next save's check to skip the store's lookup of (see
    /// ``UniqueValuesFoundAbsent``); that save takes them.
    @exclusivity(unchecked) package var uniqueValuesFoundAbsent: UniqueValuesFoundAbsent?
    /// Fault groups from batched fetches: firing one member loads its whole batch.
    @exclusivity(unchecked) var faultBatches: [ObjectID: FaultBatch] = [:]
    /// The generation of the stores' data this context reads: nil for the
    /// latest data, ``QueryGenerationToken/current`` until the next read fixes
    /// one (see ``setQueryGenerationFrom(_:)``).
    @exclusivity(unchecked) var pinnedToken: QueryGenerationToken?
    /// Whether a save is checking and writing to the store: its reads see the
    /// latest data, whatever generation the context is pinned to.
    @exclusivity(unchecked) var isSaving = false
    /// The class ``ManagedObject/init(context:)`` made last, with the
    /// coordinator whose model it looked the class up in and the entity it
    /// found: an import makes object after object of one class, and the
    /// model's lookup hashed the class every time. Keyed by the coordinator
    /// (its model is a constant) rather than the model: reaching the model
    /// retained and released it, 490 instructions an object against 197.
    /// The coordinator is held so that its identifier, which is what is
    /// compared (a copy of the whole entry retained and released two objects,
    /// ~160 instructions an object), names no other coordinator meanwhile.
    @exclusivity(unchecked) private var lastClassEntity: (type: ObjectIdentifier, coordinatorID: ObjectIdentifier,
                                                          coordinator: PersistentStoreCoordinator, entity: EntityDescription)?
    /// Whether a child context was ever made with this context as its parent
    /// (set from the child's side, so atomic).
    let childContextsExist = Locked(false)
    var hasChildContexts: Bool { childContextsExist.withLock { $0 } }
    /// For a parent: the permanent IDs its saves gave to objects its children know by temporary ID.
    @exclusivity(unchecked) var permanentIDsByTemporaryID: [ObjectID: ObjectID] = [:]
    #if DEBUG
    /// Members of to-many lists that changing one member at a time visited,
    /// moved or copied in this context (see ``ToManyMemberIndex``): a
    /// deterministic measure of that work, which tests use to check that
    /// building a to-many of n members through its inverse costs O(n).
    /// Debug builds only: release builds neither keep nor count it.
    @exclusivity(unchecked) package var toManyMemberWork = 0
    #endif
    /// The observer behind `automaticallyMergesChangesFromParent`.
    let automaticMergeObserver = Locked<ObserverToken?>(nil)
    /// Subscribers of `events`; shared with the iterating tasks.
    let eventSubscribers = StreamSubscribers<ContextEvent>()

    /// Creates a context of the given kind, with no coordinator or parent yet.
    public init(concurrencyType: ConcurrencyType) {
        self.concurrencyType = concurrencyType
        self.isObservable = false
        switch concurrencyType {
        case .mainQueue:
            queue = .main
            queueToken = QueueToken.main
        case .privateQueue:
            queue = DispatchQueue(label: "DataStack.ManagedObjectContext")
            queueToken = QueueToken()
            queue.setSpecific(key: QueueToken.key, value: queueToken)
        }
    }

    /// Creates a context on a coordinator.
    public convenience init(concurrencyType: ConcurrencyType, coordinator: PersistentStoreCoordinator) {
        self.init(concurrencyType: concurrencyType)
        self.coordinator = coordinator
    }

    /// Creates a child context of `parent`.
    public convenience init(concurrencyType: ConcurrencyType, parent: ManagedObjectContext) {
        self.init(concurrencyType: concurrencyType)
        // Observers do not run inside an initializer: do what `parent`'s didSet does.
        self.parent = parent
        parent.childContextsExist.withLock { $0 = true }
    }

    deinit {
        // Objects outliving their context see no context (they hold it unretained).
        for object in registry.objects { object.managedObjectContext = nil }
        if let observer = automaticMergeObserver.withLock({ $0 }) {
            NotificationCenter.default.removeObserver(observer.token)
        }
    }

    /// The entity bound to `type` in the model of the context's coordinator,
    /// for ``ManagedObject/init(context:)``; nil when there is no coordinator
    /// or the class is bound to no single entity.
    package func entity(forObjectsOf type: ManagedObject.Type) -> EntityDescription? {
        assertOnQueue()
        guard let coordinator = persistentStoreCoordinator else { return nil }
        if lastClassEntity?.type == ObjectIdentifier(type), lastClassEntity?.coordinatorID == ObjectIdentifier(coordinator) {
            return lastClassEntity?.entity
        }
        guard let entity = coordinator.managedObjectModel.entity(for: type) else { return nil }
        lastClassEntity = (ObjectIdentifier(type), ObjectIdentifier(coordinator), coordinator, entity)
        return entity
    }

    // MARK: - Queue

    /// Whether the caller runs on this context's queue.
    public var isOnQueue: Bool {
        DispatchQueue.getSpecific(key: QueueToken.key) === queueToken
    }

    /// Reports use of the context off its queue: always in debug builds, in
    /// release builds when `DATASTACK_QUEUE_CHECKS=1`.
    package func assertOnQueue(file: StaticString = #fileID, line: UInt = #line) {
        if QueueToken.checksEnabled && !isOnQueue {
            preconditionFailure("context \(name ?? "unnamed") used off its queue; wrap the call in perform(_:)", file: file, line: line)
        }
    }

    /// Runs `block` on the context's queue, later, and returns at once.
    ///
    /// Pending changes are processed when the block ends.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        queue.async {
            block()
            self.processPendingChanges()
        }
    }

    /// Runs `body` on the context's queue and waits for its result.
    ///
    /// Reentrant: called on the context's own queue, it runs `body` at once
    /// (a `queue.sync` there would deadlock).
    public func performAndWait<T>(_ body: () throws -> T) rethrows -> T {
        if isOnQueue { return try body() }
        return try queue.sync(execute: body)
    }

    /// Runs `body` on the context's queue and returns its result to the caller.
    ///
    /// With the default `schedule`, ``ScheduledTaskType/immediate``, a caller
    /// already on the context's queue (a main-queue context called from the
    /// main actor) runs `body` at once, as Core Data does, rather than behind
    /// the blocks the queue holds; ``ScheduledTaskType/enqueued`` always queues
    /// it. Pending changes are processed when the body ends, either way.
    ///
    /// The function runs on the caller's actor (`isolation`), which is how it
    /// knows whether the caller is on the context's queue.
    public func perform<T: Sendable, E: Error>(
        schedule: ScheduledTaskType = .immediate,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws(E) -> T
    ) async throws(E) -> T {
        if schedule == .immediate && isOnQueue {
            let result = Result<T, E> { () throws(E) -> T in try body() }
            processPendingChanges()
            return try result.get()
        }
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                let result = Result<T, E> { () throws(E) -> T in try body() }
                self.processPendingChanges()
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    // MARK: - Change state

    /// Whether the context has unsaved inserts, updates or deletes.
    ///
    /// Deleting an object that was inserted and never saved is a change too,
    /// as in Core Data: the context stays changed until it saves (which writes
    /// nothing for that object) or rolls back.
    public var hasChanges: Bool {
        assertOnQueue()
        return !unsavedInserts.isEmpty || !unsavedUpdates.isEmpty || !unsavedDeletes.isEmpty
            || !deletedInsertedObjectIDs.isEmpty
    }

    /// The objects inserted since the last save.
    public var insertedObjects: Set<ManagedObject> { assertOnQueue(); return Set(unsavedInserts.objects) }
    /// The objects changed since the last save (not inserted or deleted ones).
    public var updatedObjects: Set<ManagedObject> { assertOnQueue(); return Set(unsavedUpdates.objects) }
    /// The objects that the next save deletes.
    public var deletedObjects: Set<ManagedObject> { assertOnQueue(); return Set(unsavedDeletes.objects) }

    /// How many objects the next save inserts and updates, without building
    /// ``insertedObjects`` and ``updatedObjects``.
    package var pendingChangeCounts: (inserted: Int, updated: Int) {
        assertOnQueue()
        return (unsavedInserts.count, unsavedUpdates.count)
    }

    /// Makes room for `count` inserts, for a caller that knows how many come
    /// (an import chunk): the change tracking tables then never grow by rehashing.
    package func reserveCapacity(forInserting count: Int) {
        assertOnQueue()
        registry.reserveCapacity(registry.count + count)
        unsavedInserts.reserveCapacity(unsavedInserts.count + count)
        pendingChanges.reserveCapacity(forInserting: count)
    }

    /// Every object registered in the context that is still alive.
    public var registeredObjects: Set<ManagedObject> {
        assertOnQueue()
        sweepRegistry(always: true)
        return Set(registry.objects)
    }

    /// How many live objects the context holds (``registeredObjects``.count without building the set).
    public var registeredObjectCount: Int {
        assertOnQueue()
        sweepRegistry(always: true)
        return registry.count
    }
}

/// The identity of a context queue, found with `DispatchQueue.getSpecific`.
///
/// Main-queue contexts share one token set on `DispatchQueue.main`, so "am I on
/// this context's queue" never depends on `Thread.isMainThread` (on Linux the
/// main queue can run on another thread).
final class QueueToken: Sendable {
    static let key = DispatchSpecificKey<QueueToken>()

    static let main: QueueToken = {
        let token = QueueToken()
        DispatchQueue.main.setSpecific(key: key, value: token)
        return token
    }()

    /// Debug builds always check; release builds when `DATASTACK_QUEUE_CHECKS=1`.
    static let checksEnabled: Bool = {
        #if DEBUG
        return true
        #else
        return ProcessInfo.processInfo.environment["DATASTACK_QUEUE_CHECKS"] == "1"
        #endif
    }()
}

/// Objects changed since the last `processPendingChanges()`.
///
/// The inserted ones are a list of objects, each marked
/// ``ManagedObject/Flags/pendingInsert`` while it counts (a delete or a
/// uniqueness merge takes the mark away and leaves the entry), rather than a
/// set of IDs: an append and a bit per insert, no hashing; their IDs are read
/// when the changes are reported, so a permanent ID given meanwhile is the one
/// reported.
struct PendingChanges {
    private(set) var insertedObjects: [ManagedObject] = []
    private(set) var updated: Set<ObjectID> = []
    /// The ID ``noteUpdated(_:)`` inserted last: the writes of one object's
    /// properties, one after another (an import's), hash its ID once.
    private var lastUpdated: ObjectID?
    var deleted: Set<ObjectID> = []
    var isEmpty: Bool { insertedObjects.isEmpty && updated.isEmpty && deleted.isEmpty }

    /// Counts `object` as inserted, once.
    mutating func noteInserted(_ object: ManagedObject) {
        if object.flags.contains(.pendingInsert) { return }
        object.flags.insert(.pendingInsert)
        insertedObjects.append(object)
    }

    /// Counts the object of `id` as updated.
    mutating func noteUpdated(_ id: ObjectID) {
        if let lastUpdated, lastUpdated == id { return }
        updated.insert(id)
        lastUpdated = id
    }

    /// Stops counting the object of `id` as updated.
    mutating func forgetUpdated(_ id: ObjectID) {
        updated.remove(id)
        lastUpdated = nil
    }

    /// Stops counting `object` as inserted.
    func forgetInserted(_ object: ManagedObject) {
        object.flags.remove(.pendingInsert)
    }

    mutating func reserveCapacity(forInserting count: Int) {
        insertedObjects.reserveCapacity(insertedObjects.count + count)
    }

    /// The IDs of the objects still counted as inserted; forgets them all.
    mutating func takeInsertedIDs() -> [ObjectID] {
        var ids: [ObjectID] = []
        ids.reserveCapacity(insertedObjects.count)
        for object in insertedObjects where object.flags.contains(.pendingInsert) {
            object.flags.remove(.pendingInsert)
            ids.append(object.objectID)
        }
        insertedObjects = []
        return ids
    }

    /// Forgets every pending change.
    mutating func removeAll() {
        for object in insertedObjects { object.flags.remove(.pendingInsert) }
        self = PendingChanges()
    }
}

/// Faults created together by a batched fetch; firing one loads the batch.
final class FaultBatch {
    let objectIDs: [ObjectID]
    init(objectIDs: [ObjectID]) { self.objectIDs = objectIDs }
}
