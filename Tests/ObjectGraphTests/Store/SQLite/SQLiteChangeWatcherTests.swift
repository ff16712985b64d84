import Foundation
@testable import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite

/// ``SQLiteChangeWatcher`` on plain SQLite files: file events wake it, it
/// falls back to polling, and every journal mode and a log that is deleted
/// and made again are seen. (What it costs and how fast it is: the
/// benchmarks' `history` task.)
@Suite struct SQLiteChangeWatcherTests {
    /// Counts the watcher's calls.
    final class Calls: Sendable {
        private let count = Mutex(0)
        func record() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }

        /// Waits up to 10 s for more than `previous` calls.
        func wait(beyond previous: Int) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if value > previous { return true }
                try await Task.sleep(for: .milliseconds(2))
            }
            return value > previous
        }
    }

    /// A connection that keeps (or gives a new file) `journalMode`.
    static func connect(_ url: URL, journalMode: Connection.JournalMode = .wal) throws -> Connection {
        var configuration = Connection.Configuration()
        configuration.journalMode = journalMode
        return try Connection(path: url.path, configuration: configuration)
    }

    static func database(_ url: URL, journalMode: Connection.JournalMode) throws {
        try connect(url, journalMode: journalMode).execute("CREATE TABLE t (x)")
    }

    static func watch(_ url: URL, usesFileEvents: Bool = true, calls: Calls) throws -> SQLiteChangeWatcher {
        try SQLiteChangeWatcher(connection: RawStore.open(url, readOnly: true), storeURL: url, label: "test",
                                usesFileEvents: usesFileEvents) { calls.record() }
    }

    @Test(arguments: [Connection.JournalMode.wal, .delete])
    func aCommitByAnotherConnectionIsSeenAfterAnIdleSpell(journalMode: Connection.JournalMode) async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Watched.sqlite")
        try Self.database(url, journalMode: journalMode)
        let calls = Calls()
        let watcher = try Self.watch(url, calls: calls)
        #expect(watcher.usesFileEvents)
        let writer = try Self.connect(url, journalMode: journalMode)
        for round in 0..<2 {
            // Past the settling time: the watcher is back to its slow check.
            try await Task.sleep(for: .milliseconds(150))
            let before = calls.value
            try writer.execute("INSERT INTO t VALUES (\(round))")
            #expect(try await calls.wait(beyond: before), "round \(round)")
        }
        // Unrelated files in the folder wake it but are not commits.
        let settled = calls.value
        try Data("noise".utf8).write(to: directory.file("other.txt"))
        try await Task.sleep(for: .milliseconds(50))
        #expect(calls.value == settled)
        watcher.stop()
    }

    /// ``StoreFileEvents`` reports writes to the store's three files and to no other.
    @Test func fileEventsNameOnlyTheStoresFiles() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Events.sqlite")
        let calls = Calls()
        let events = try #require(StoreFileEvents(storeURL: url, queue: DispatchQueue(label: "test")) { calls.record() })
        for name in ["other.txt", "Events.sqlite-shm", "Events.sqlite.bak"] {
            try Data("noise".utf8).write(to: directory.file(name))
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.value == 0)
        for suffix in ["", "-wal", "-journal"] {
            let before = calls.value
            try Data("bytes".utf8).write(to: URL(fileURLWithPath: url.path + suffix))
            #expect(try await calls.wait(beyond: before), "\(suffix)")
        }
        events.cancel()
    }

    @Test func withoutFileEventsItPolls() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Polled.sqlite")
        try Self.database(url, journalMode: .wal)
        let calls = Calls()
        let watcher = try Self.watch(url, usesFileEvents: false, calls: calls)
        #expect(!watcher.usesFileEvents)
        try RawStore.execute(url, "INSERT INTO t VALUES (1)")
        #expect(try await calls.wait(beyond: 0))
        watcher.stop()
    }

    /// The last connection closing deletes the `-wal`; the next writer makes it
    /// again, and the folder watch still sees it.
    @Test func aLogDeletedAndMadeAgainIsStillWatched() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Recreated.sqlite")
        try Self.database(url, journalMode: .wal)
        let calls = Calls()
        let watcher = try Self.watch(url, calls: calls)
        for round in 0..<3 {
            let before = calls.value
            try RawStore.execute(url, "INSERT INTO t VALUES (\(round))")   // opens, commits, closes
            #expect(try await calls.wait(beyond: before), "round \(round)")
        }
        watcher.stop()
        let stopped = calls.value
        try RawStore.execute(url, "INSERT INTO t VALUES (99)")
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.value == stopped)
    }
}
