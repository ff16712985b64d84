@_spi(DataStackInternal) import DataStackSQLite
import Foundation
@testable import ObjectGraph
import Synchronization
import Testing
@testable import DataStackStores

/// The SQLite store reads on a pool of connections: reads of several threads
/// run at the same time, never wait for a save, wait for a connection only at
/// the pool's maximum, and fail with a store error once the store is removed.
///
/// Waits are bounded (5 s) only to turn a deadlock into a failure; no test
/// asserts how long anything takes.
@Suite struct ReaderPoolTests {
    /// How long a bounded wait waits before the test calls it a deadlock.
    private static let deadlock = DispatchTimeInterval.seconds(5)

    /// A store with two companies, opened with at most `maximumReaderCount` readers.
    private struct Fixture {
        let stack: TestStack
        let coordinator: PersistentStoreCoordinator
        let store: SQLiteStore

        init(maximumReaderCount: Int = StoreOptions().maximumReaderCount) throws {
            stack = try TestStack()
            try stack.seedCompanies(["A", "B"])
            var options = StoreOptions()
            options.maximumReaderCount = maximumReaderCount
            coordinator = try stack.secondCoordinator(options: options)
            store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        }

        /// The companies' symbols, read on a pooled connection.
        func symbols() throws -> [String] { try Self.symbols(store) }

        static func symbols(_ store: SQLiteStore) throws -> [String] {
            try store.read { connection in
                let statement = try connection.prepare("SELECT ZSYMBOL FROM ZCOMPANY ORDER BY ZSYMBOL")
                var symbols: [String] = []
                while try statement.step() { symbols.append(statement.string(at: 0) ?? "NULL") }
                return symbols
            }
        }
    }

