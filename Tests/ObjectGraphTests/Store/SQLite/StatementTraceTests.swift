import Foundation
import ObjectGraph
import Synchronization
import Testing
import DataStackStores

/// The SQL a SQLite store reports through its public trace: `StoreOptions.statementTrace`
/// and `SQLiteStore.traceStatements(_:)`, on the writer and every reader.
@Suite struct StatementTraceTests {
    /// Statements as they were reported, from any thread.
    private final class Recorder: Sendable {
        private let statements = Mutex<[String]>([])
        var observer: @Sendable (String) -> Void { { sql in self.statements.withLock { $0.append(sql) } } }
        var recorded: [String] { statements.withLock { $0 } }
        func clear() { statements.withLock { $0 = [] } }
    }

    private func store(of stack: TestStack) throws -> SQLiteStore {
        try #require(stack.coordinator.persistentStores.first as? SQLiteStore)
    }

    @Test func aFetchReportsOneSelectWithItsValuesLeftAsPlaceholders() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["ACME", "Initech"])
        let recorder = Recorder()
        try store(of: stack).traceStatements(recorder.observer)
        let context = stack.newContext()
        let symbols = try context.performAndWait {
            try context.fetch(FetchRequest<Company>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == %@", "ACME")))
                .map(\.symbol)
        }
        #expect(symbols == ["ACME"])
        let statements = recorder.recorded
        #expect(statements.count == 1, "\(statements)")
        let select = try #require(statements.first)
        #expect(select.hasPrefix("SELECT "))
        #expect(select.contains("FROM ZCOMPANY"))
        #expect(select.contains("?"), "the symbol is bound")
        #expect(!select.contains("ACME"), "bound values are never reported")
    }

    @Test func aSaveReportsItsTransactionFromBeginToCommit() throws {
        let stack = try TestStack(type: .sqlite)
        let recorder = Recorder()
        try store(of: stack).traceStatements(recorder.observer)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            try context.save()
        }
        let statements = recorder.recorded
        #expect(statements.first == "BEGIN IMMEDIATE", "\(statements)")
        #expect(statements.last == "COMMIT", "\(statements)")
        #expect(statements.contains { $0.hasPrefix("INSERT INTO ZCOMPANY") }, "\(statements)")
        #expect(statements.contains { $0.contains("Z_PRIMARYKEY") }, "the key allocation: \(statements)")
        #expect(!statements.contains { $0.contains("ACME") }, "bound values are never reported")
    }

    @Test func nilStopsTheTrace() throws {
        let stack = try TestStack(type: .sqlite)
        let store = try store(of: stack)
        let recorder = Recorder()
        store.traceStatements(recorder.observer)
        store.traceStatements(nil)
        try stack.seedCompanies(["ACME"])
        let context = stack.newContext()
        _ = try context.performAndWait { try context.count(for: FetchRequest<Company>(entityName: "Company")) }
        #expect(recorder.recorded.isEmpty)
    }

    @Test func theOptionReportsFromTheStoresOpeningOnAndOnEveryReader() throws {
        let directory = TemporaryDirectory()
        let recorder = Recorder()
        // Holds the first read that arrives once armed, so that a second read
        // must open a connection of its own.
        let holdsNextRead = Mutex(false)
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        var options = StoreOptions()
        options.pragmas = [.cacheSize(kibibytes: 4000)]
        options.statementTrace = { sql in
            recorder.observer(sql)
            guard sql.contains("FROM ZCOMPANY"), holdsNextRead.withLock({ hold in defer { hold = false }; return hold }) else { return }
            inside.signal()
            _ = release.wait(timeout: .now() + .seconds(5))
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: directory.file("Traced.sqlite"), options: options)
        let opening = recorder.recorded
        #expect(opening.contains { $0.hasPrefix("CREATE TABLE ZCOMPANY") }, "\(opening)")
        #expect(opening.filter { $0 == "PRAGMA cache_size = -4000" }.count == 2, "the writer's and the first reader's settings: \(opening)")
        #expect(opening.contains("PRAGMA journal_mode = wal"), "\(opening)")

        recorder.clear()
        holdsNextRead.withLock { $0 = true }
        @Sendable func fetch() throws -> Int {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            return try context.performAndWait { try context.fetch(FetchRequest<Company>(entityName: "Company")).count }
        }
        let held = Mutex<Result<Int, any Error>?>(nil)
        let heldDone = DispatchSemaphore(value: 0)
        Thread {
            held.withLock { $0 = Result { try fetch() } }
            heldDone.signal()
        }.start()
        #expect(inside.wait(timeout: .now() + .seconds(5)) == .success)
        let second = try fetch()   // the first reader is held: this one opens another
        release.signal()
        #expect(heldDone.wait(timeout: .now() + .seconds(5)) == .success)
        #expect(second == 0)
        #expect(try held.withLock { try $0?.get() } == 0)

        let reads = recorder.recorded
        #expect(reads.filter { $0.contains("FROM ZCOMPANY") }.count == 2, "\(reads)")
        #expect(reads.filter { $0 == "PRAGMA cache_size = -4000" }.count == 1, "the second reader's settings: \(reads)")
    }
}
