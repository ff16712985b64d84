import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// The dual-coordinator "writer + main" Core Data stack, in the RTCoreDataStack style.
///
/// ```swift
/// try await StackManager.default.setup(model: model)
///
/// // Background: import through the writer coordinator, straight to disk.
/// let importer = StackManager.default.importerContext()
/// try await importer.perform {
///     for quote in quotes { Ticker(context: importer).update(from: quote) }
///     try importer.save()
/// }
///
/// // Main queue: the main context refreshes only the objects it has registered.
/// let shown = try StackManager.default.mainContext.fetch(watchlistRequest)
/// ```
///
/// Two coordinators share one SQLite file in WAL mode. The **writer
/// coordinator** serves importer contexts, whose saves go to disk on their own
/// queues and never wait for the main queue. The **main coordinator** serves
/// ``mainContext`` and its children. After every save on the writer side, the
/// stack merges the save into the main context on the main queue: the main
/// context reloads the updated objects it has registered and removes the
/// deleted ones; inserted objects are reported by ID only. Importing thousands
/// of objects while ten are on screen touches those ten.
///
/// ## Topics
/// ### Setting up
/// - ``setup(model:storeURL:seedDatabaseURL:storeType:options:)``
/// - ``setup(modelNamed:in:storeURL:managedObjectClasses:options:)``
/// - ``setup(model:storeURL:options:callback:)``
/// - ``migrationProgress``
/// - ``defaultStoreURL``
/// ### Contexts
/// - ``mainContext``
/// - ``importerContext()``
/// - ``temporaryContext()``
/// - ``creatorContext()``
/// - ``newChildContext(concurrencyType:tracksChanges:)``
/// ### Importing
/// - ``performImport(_:chunkSize:onConflict:_:progress:)``
/// - ``ImportConflictResolution``
/// ### Events
/// - ``didMergeNotification``
/// - ``StackDidMerge``
/// - ``historyDidReadNotification``
/// - ``historyMergeDidFailNotification``
/// - ``readSourceDidChangeNotification``
/// - ``readsFromStandby``
/// ### Closing
/// - ``close()``
/// - ``isClosed``
public final class StackManager: Sendable {
    /// The shared stack.
    public static let `default` = StackManager()

    /// Posted on the main queue after the main context merged (or, with
    /// ``mergesIncomingSavedObjects`` off, was told about) a save on the writer
    /// coordinator; `object` is the stack, the payload a ``StackDidMerge``.
    public static let didMergeNotification = Notification.Name("DataStack.StackManager.didMerge")

    let state = Locked(State())
    /// Where other writers' history is read (StackManager+History.swift), one read at a time.
    let historyQueue = DispatchQueue(label: "DataStack.StackManager.history", qos: .userInitiated)

    struct State: @unchecked Sendable {
        // @unchecked Sendable: observer tokens are opaque handles; everything is touched under `state`.
        var setup: Setup?
        var isSettingUp = false
        var isMainContextReadOnly = false
        var mergesIncomingSavedObjects = true
        var observers: [any NSObjectProtocol] = []
        var trackedChildren: [WeakContext] = []
        var progressSubscribers = ProgressSubscribers()
        /// The token of the last history transaction the main context merged
        /// (or skipped as its own), while the stack follows persistent history.
        var lastMergedHistoryToken: PersistentHistoryToken?
        /// The token of the last history transaction read on ``historyQueue``
        /// and handed to the main queue; ahead of `lastMergedHistoryToken`
        /// while those merges wait their turn.
        var lastReadHistoryToken: PersistentHistoryToken?
        var historyMergeError: (any Error)?
        /// History reads that failed in a row (0 once one succeeds): the
        /// retry after the n-th waits ``StackManager/historyRetryDelay(after:)``.
        var historyReadFailures = 0
        /// Whether a retry of a failed history read waits on ``historyQueue``.
        var historyRetryScheduled = false
        /// History that readers of this process still need, by reader
        /// (``StackManager/retainHistory(after:for:)``): never purged.
        var historyHolds: [String: PersistentHistoryToken] = [:]
        /// The closing of the stack, once ``close()`` was called.
        var closing: Task<Void, Never>?
    }

    /// What `setup` made.
    struct Setup: Sendable {
        let model: ManagedObjectModel
        let storeURL: URL?
        let storeType: StoreType
        let options: StoreOptions
        let mainCoordinator: PersistentStoreCoordinator
        let writerCoordinator: PersistentStoreCoordinator
        let mainContext: ManagedObjectContext
        /// The ``ManagedObjectContext/transactionAuthor`` of every context of this stack that saves to the store.
        let transactionAuthor: String
        /// Whether the main context merges other writers' history transactions:
        /// it has a coordinator of its own, watches for remote changes, and its
        /// store records history. Decided once, at setup (a reset reopens the
        /// same type with the same options).
        let followsPersistentHistory: Bool
    }

    /// Creates a stack; call one of the `setup` methods before using it.
    public init() {}