    /// Runs `body` on a thread of its own (not the cooperative pool, which blocked
    /// tests could exhaust); the semaphore is signalled when it returns.
    private static func onThread(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            done.signal()
        }.start()
        return done
    }

    /// Holds a read on its own thread until released: `inside` is signalled
    /// once the read holds its connection.
    private final class HeldRead: Sendable {
        /// What the read's thread reports.
        private final class Outcome: Sendable {
            let result = Mutex<Result<[String], any Error>?>(nil)
            let wasReleased = Mutex(false)
        }

        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        private let outcome = Outcome()
        let done: DispatchSemaphore

        init(_ fixture: Fixture) {
            let inside = inside, release = release, outcome = outcome
            let store = fixture.store
            done = ReaderPoolTests.onThread {
                let read = Result {
                    try store.read { connection in
                        let statement = try connection.prepare("SELECT ZSYMBOL FROM ZCOMPANY ORDER BY ZSYMBOL")
                        var symbols: [String] = []
                        while try statement.step() { symbols.append(statement.string(at: 0) ?? "NULL") }
                        inside.signal()
                        let released = release.wait(timeout: .now() + ReaderPoolTests.deadlock) == .success
                        outcome.wasReleased.withLock { $0 = released }
                        return symbols
                    }
                }
                outcome.result.withLock { $0 = read }
            }
        }

        /// Releases the read and waits for it to return; its symbols.
        func finish() throws -> [String] {
            release.signal()
            #expect(done.wait(timeout: .now() + ReaderPoolTests.deadlock) == .success, "the held read returns")
            #expect(outcome.wasReleased.withLock { $0 }, "the read was released, not timed out")
            return try #require(outcome.result.withLock { $0 }).get()
        }
    }

    @Test func twoReadsRunAtTheSameTimeOnTwoConnections() throws {
        let fixture = try Fixture()
        let first = HeldRead(fixture)
        #expect(first.inside.wait(timeout: .now() + Self.deadlock) == .success)
        // With one connection this read would wait for the first, which waits for it.
        let store = fixture.store
        let second = Self.onThread { _ = try? Fixture.symbols(store) }
        #expect(second.wait(timeout: .now() + Self.deadlock) == .success, "the second read finished while the first held its connection")
        #expect(fixture.store.readers.connectionCount == 2)
        #expect(try first.finish() == ["A", "B"])
        #expect(try fixture.symbols() == ["A", "B"])
        #expect(fixture.store.readers.connectionCount == 2, "an idle connection is used again")
    }

    @Test func readsDuringALongWriteSeeTheLastCommitAndDoNotWaitForIt() throws {
        let fixture = try Fixture()
        let store = fixture.store
        let written = DispatchSemaphore(value: 0)
        let readsDone = DispatchSemaphore(value: 0)
        let writerSawReads = Mutex<Result<Bool, any Error>?>(nil)
        let writing = Self.onThread {
            let outcome = Result {
                try store.write { connection in
                    try connection.execute("UPDATE ZCOMPANY SET ZSYMBOL = 'CHANGED' || ZSYMBOL")
                    written.signal()
                    // The transaction stays open until the reads are done.
                    return readsDone.wait(timeout: .now() + Self.deadlock) == .success
                }
            }
            writerSawReads.withLock { $0 = outcome }
        }
        #expect(written.wait(timeout: .now() + Self.deadlock) == .success)
        #expect(try fixture.symbols() == ["A", "B"], "the last commit, not the write in progress")
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: fixture.coordinator)
        let fetched = try context.performAndWait {
            try context.fetch(FetchRequest<Company>(entityName: "Company")).map(\.symbol).sorted()
        }
        #expect(fetched == ["A", "B"])
        readsDone.signal()
        #expect(writing.wait(timeout: .now() + Self.deadlock) == .success)
        #expect(try #require(writerSawReads.withLock { $0 }).get(), "the reads finished while the write transaction was open")
        #expect(try fixture.symbols() == ["CHANGEDA", "CHANGEDB"], "a read after the commit sees it")
    }

    @Test func removingTheStoreClosesItsReadersAndLaterReadsThrow() throws {
        let fixture = try Fixture()
        let held = HeldRead(fixture)
        #expect(held.inside.wait(timeout: .now() + Self.deadlock) == .success)
        #expect(try fixture.symbols() == ["A", "B"])
        #expect(fixture.store.readers.connectionCount == 2)

        // Removing waits for the read in progress to return its connection.
        let coordinator = fixture.coordinator, store = fixture.store
        let closing = Signal()
        store.readers.observe { if $0 == .closing { closing.fire() } }
        let removal = Mutex<Result<Void, any Error>?>(nil)
        let removed = Self.onThread { removal.withLock { $0 = Result { try coordinator.remove(store) } } }
        try #require(closing.waitBlocking(for: "the removal closing the readers"))
        let refused = #expect(throws: PersistentStoreError.self, "a read once the removal started") { try fixture.symbols() }
        #expect(refused?.code == .ioFailure)
        #expect(refused?.message.contains("removed") == true)
        #expect(removed.wait(timeout: .now()) == .timedOut, "the removal waits for the read that holds a connection")
        #expect(try held.finish() == ["A", "B"], "the read in progress finishes")
        #expect(removed.wait(timeout: .now() + Self.deadlock) == .success)
        try #require(removal.withLock { $0 }).get()
        #expect(store.readers.connectionCount == 0)

        // Later reads throw; they never return no rows.
        #expect(throws: PersistentStoreError.self) { try fixture.symbols() }
        let stray = Result { try store.read { _ in 1 } }
        #expect((try? stray.get()) == nil)
    }

    @Test func atTheMaximumAnExtraReadWaitsThenProceeds() throws {
        let fixture = try Fixture(maximumReaderCount: 2)
        let held = [HeldRead(fixture), HeldRead(fixture)]
        for read in held { #expect(read.inside.wait(timeout: .now() + Self.deadlock) == .success) }
        #expect(fixture.store.readers.connectionCount == 2)

        let released = Mutex(false)
        let ranAfterRelease = Mutex<Result<Bool, any Error>?>(nil)
        let store = fixture.store
        let waiting = Signal()
        store.readers.observe { if $0 == .readWaiting { waiting.fire() } }
        let extra = Self.onThread {
            let outcome = Result { try store.read { _ in released.withLock { $0 } } }
            ranAfterRelease.withLock { $0 = outcome }
        }
        try #require(waiting.waitBlocking(for: "the extra read waiting for a connection"))
        #expect(store.readers.waitingReadCount == 1, "the extra read waits at the maximum")
        released.withLock { $0 = true }
        #expect(try held[0].finish() == ["A", "B"])
        #expect(extra.wait(timeout: .now() + Self.deadlock) == .success, "the extra read proceeds once a connection is returned")
        #expect(try #require(ranAfterRelease.withLock { $0 }).get(), "the extra read ran only after a read returned its connection")
        #expect(fixture.store.readers.connectionCount == 2, "no third connection was opened")
        #expect(try held[1].finish() == ["A", "B"])
    }

    @Test func aReadThatStopsSteppingEarlyDoesNotKeepItsSnapshotForTheNextRead() throws {
        let fixture = try Fixture(maximumReaderCount: 1)
        // A cached statement stepped once and left so: its read transaction stays open.
        let first = try fixture.store.read { connection in
            let statement = try connection.cachedStatement("SELECT ZSYMBOL FROM ZCOMPANY ORDER BY ZSYMBOL")
            return try statement.step() ? statement.string(at: 0) : nil
        }
        #expect(first == "A")
        try fixture.store.write { try $0.execute("UPDATE ZCOMPANY SET ZSYMBOL = 'CHANGED' || ZSYMBOL") }
        #expect(try fixture.symbols() == ["CHANGEDA", "CHANGEDB"], "the same connection reads the commit made since")
    }

    @Test func aTraceReachesConnectionsOpenedLater() throws {
        let fixture = try Fixture()
        let statements = Mutex<[String]>([])
        fixture.store.traceStatements { sql in statements.withLock { $0.append(sql) } }
        defer { fixture.store.traceStatements(nil) }
        let held = HeldRead(fixture)   // the connection opened with the store
        #expect(held.inside.wait(timeout: .now() + Self.deadlock) == .success)
        _ = try fixture.symbols()      // a second connection, opened now
        #expect(try held.finish() == ["A", "B"])
        #expect(fixture.store.readers.connectionCount == 2)
        #expect(statements.withLock { $0 }.filter { $0.contains("FROM ZCOMPANY") }.count == 2)
    }

    @Test func aMaximumBelowOneCountsAsOne() {
        #expect(ReaderPool(maximumCount: 0, url: nil).maximumCount == 1)
        #expect(StoreOptions().maximumReaderCount == 5)
    }
}
