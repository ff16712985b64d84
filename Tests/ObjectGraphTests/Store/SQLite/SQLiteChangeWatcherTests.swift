import Foundation
@testable import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite
@testable import DataStackStores

/// ``SQLiteChangeWatcher`` on plain SQLite files: file events wake it, it
/// falls back to polling, and every journal mode and a log that is deleted
/// and made again are seen. (What it costs and how fast it is: the
/// benchmarks' `history` task.)
@Suite struct SQLiteChangeWatcherTests {
    /// Counts the watcher's calls.
    final class Calls: Sendable {
        private let calls = Recording<Void>()
        func record() { calls.append(()) }
        var value: Int { calls.elements.count }

        /// Waits for more than `previous` calls, woken by each call.
        func wait(beyond previous: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
            await calls.wait(for: "call \(previous + 1) of the watcher", sourceLocation: sourceLocation) { $0.count > previous }
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
            // (Behaviour under test: the idle spell is the condition, so time passes.)
            try await Task.sleep(for: .milliseconds(150))
            let before = calls.value
            try writer.execute("INSERT INTO t VALUES (\(round))")
            #expect(await calls.wait(beyond: before), "round \(round)")
        }
        // Unrelated files in the folder wake it but are not commits.
        let settled = calls.value
        try Data("noise".utf8).write(to: directory.file("other.txt"))
        // A commit afterwards is seen after the noise was: one call means the noise made none.
        try writer.execute("INSERT INTO t VALUES (99)")
        #expect(await calls.wait(beyond: settled))
        #expect(calls.value == settled + 1, "only the commit was a call")
        watcher.stop()
    }

    /// Every store of the process shares one inotify instance: more stores
    /// than the kernel's default of 128 instances per user each get a watch,
    /// each hears its own files only, and a cancelled one hears nothing more.
    @Test func moreStoresThanInotifyInstancesEachHearTheirOwnFiles() async throws {
        let count = 200
        let directories = (0..<count).map { _ in TemporaryDirectory() }
        let calls = (0..<count).map { _ in Calls() }
        let queue = DispatchQueue(label: "test")
        let events = try (0..<count).map { index in
            try #require(StoreFileEvents(storeURL: directories[index].file("S.sqlite"), queue: queue) { calls[index].record() },
                         "store \(index) got no watch")
        }
        try Data("x".utf8).write(to: directories[150].file("S.sqlite-wal"))
        #expect(await calls[150].wait(beyond: 0))
        // Calls come on one serial queue in the kernel's order: once the last store's is seen, a
        // call misrouted from the first write would have been seen too.
        try Data("x".utf8).write(to: directories[count - 1].file("S.sqlite"))
        #expect(await calls[count - 1].wait(beyond: 0))
        let others = (0..<(count - 1)).filter { $0 != 150 && calls[$0].value != 0 }
        #expect(others.isEmpty, "stores called for another's files: \(others)")

        events[150].cancel()
        let before = calls[150].value
        let lastBefore = calls[count - 1].value
        try Data("y".utf8).write(to: directories[150].file("S.sqlite-wal"))
        try Data("y".utf8).write(to: directories[count - 1].file("S.sqlite"))
        #expect(await calls[count - 1].wait(beyond: lastBefore))
        #expect(calls[150].value == before, "a cancelled watch is not called")
        withExtendedLifetime(events) {}
    }

    /// ``StoreFileEvents`` reports writes to the store's three files and to no other.
    @Test func fileEventsNameOnlyTheStoresFiles() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Events.sqlite")
        let calls = Calls()
        let queue = DispatchQueue(label: "test")
        let events = try #require(StoreFileEvents(storeURL: url, queue: queue) { calls.record() })
        // A second watch of the same folder, for whom the last noise is its
        // store: when it is called, the kernel has handed the noise to both,
        // and both handlers run on the one serial queue.
        let noiseSeen = Calls()
        let control = try #require(StoreFileEvents(storeURL: directory.file("other.txt"), queue: queue) { noiseSeen.record() })
        for name in ["Events.sqlite-shm", "Events.sqlite.bak", "other.txt"] {
            try Data("noise".utf8).write(to: directory.file(name))
        }
        #expect(await noiseSeen.wait(beyond: 0))
        queue.sync {}
        control.cancel()
        #expect(calls.value == 0)
        for suffix in ["", "-wal", "-journal"] {
            let before = calls.value
            try Data("bytes".utf8).write(to: URL(fileURLWithPath: url.path + suffix))
            #expect(await calls.wait(beyond: before), "\(suffix)")
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
        #expect(await calls.wait(beyond: 0))
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
            #expect(await calls.wait(beyond: before), "round \(round)")
        }
        watcher.stop()
        let stopped = calls.value
        // A watcher still running sees the next commit; by then the stopped one would have.
        let controlCalls = Calls()
        let control = try Self.watch(url, calls: controlCalls)
        try RawStore.execute(url, "INSERT INTO t VALUES (99)")
        #expect(await controlCalls.wait(beyond: 0))
        control.stop()
        #expect(calls.value == stopped)
    }
}
