import Synchronization

/// Statements as a trace reported them, from any thread.
final class StatementRecorder: Sendable {
    private let statements = Mutex<[String]>([])

    var observer: @Sendable (String) -> Void { { sql in self.record(sql) } }
    var recorded: [String] { statements.withLock { $0 } }

    func record(_ sql: String) { statements.withLock { $0.append(sql) } }
    func clear() { statements.withLock { $0 = [] } }
}
