import DataStack
import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// Keeps a stack's local SQLite store in step with other replicas through a
/// ``SyncHub``, in the background: it pushes the store's history since the
/// last push, pulls the hub's changes since the last pull, and applies them
/// through an importer context, so the stack's main context refreshes only
/// the objects it has registered — the stack's promise, across replicas.
///
/// ```swift
/// try await StackManager.default.setup(model: model, storeURL: url)
/// let sync = try SyncEngine(stack: .default, options: SyncOptions(hub: PostgreSQLSyncHub(url: hubURL)))
/// sync.start()
/// for await event in sync.events { print(event) }
/// ```
///
/// Saves never wait for the network: the engine reads what was saved from the
/// store's persistent history afterwards. Every step records its progress in
/// the replica's sync tables after the work it describes, so an engine killed
/// at any point repeats at most one step when it starts again, and repeating
/// one changes nothing (see ``SyncHub`` and ``SyncMerger``).
public final class SyncEngine: Sendable {
    /// This replica's ID, kept in the store's sync tables.
    public let replica: UUID
    let stack: StackManager
    let options: SyncOptions
    let ledger: LedgerBox
    let merger: SyncMerger
    let clock: HybridLogicalClock
    let modelVersion: String
    /// How the hub encodes this replica's pushes and decodes its pulls: the model, and the ledger's object numbers.
    let codec: SyncCodec
    private let state = Locked(State())
    /// Held for a whole cycle: cycles never overlap.
    let cycleLock = NSLock()
    private let wakeUp = DispatchSemaphore(value: 0)
    /// Signalled after each cycle, for the hub listener.
    private let cycleEnded = DispatchSemaphore(value: 0)

    struct State {
        var status: SyncStatus = .stopped
        var isRunning = false
        var isRegistered = false
        var subscribers: [UUID: AsyncStream<SyncEvent>.Continuation] = [:]
        /// The hub sequence applied by the last cycle, for the hub listener.
        var pulledSequence: Int64 = 0
        /// A local save woke the loop since its last cycle (the hub's notices need no gathering).
        var savedSinceCycle = false
        var saveObserver: SaveObserver?
    }

