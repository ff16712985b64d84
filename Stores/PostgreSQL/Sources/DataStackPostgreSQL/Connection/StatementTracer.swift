import Synchronization

/// Where sessions report the statements they run: one per connection by
/// default, one shared by all the sessions of a store, so that a single
/// ``PostgreSQLStore/traceStatements(_:)`` reaches every session — those in
/// use on other threads, and those opened later — at once.
///
/// The observer sits behind a lock, but a session checks a flag first: with
/// no observer, reporting costs one relaxed atomic load, no lock and no
/// allocation (the SQL is already a `String` the caller holds).
final class StatementTracer: Sendable {
    /// Whether an observer is set; read before the lock on every statement.
    private let isTracing = Atomic<Bool>(false)
    private let observer: Mutex<(@Sendable (String) -> Void)?>

    init(_ observer: (@Sendable (String) -> Void)? = nil) {
        self.observer = Mutex(observer)
        isTracing.store(observer != nil, ordering: .relaxed)
    }

    /// Replaces the observer; nil stops reporting. Statements that already
    /// took the old observer may still report to it once.
    func set(_ observer: (@Sendable (String) -> Void)?) {
        self.observer.withLock { current in
            current = observer
            isTracing.store(observer != nil, ordering: .releasing)
        }
    }

    /// Reports `sql` to the observer, if any, outside the lock: an observer
    /// may be slow, or trace statements itself, without blocking other sessions.
    @inline(__always)
    func report(_ sql: String) {
        guard isTracing.load(ordering: .relaxed) else { return }
        observer.withLock { $0 }?(sql)
    }
}
