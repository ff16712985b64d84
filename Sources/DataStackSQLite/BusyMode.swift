import Foundation

/// How a write waits for a lock that another connection holds (GRDB:
/// `Configuration.busyMode`; SQLite: the busy handler).
///
/// Two coordinators on one file — the stack's writer and main coordinators,
/// or two processes — take turns at SQLite's single write lock. A save that
/// finds the lock taken waits as its store's busy mode says, then fails with a
/// busy error (``PersistentStoreError/Code/busy``) that the caller can retry.
///
/// ```swift
/// var options = StoreOptions()
/// options.busyMode = .timeout(2)           // wait up to 2 s for the other writer
/// options.busyMode = .immediateError       // fail at once; the caller decides
/// options.busyMode = .callback { tries in  // wait 10 ms at a time, 5 times
///     usleep(10_000)
///     return tries < 5
/// }
/// ```
///
/// The waiting happens inside SQLite, on the thread of the write: on the main
/// queue for a main-queue context's save. The store adds no waiting of its own,
/// so a main-queue save blocks the main queue for at most what this mode
/// allows; give a main-queue store a short timeout (or `.immediateError`) if
/// other writers hold the lock for long.
///
/// The default is ``default``, a 5 second timeout.
///
/// Related SQLite documentation: <https://sqlite.org/c3ref/busy_handler.html>,
/// <https://sqlite.org/c3ref/busy_timeout.html>
public enum BusyMode: Sendable {
    /// Fail at once with a busy error when another connection holds the lock.
    case immediateError

    /// Wait up to this many seconds for the lock (SQLite's busy timeout), then
    /// fail with a busy error. Zero, a negative value or NaN fails at once.
    case timeout(TimeInterval)

    /// Ask the closure each time the lock is found taken, with the number of
    /// times it was asked before for this statement (0 the first time): `true`
    /// tries again at once, `false` fails with a busy error. SQLite does not
    /// wait between tries, so the closure does (it runs on the writing thread).
    /// It must not use the database.
    case callback(@Sendable (_ numberOfTries: Int) -> Bool)

    /// Waits up to 5 seconds: long enough for another coordinator's save of a
    /// large import chunk, short enough that a stuck lock surfaces as an error.
    public static let `default` = BusyMode.timeout(5)

    /// Waits before another try of a statement that failed with `SQLITE_BUSY`
    /// without SQLite asking its busy handler — switching into WAL mode takes
    /// an exclusive lock that SQLite never waits for — as this mode would have
    /// waited, and says whether to try again.
    ///
    /// - Parameters:
    ///   - tries: how many times the statement was tried again already.
    ///   - waited: how long the statement has been waiting so far.
    func waitsAgain(afterTries tries: Int, waited: Duration) -> Bool {
        switch self {
        case .immediateError:
            return false
        case .timeout(let seconds):
            // SQLite's own busy handler's pauses, in milliseconds.
            let pauses = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100]
            let pause = Duration.milliseconds(pauses[min(tries, pauses.count - 1)])
            guard waited + pause <= .milliseconds(Self.milliseconds(seconds)) else { return false }
            Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) * 1e-18 + Double(pause.components.seconds))
            return true
        case .callback(let body):
            return body(tries)
        }
    }

    /// `seconds` as whole milliseconds for `sqlite3_busy_timeout`, clamped to
    /// `0...Int32.max`; NaN and negative values give 0.
    static func milliseconds(_ seconds: TimeInterval) -> Int32 {
        let milliseconds = (seconds * 1000).rounded(.down)
        guard milliseconds > 0 else { return 0 }   // also NaN
        return milliseconds >= Double(Int32.max) ? Int32.max : Int32(milliseconds)
    }
}

// MARK: - CustomStringConvertible

extension BusyMode: CustomStringConvertible {
    public var description: String {
        switch self {
        case .immediateError: "immediate error"
        case .timeout(let seconds): "timeout of \(seconds) s"
        case .callback: "busy callback"
        }
    }
}
