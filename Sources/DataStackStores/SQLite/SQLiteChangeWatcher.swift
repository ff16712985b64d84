@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Dispatch
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Notices commits made to a SQLite file by other connections, for
/// ``StoreOptions/remoteChangeNotifications``.
///
/// A dedicated read-only connection runs `PRAGMA data_version`. SQLite changes
/// that value exactly when another connection — of any process — committed to
/// the file since the last call on this connection, and in WAL mode it is read
/// from the WAL index in shared memory (`-shm`): no disk I/O, no lock held
/// beyond the read. SQLite: <https://sqlite.org/pragma.html#pragma_data_version>
///
/// When to run it: ``StoreFileEvents`` (inotify on the store's folder) wakes
/// the watcher when the database or its log is written; from then on it checks
/// every 10 ms until 100 ms pass without an event, because the event can come
/// a moment before the commit is visible (see ``StoreFileEvents``). Between
/// bursts it checks once a second, which catches writers no file event
/// reports (another machine on a network file system, a platform without
/// inotify) at a cost of nothing measurable; where no file events are to be
/// had at all it checks every 10 ms throughout. An idle store thus costs one
/// pragma a second, and a commit is seen within about 10 ms.
///
/// Every commit by a connection other than this one counts, including the
/// saves of the coordinator that owns the store (its writer is another
/// connection), as Core Data posts for every write to the store. Receivers
/// tell their own transactions apart by the history token or author.
final class SQLiteChangeWatcher: @unchecked Sendable {
    // @unchecked Sendable: `connection`, `events`, `lastVersion` and `lastEvent` are only
    // touched on `queue` after init; `timer` is set once in init and DispatchSource is thread-safe.
    private let queue: DispatchQueue
    private let queueKey = DispatchSpecificKey<Void>()
    private let timer: any DispatchSourceTimer
    private var events: StoreFileEvents?
    private var connection: Connection?
    private var lastVersion: Int64
    /// When the last file event came; nil while the watcher polls slowly.
    private var lastEvent: DispatchTime?

    /// The interval between two checks while files change, or always without file events.
    static let interval = DispatchTimeInterval.milliseconds(10)
    /// How long after the last file event the watcher keeps checking at ``interval``.
    static let settling: UInt64 = 100_000_000
    /// The interval between two checks while no file event comes.
    static let idleInterval = DispatchTimeInterval.seconds(1)

    /// Starts watching on `connection` (a connection of its own: a change by
    /// the connection that asks is never reported) and calls `onChange` on a
    /// private queue after each check that saw a commit.
    ///
    /// - Parameter usesFileEvents: Whether to wait for ``StoreFileEvents``
    ///   between bursts; false polls every 10 ms throughout (as when the
    ///   platform has no file events).
    init(connection: Connection, storeURL: URL, label: String, usesFileEvents: Bool = true,
         onChange: @escaping @Sendable () -> Void) throws {
        self.connection = connection
        lastVersion = try Self.dataVersion(connection)
        queue = DispatchQueue(label: label, qos: .utility)
        queue.setSpecific(key: queueKey, value: ())
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            self.slowDownOnceSettled()
            if self.check() { onChange() }
        }
        // On the queue, so that no file event is handled before the timer is scheduled
        // (it would speed the timer up, and the first schedule slow it down again).
        queue.sync {
            events = !usesFileEvents ? nil : StoreFileEvents(storeURL: storeURL, queue: queue) { [weak self] in
                guard let self else { return }
                self.speedUp()
                // At once too, not only at the next tick: most commits are visible by now.
                if self.check() { onChange() }
            }
            let start = events == nil ? Self.interval : Self.idleInterval
            timer.schedule(deadline: .now() + start, repeating: start, leeway: .milliseconds(5))
            timer.activate()
        }
    }

    /// Whether file events wake the watcher (else it polls every 10 ms); not
    /// to be asked on the watcher's queue.
    var usesFileEvents: Bool { queue.sync { events != nil } }

    /// Checks every 10 ms from now on (on `queue`, after a file event).
    private func speedUp() {
        if lastEvent == nil { timer.schedule(deadline: .now() + Self.interval, repeating: Self.interval, leeway: .milliseconds(5)) }
        lastEvent = .now()
    }

    /// Back to one check a second once no file event came for ``settling``.
    private func slowDownOnceSettled() {
        guard let lastEvent, DispatchTime.now().uptimeNanoseconds - lastEvent.uptimeNanoseconds > Self.settling else { return }
        self.lastEvent = nil
        timer.schedule(deadline: .now() + Self.idleInterval, repeating: Self.idleInterval, leeway: .milliseconds(50))
    }

    /// Whether another connection committed since the last check; a read that
    /// fails (the file is busy being checkpointed, or gone) counts as no change
    /// and is tried again at the next tick.
    private func check() -> Bool {
        guard !timer.isCancelled, let connection, let version = try? Self.dataVersion(connection) else { return false }
        defer { lastVersion = version }
        return version != lastVersion
    }

    private static func dataVersion(_ connection: Connection) throws -> Int64 {
        let statement = try connection.cachedStatement("PRAGMA data_version")
        statement.reset()
        _ = try statement.step()
        let version = statement.int64(at: 0)
        statement.reset()   // ends the implicit read transaction, so the next check sees new commits
        return version
    }

    /// Stops the timer and closes the connection. When it returns, no check
    /// runs any more and `onChange` is not called again (unless it is called
    /// from `onChange` itself, whose call is the last).
    func stop() {
        timer.cancel()
        if DispatchQueue.getSpecific(key: queueKey) != nil {
            stopOnQueue()
        } else {
            queue.sync { stopOnQueue() }
        }
    }

    private func stopOnQueue() {
        events?.cancel()
        events = nil
        connection = nil
    }

    deinit {
        timer.cancel()
        events?.cancel()
    }
}
