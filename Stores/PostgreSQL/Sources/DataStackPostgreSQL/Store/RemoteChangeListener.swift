import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// Listens for other connections' saves on a connection of its own
/// (`LISTEN datastack_history`) and reports each as a
/// ``ObjectGraph/StoreRemoteChange`` carrying its history token.
///
/// A dropped connection is retried every half second; once it is back, one
/// change without a token is reported, so that the reader reads every
/// transaction after its last token: what was committed while nobody listened
/// is caught up, not missed.
final class RemoteChangeListener: @unchecked Sendable {
    // @unchecked Sendable: `isStopped` is read and written under `lock`; the
    // connection lives on the listening thread only.
    private let url: URL
    private let storeIdentifier: String
    private let onChange: @Sendable (StoreRemoteChange) -> Void
    private let lock = NSLock()
    private var isStopped = false
    private let finished = DispatchSemaphore(value: 0)

    /// Connects and listens before returning, so that no save committed after
    /// it returns goes unreported.
    ///
    /// - Throws: ``PostgreSQLError`` when the first connection fails.
    init(url: URL, storeIdentifier: String, onChange: @escaping @Sendable (StoreRemoteChange) -> Void) throws {
        self.url = url
        self.storeIdentifier = storeIdentifier
        self.onChange = onChange
        let connection = try PostgreSQLConnection(url: url)
        try connection.listen(PostgreSQLStore.historyChannel)
        let thread = Thread { [self] in listen(on: connection) }
        thread.name = "DataStack.PostgreSQLStore.listener"
        thread.start()
    }

    /// Stops listening; when it returns, `onChange` is not called again.
    func stop() {
        let wasStopped = lock.withLock {
            defer { isStopped = true }
            return isStopped
        }
        if !wasStopped { finished.wait() }
    }

    private var shouldStop: Bool { lock.withLock { isStopped } }

    private func listen(on first: PostgreSQLConnection) {
        defer { finished.signal() }
        var connection: PostgreSQLConnection? = first
        while !shouldStop {
            guard let current = connection else {
                Thread.sleep(forTimeInterval: 0.5)
                // A failure to reconnect is retried on the next turn; the catch-up report waits for success.
                if let again = try? PostgreSQLConnection(url: url), (try? again.listen(PostgreSQLStore.historyChannel)) != nil {
                    connection = again
                    report(StoreRemoteChange(storeIdentifier: storeIdentifier, storeURL: url, historyToken: nil))
                }
                continue
            }
            do {
                for notification in try current.notifications(waitingUpTo: .milliseconds(200)) {
                    report(change(from: notification.payload))
                }
            } catch {
                // The connection broke (server restarted, network): listen again on a new one.
                current.close()
                connection = nil
            }
        }
        connection?.close()
    }

    private func report(_ change: StoreRemoteChange) {
        // Checked again under the lock, so that nothing is reported once stop() has begun.
        lock.lock()
        defer { lock.unlock() }
        if !isStopped { onChange(change) }
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
            listener = try RemoteChangeListener(url: databaseURL, storeIdentifier: identifier, onChange: onChange)
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