    /// - Throws: ``SyncError`` `.localFailure` when the stack is not set up on an
    ///   SQLite store or its sync tables cannot be made; `.notInModel` for a
    ///   policy the model declares wrongly or a resolver it names that
    ///   `options` lacks.
    public init(stack: StackManager, options: SyncOptions) throws(SyncError) {
        guard let url = stack.storeURL, url.isFileURL else {
            throw SyncError(.localFailure, message: "a replica syncs a stack set up on a local SQLite store; this stack has \(stack.storeURL?.absoluteString ?? "none")")
        }
        let model = stack.writerCoordinator.managedObjectModel
        self.stack = stack
        self.options = options
        let ledger = try SyncLedger(storePath: url.path)
        self.ledger = LedgerBox(ledger)
        merger = SyncMerger(policies: try SyncPolicies(model: model, resolvers: options.resolvers))
        modelVersion = model.versionChecksum
        codec = SyncCodec(model: model, numbering: LedgerNumbering(self.ledger))
        let replica = try ledger.write("making the replica's ID") {
            if let existing = try ledger.uuid("replica") { return existing }
            let id = UUID()
            try ledger.setUUID(id, for: "replica")
            return id
        }
        self.replica = replica
        // The clock resumes where it stopped: a restarted replica's changes stay after its earlier ones.
        let latest = try ledger.read("reading the clock") { () throws -> HybridTimestamp? in
            guard let milliseconds = try ledger.integer("clock") else { return nil }
            let counter = try ledger.integer("clockCounter") ?? 0
            return HybridTimestamp(milliseconds: milliseconds, counter: UInt32(clamping: counter), replica: replica)
        }
        clock = HybridLogicalClock(replica: replica, latest: latest)
        // The history not read yet is this engine's to push: the stack keeps it from purges.
        if let scanned = try ledger.read("reading the scan bookmark", { try ledger.integer("scanned") }),
           let store = stack.writerCoordinator.persistentStores.first {
            stack.retainHistory(after: PersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: scanned),
                                for: historyReader)
        }
    }

    // MARK: - Status and events

    /// What the engine is doing now.
    public var status: SyncStatus { state.withLock { $0.status } }

    /// The engine's events from now on, in order, for as long as the sequence is iterated.
    public var events: AsyncStream<SyncEvent> {
        let (stream, continuation) = AsyncStream<SyncEvent>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        let key = UUID()
        state.withLock { $0.subscribers[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    func emit(_ event: SyncEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    func notePulled(through sequence: Int64) {
        state.withLock { $0.pulledSequence = sequence }
    }

    func setStatus(_ status: SyncStatus) {
        let changed = state.withLock { current -> Bool in
            guard current.status != status else { return false }
            current.status = status
            return true
        }
        if changed { emit(.statusChanged(status)) }
    }

    // MARK: - Running

    /// Starts syncing in the background: a cycle now, then one after every
    /// local save, every hub notice and every ``SyncOptions/pullInterval``.
    public func start() {
        let thread: Thread? = state.withLock { current in
            guard !current.isRunning else { return nil }
            current.isRunning = true
            let thread = Thread { [self] in runLoop() }
            thread.name = "DataStackSync \(replica.uuidString.prefix(8))"
            return thread
        }
        guard let thread else { return }
        let observer = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: nil, queue: nil
        ) { [weak self] notification in
            // Any save to this stack's store wakes the loop; the engine's own saves make one more
            // cycle, which finds only its own history and nothing to pull, and wakes nothing.
            guard let self, let context = notification.object as? ManagedObjectContext,
                  context.persistentStoreCoordinator === self.stack.writerCoordinator
                    || context.persistentStoreCoordinator === self.stack.mainCoordinator else { return }
            self.state.withLock { $0.savedSinceCycle = true }
            self.wakeUp.signal()
        }
        state.withLock { $0.saveObserver = SaveObserver(token: observer) }
        thread.start()
        if options.hub.notifiesChanges {
            let listener = Thread { [self] in listenToHub() }
            listener.name = "DataStackSync hub listener"
            listener.start()
        }
    }

    /// Wakes the loop when the hub has a change this replica has not pulled,
    /// then waits for a cycle to end before it looks again.
    private func listenToHub() {
        let interval = Self.seconds(options.pullInterval)
        while state.withLock({ $0.isRunning }) {
            let after = state.withLock { $0.pulledSequence }
            do {
                if try options.hub.waitForChanges(after: after, timeout: .seconds(5)) {
                    // Cycles that ended before this wake-up count for nothing: wait for the next one.
                    while cycleEnded.wait(timeout: .now()) == .success {}
                    wakeUp.signal()
                    _ = cycleEnded.wait(timeout: .now() + interval)
                }
            } catch {
                // Offline: the loop reports it; look again after an interval.
                _ = cycleEnded.wait(timeout: .now() + interval)
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let components = duration.components
        return Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Stops the background loop after the cycle in progress; returns once it has stopped.
    public func stop() {
        let observer = state.withLock { current in
            current.isRunning = false
            defer { current.saveObserver = nil }
            return current.saveObserver
        }
        if let observer { NotificationCenter.default.removeObserver(observer.token) }
        wakeUp.signal()
        cycleLock.lock()   // the cycle in progress, if any, has ended
        cycleLock.unlock()
        setStatus(.stopped)
    }

    private func runLoop() {
        while true {
            // Checked under the cycle lock: once stop() has returned, no cycle starts.
            cycleLock.lock()
            guard state.withLock({ $0.isRunning }) else {
                cycleLock.unlock()
                return
            }
            do {
                try cycle()
            } catch {
                // Reported through status and events; the loop tries again at the next wake-up.
            }
            cycleLock.unlock()
            if wakeUp.wait(timeout: .now() + Self.seconds(options.pullInterval)) == .success,
               state.withLock({ $0.savedSinceCycle }) {
                // Woken by a local save: wait until saves pause for the gathering interval (at most
                // ten of them), so that an import's run of saves goes in one cycle after it rather
                // than in cycles competing with it. The hub's notices are answered at once.
                let gathering = Self.seconds(options.gatheringInterval)
                let latest = DispatchTime.now() + gathering * 10
                while DispatchTime.now() < latest, wakeUp.wait(timeout: .now() + gathering) == .success {}
            }
            state.withLock { $0.savedSinceCycle = false }
        }
    }

    /// Runs one whole cycle on the calling thread — push what was saved here,
    /// pull and apply what others pushed — and returns when it is done.
    /// Waits for a cycle the background loop is running.
    ///
    /// - Throws: ``SyncError``; `.offline` when the hub cannot be reached (the
    ///   status says so too, and nothing is lost).
    public func syncNow() throws(SyncError) {
        cycleLock.lock()
        defer { cycleLock.unlock() }
        try cycle()
    }

    /// One cycle; the caller holds the cycle lock.
    private func cycle() throws(SyncError) {
        do {
            if !state.withLock({ $0.isRegistered }) { try register() }
            // A local save racing the apply makes it throw .concurrentSave before anything of
            // it is kept: the next attempt reads that save first, then folds again.
            for attempt in 1... {
                do {
                    setStatus(.pushing)
                    try scanLocalHistory()
                    try pushOutbox()
                    setStatus(.pulling)
                    try pullAndApply()
                    break
                } catch let error where error.code == .concurrentSave && attempt < 5 {
                    continue
                }
            }
            setStatus(.idle)
            cycleEnded.signal()
        } catch {
            cycleEnded.signal()
            setStatus(error.code == .offline ? .offline(error) : .error(error))
            if error.code == .offline { state.withLock { $0.isRegistered = false } }
            throw error
        }
    }

    func register() throws(SyncError) {
        let registration = try hubCall { try options.hub.register(replica: replica, modelVersion: modelVersion) }
        try ledger.value.write("recording the registration") {
            // A crash after a push and before its outbox was cleared: the hub holds those changes.
            try ledger.value.removeFromOutbox(through: registration.lastPushedLocalSequence)
        }
        state.withLock { $0.isRegistered = true }
    }
}

extension SyncEngine {
    /// Calls the hub; a hub that throws something other than ``SyncError`` (a user's own hub) fails as `.hubFailure`.
    func hubCall<T>(_ body: () throws -> T) throws(SyncError) -> T {
        do {
            return try body()
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.hubFailure, message: "the hub failed: \(error)")
        }
    }
}

/// A notification observer's token, kept to remove it.
struct SaveObserver: @unchecked Sendable {
    // @unchecked Sendable: the token is only handed back to NotificationCenter, which is thread-safe.
    let token: any NSObjectProtocol
}

/// The ledger, used only under the engine's cycle lock.
final class LedgerBox: @unchecked Sendable {
    // @unchecked Sendable: every use is inside SyncEngine.syncNow, which holds the cycle lock.
    let value: SyncLedger
    init(_ value: SyncLedger) { self.value = value }
}
