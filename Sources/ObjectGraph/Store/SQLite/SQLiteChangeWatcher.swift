import Dispatch
import Foundation

/// Notices commits made to a SQLite file by other connections, for
/// ``StoreOptions/remoteChangeNotifications``.
///
/// A dedicated read-only connection runs `PRAGMA data_version` on a
/// `DispatchSourceTimer` every 10 ms (5 ms leeway). SQLite changes that value
/// exactly when another connection — of any process — committed to the file
/// since the last call on this connection, and in WAL mode it is read from the
/// WAL index in shared memory (`-shm`): no disk I/O, no lock held beyond the
/// read, so an idle store costs a few microseconds a hundred times a second.
///
/// Why not inotify on the `-wal` file: it is Linux only, misses writers on
/// network file systems and in other mount namespaces, fires on every page
/// write rather than per commit (a checkpoint or a rolled-back transaction
/// looks like a change), and still needs `data_version` to tell a commit from
/// noise. Polling one pragma is portable, exact, and bounds the latency by the
/// interval. SQLite: <https://sqlite.org/pragma.html#pragma_data_version>
///
/// Every commit by a connection other than this one counts, including the
/// saves of the coordinator that owns the store (its writer is another
/// connection), as Core Data posts for every write to the store. Receivers
/// tell their own transactions apart by the history token or author.
final class SQLiteChangeWatcher: @unchecked Sendable {
    // @unchecked Sendable: `connection` and `lastVersion` are only touched on `queue`;
    // `timer` is set once in init and DispatchSource is thread-safe.
    private let queue: DispatchQueue
    private let queueKey = DispatchSpecificKey<Void>()
    private let timer: any DispatchSourceTimer
    private var connection: Connection?
    private var lastVersion: Int64

    /// The interval between two checks.
    static let interval = DispatchTimeInterval.milliseconds(10)

    /// Starts watching on `connection` (a connection of its own: a change by
    /// the connection that asks is never reported) and calls `onChange` on a
    /// private queue after each check that saw a commit.
    init(connection: Connection, label: String, onChange: @escaping @Sendable () -> Void) throws {
        self.connection = connection
        lastVersion = try Self.dataVersion(connection)
        queue = DispatchQueue(label: label, qos: .utility)
        queue.setSpecific(key: queueKey, value: ())
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + Self.interval, repeating: Self.interval, leeway: .milliseconds(5))
        timer.setEventHandler { [weak self] in
            guard let self, self.check() else { return }
            onChange()
        }
        timer.activate()
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
            connection = nil
        } else {
            queue.sync { connection = nil }
        }
    }

    deinit {
        timer.cancel()
    }
}
