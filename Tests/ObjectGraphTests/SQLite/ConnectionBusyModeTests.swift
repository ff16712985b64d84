@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// The busy mode governs every lock a connection waits for, including the
/// exclusive lock of entering WAL mode, which SQLite takes without its busy
/// handler (several coordinators creating one new store meet it).
@Suite struct ConnectionBusyModeTests {
    /// A rollback-journal database with a table, and a connection writing to it
    /// (holding the reserved lock, as a store being created does) until the
    /// returned connection commits. Entering WAL mode then needs the exclusive
    /// lock while the writer waits to commit, which SQLite refuses at once
    /// rather than ask the busy handler.
    private func writeLockedRollbackDatabase(in directory: TemporaryDirectory) throws -> (path: String, writer: Connection) {
        let path = directory.file("rollback.sqlite").path
        var configuration = Connection.Configuration()
        configuration.journalMode = .delete
        try Connection(path: path, configuration: configuration).execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
        let writer = try Connection(path: path, configuration: configuration)
        try writer.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
        return (path, writer)
    }

    /// Opens `path` in WAL mode on another thread, with `busyMode`.
    private func openInWALMode(_ path: String, busyMode: BusyMode) -> (finished: DispatchSemaphore, result: ResultBox) {
        let result = ResultBox()
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var configuration = Connection.Configuration()
            configuration.busyMode = busyMode
            let start = ContinuousClock.now
            let outcome = Result { () throws -> String in
                let connection = try Connection(path: path, configuration: configuration)
                let mode = try connection.prepare("PRAGMA journal_mode")
                _ = try mode.step()
                return mode.string(at: 0) ?? ""
            }
            result.set(outcome, after: ContinuousClock.now - start)
            finished.signal()
        }
        return (finished, result)
    }

    @Test func enteringWALModeWaitsForAWriterAsTheBusyModeSays() throws {
        let directory = TemporaryDirectory()
        let (path, writer) = try writeLockedRollbackDatabase(in: directory)
        let (finished, result) = openInWALMode(path, busyMode: .timeout(5))
        // Behaviour under test: the writer holds its lock for a while, and the
        // opener must have waited that long (checked below), whenever it started.
        Thread.sleep(forTimeInterval: 0.2)
        try writer.execute("COMMIT")
        finished.wait()
        #expect(try result.outcome?.get() == "wal")
        #expect(result.elapsed >= .milliseconds(150), "it waited for the writer")
    }

    @Test func withImmediateErrorEnteringWALModeFailsAtOnce() throws {
        let directory = TemporaryDirectory()
        let (path, writer) = try writeLockedRollbackDatabase(in: directory)
        let (finished, result) = openInWALMode(path, busyMode: .immediateError)
        finished.wait()
        try writer.execute("COMMIT")
        #expect(throws: SQLiteError.self) { try result.outcome?.get() }
        #expect(result.elapsed < .milliseconds(500))
    }

    /// The outcome of the opening thread.
    private final class ResultBox: Sendable {
        private let state = Mutex<(outcome: Result<String, any Error>?, elapsed: Duration)>((nil, .zero))
        func set(_ outcome: Result<String, any Error>, after elapsed: Duration) { state.withLock { $0 = (outcome, elapsed) } }
        var outcome: Result<String, any Error>? { state.withLock { $0.outcome } }
        var elapsed: Duration { state.withLock { $0.elapsed } }
    }
}