    deinit {
        for observer in state.withLock({ $0.observers }) { NotificationCenter.default.removeObserver(observer) }
    }

    // MARK: - State

    /// Whether `setup` finished and the contexts can be used: false again once the stack is closed (``close()``).
    public var isReady: Bool { state.withLock { $0.setup != nil && $0.closing == nil } }

    /// Whether saving the main context throws a read-only error (its changes stay
    /// in the context). The default is false.
    ///
    /// A creator context's save refuses up front while this is true — it
    /// throws ``ObjectGraphError/Code-swift.struct/readOnly`` naming the main context, the
    /// creator keeps its changes and the main context gets none — because a
    /// context that saves on to the store checks its parents before pushing
    /// (see ``ManagedObjectContext/savesToPersistentStore``).
    public var isMainContextReadOnly: Bool {
        get { state.withLock { $0.isMainContextReadOnly } }
        set {
            // Under the lock, so that two setters, or a setter and a new creator, cannot apply out of order.
            state.withLock { state in
                state.isMainContextReadOnly = newValue
                state.setup?.mainContext.isReadOnly = newValue
            }
        }
    }

    /// Whether the main context merges saves of the writer coordinator. The
    /// default is true; when false, the stack only posts ``didMergeNotification``
    /// with the IDs.
    public var mergesIncomingSavedObjects: Bool {
        get { state.withLock { $0.mergesIncomingSavedObjects } }
        set { state.withLock { $0.mergesIncomingSavedObjects = newValue } }
    }

    /// Where the store lives (nil for an in-memory stack).
    public var storeURL: URL? { state.withLock { $0.setup?.storeURL } }

    private var current: Setup {
        guard let setup = state.withLock({ $0.setup }) else {
            preconditionFailure("StackManager used before setup; call setup(model:storeURL:) first")
        }
        return setup
    }

    /// The coordinator of the main context and its children.
    public var mainCoordinator: PersistentStoreCoordinator { current.mainCoordinator }
    /// The coordinator of importer contexts, whose saves go straight to disk.
    /// For an in-memory stack it is the main coordinator.
    public var writerCoordinator: PersistentStoreCoordinator { current.writerCoordinator }

    /// The main-queue context the app shows, on the main coordinator, with the
    /// `.mergeByPropertyStoreTrump` policy. Using the stack before setup is a
    /// programmer error.
    public var mainContext: ManagedObjectContext { current.mainContext }

    // MARK: - Contexts

    /// A new private-queue context on the writer coordinator, with the
    /// `.mergeByPropertyObjectTrump` policy. Its saves go to disk on its own
    /// queue; the stack then merges them into the main context.
    public func importerContext() -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: writerCoordinator)
        context.name = "importer"
        context.transactionAuthor = current.transactionAuthor
        context.mergePolicy = .mergeByPropertyObjectTrump
        return context
    }

    /// A new main-queue child of ``mainContext`` with the `.rollback` policy, for
    /// scratch work: nothing done in it reaches the main context or the disk,
    /// and its `save()` throws a read-only error.
    public func temporaryContext() -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .mainQueue, parent: mainContext)
        context.name = "temporary"
        context.mergePolicy = .rollback
        context.isReadOnly = true
        return context
    }

    /// A new main-queue child of ``mainContext`` with the `.overwrite` policy,
    /// for creating and editing objects: its `save()` pushes the changes into
    /// the main context and on to disk in one call.
    ///
    /// While ``isMainContextReadOnly`` is true its `save()` throws
    /// ``ObjectGraphError/Code-swift.struct/readOnly`` before pushing anything, so the changes
    /// stay in the creator rather than in a main context that cannot save them.
    public func creatorContext() -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .mainQueue, parent: mainContext)
        context.name = "creator"
        context.mergePolicy = .overwrite
        context.savesToPersistentStore = true
        return context
    }

    /// A new child of ``mainContext`` (RestKit's `newChildManagedObjectContext`).
    ///
    /// - Parameters:
    ///   - concurrencyType: the child's queue. The default is `.privateQueue`.
    ///   - tracksChanges: whether the child merges the main context's saves and
    ///     the stack's merges as they happen. The default is true.
    public func newChildContext(concurrencyType: ConcurrencyType = .privateQueue, tracksChanges: Bool = true) -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: concurrencyType, parent: mainContext)
        context.name = "child"
        context.mergePolicy = .mergeByPropertyObjectTrump
        if tracksChanges {
            context.automaticallyMergesChangesFromParent = true
            state.withLock { state in
                state.trackedChildren.removeAll { $0.context == nil }
                state.trackedChildren.append(WeakContext(context))
            }
        }
        return context
    }
}

/// A context the stack keeps informed without keeping it alive.
struct WeakContext: @unchecked Sendable {
    // @unchecked Sendable: ManagedObjectContext is Sendable; the weak box itself is immutable.
    weak var context: ManagedObjectContext?
    init(_ context: ManagedObjectContext) { self.context = context }
}
