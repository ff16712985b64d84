import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// Listens for other connections' saves on a connection of its own
/// (`LISTEN datastack_history`) and reports each as a
/// ``ObjectGraph/StoreRemoteChange`` carrying its history token.
///
/// A link that goes silent shows no error until the kernel gives up on it,
/// and a notification sent meanwhile waits in the server's retransmissions:
/// so while nothing arrives the listener asks the server for an answer every
/// ``heartbeatInterval`` and counts the session lost when none comes within
/// ``heartbeatTimeout``. A lost session is opened again in attempts of at most
/// ``attemptTimeout`` each (short, so a link that comes back is found within
/// a fraction of a second, not at the kernel's next SYN retry seconds later),
/// ``retryPause`` apart; once it is back, one change without a token is
/// reported, so that the reader reads every transaction after its last token:
/// what was committed while nobody listened is caught up, not missed.
///
/// Changes are handed to `onChange` on the listening thread with no lock
/// held, so `onChange` may do anything, stopping the listener included.
final class RemoteChangeListener: @unchecked Sendable {
    // @unchecked Sendable: `isStopped` and `thread` are read and written under `lock`;
    // the connection lives on the listening thread only.
    private let url: URL
    private let settings: PostgreSQLConnectionSettings
    private let storeIdentifier: String
    private let onChange: @Sendable (StoreRemoteChange) -> Void
    private let lock = NSLock()
    private var isStopped = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    /// Whether reads go to a standby: then, before reporting, the primary's WAL
    /// position is noted for them to wait for (PostgreSQLStandby.swift).
    private let notesWALPosition: Bool

    /// How long the listener waits for a notification before it checks the link.
    static let heartbeatInterval = Duration.seconds(1)
    /// How long the server has to answer the check.
    static let heartbeatTimeout = Duration.seconds(1)
    /// The longest one attempt to connect again may take (or the connect timeout, if shorter).
    static let attemptTimeout = Duration.seconds(1)
    /// The pause after a failed attempt.
    static let retryPause = Duration.milliseconds(100)

    /// Connects and listens before returning, so that no save committed after
    /// it returns goes unreported.
    ///
    /// - Throws: ``PostgreSQLError`` when the first connection fails.
    init(url: URL, settings: PostgreSQLConnectionSettings, storeIdentifier: String, notesWALPosition: Bool = false,
         onChange: @escaping @Sendable (StoreRemoteChange) -> Void) throws {
        self.url = url
        self.notesWALPosition = notesWALPosition
        self.settings = settings
        self.storeIdentifier = storeIdentifier
        self.onChange = onChange
        // Its own tracer, never the store's: as the SQLite store's change watcher, this
        // session runs no statement of the store's work — only its LISTEN, and the
        // heartbeats that tell a dead link — so the store's trace leaves it out.
        let connection = try PostgreSQLConnection(url: url, settings: settings)
        try connection.listen(PostgreSQLStore.historyChannel)
        let thread = Thread { [self] in listen(on: connection) }
        thread.name = "DataStack.PostgreSQLStore.listener"
        lock.withLock { self.thread = thread }
        thread.start()
    }

    /// Stops listening; when it returns, `onChange` is not called again
    /// (called from `onChange` itself, it returns at once and the change being
    /// handed is the last).
    func stop() {
        let (wasStopped, isListenerThread) = lock.withLock {
            defer { isStopped = true }
            return (isStopped, thread === Thread.current)
        }
        if !wasStopped && !isListenerThread { finished.wait() }
    }

    private var shouldStop: Bool { lock.withLock { isStopped } }

    private func listen(on first: PostgreSQLConnection) {
        defer { finished.signal() }
        var connection: PostgreSQLConnection? = first
        var quiet = Duration.zero
        while !shouldStop {
            guard let current = connection else {
                connection = connectAgain()
                quiet = .zero
                continue
            }
            do {
                let slice = Duration.milliseconds(200)
                let notifications = try current.notifications(waitingUpTo: slice)
                if !notifications.isEmpty { try noteWALPosition(current) }
                for notification in notifications where !shouldStop {
                    report(change(from: notification.payload))
                }
                quiet = notifications.isEmpty ? quiet + slice : .zero
                if quiet >= Self.heartbeatInterval {
                    try current.ping(timeout: Self.heartbeatTimeout)
                    quiet = .zero
                }
            } catch {
                // The session broke or went silent (server restarted, link down): listen again on a new one.
                current.close()
                connection = nil
            }
        }
        connection?.close()
    }

    /// One attempt to connect and listen again; after a success, reports the
    /// catch-up change. Nil after a failure (paused, to be tried again).
    private func connectAgain() -> PostgreSQLConnection? {
        var attempt = settings
        attempt.connectTimeout = min(settings.connectTimeout ?? Self.attemptTimeout, Self.attemptTimeout)
        do {
            let again = try PostgreSQLConnection(url: url, settings: attempt)
            try again.listen(PostgreSQLStore.historyChannel)
            try noteWALPosition(again)
            if !shouldStop { report(StoreRemoteChange(storeIdentifier: storeIdentifier, storeURL: url, historyToken: nil)) }
            return again
        } catch {
            // Not reachable yet: tried again after a pause; the catch-up report waits for success.
            Thread.sleep(forTimeInterval: Double(Self.retryPause.components.attoseconds) / 1e18
                         + Double(Self.retryPause.components.seconds))
            return nil
        }
    }

    /// With a standby: the primary's WAL position now, past every commit announced so far,
    /// is what the store's reads must see before they use the standby.
    private func noteWALPosition(_ connection: PostgreSQLConnection) throws {
        guard notesWALPosition else { return }
        PostgreSQLStandby.require(try PostgreSQLStandby.primaryPosition(connection), for: url)
    }

    /// Hands a change over, with no lock held; nothing is reported once stop() has begun.
    private func report(_ change: StoreRemoteChange) {
        guard !shouldStop else { return }
        onChange(change)
    }

    /// The change a payload `<store UUID>:<transaction>` announces; a payload
    /// of another form still reports a change, without a token.
    private func change(from payload: String) -> StoreRemoteChange {
        let parts = payload.split(separator: ":")
        var token: PersistentHistoryToken?
        if parts.count == 2, String(parts[0]) == storeIdentifier, let number = Int64(parts[1]) {
            token = PersistentHistoryToken(storeIdentifier: storeIdentifier, transactionNumber: number)
        }
        return StoreRemoteChange(storeIdentifier: storeIdentifier, storeURL: url, historyToken: token)
    }
}

extension PostgreSQLStore: RemoteChangeObservingStore {
    public func startObservingRemoteChanges(_ onChange: @escaping @Sendable (StoreRemoteChange) -> Void) throws {
        stopObservingRemoteChanges()
        let listener: RemoteChangeListener
        do {
            listener = try RemoteChangeListener(url: databaseURL, settings: connectionSettings, storeIdentifier: identifier,
                                                notesWALPosition: standby != nil, onChange: onChange)
        } catch let error as PostgreSQLError {
            throw storeError(error)
        }
        stateLock.withLock { state.observer = listener }
    }

    public func stopObservingRemoteChanges() {
        let listener = stateLock.withLock {
            defer { state.observer = nil }
            return state.observer
        }
        listener?.stop()
    }
}
