import DataStackPostgreSQL
import Foundation
import Synchronization
import ObjectGraph

/// A save run on another thread, so that a test can act on the server while it runs.
final class BackgroundSave: @unchecked Sendable {
    // @unchecked Sendable: `error` is written before `done` is signalled and read after it is waited for.
    private var error: (any Error)?
    private let done = DispatchSemaphore(value: 0)
    private let returned = Mutex(false)

    /// Whether the save has returned; `outcome(within:)` then answers at once.
    var hasReturned: Bool { returned.withLock { $0 } }

    init(_ context: ManagedObjectContext) {
        // A thread of its own, not the global queue: on Linux that queue's few threads (one
        // per core) also run Swift Testing's synchronous tests, so two other tests blocking
        // at once kept the save from starting within the tests' deadlines.
        Thread {
            do {
                try context.performAndWait { try context.save() }
            } catch {
                self.error = error
            }
            self.returned.withLock { $0 = true }
            self.done.signal()
        }.start()
    }

    /// The save's error (`.some(nil)` when it succeeded), or nil when it has not returned within `seconds`.
    func outcome(within seconds: Int) -> (any Error)?? {
        done.wait(timeout: .now() + .seconds(seconds)) == .success ? .some(error) : nil
    }
}

extension PostgreSQLConnection {
    /// Waits, up to `seconds`, until another session of this database waits
    /// for a lock (one this session holds, in the tests that call it): the
    /// event that forces an interleaving. PostgreSQL announces no such thing,
    /// so it is asked every 20 ms; false when the deadline passes first.
    func waitUntilAnotherSessionWaitsForALock(within seconds: Int = 10) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let waiting = try execute("""
                SELECT count(*) FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND datname = current_database()
                """).int64(row: 0, column: 0)
            if waiting == 1 { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }
}
