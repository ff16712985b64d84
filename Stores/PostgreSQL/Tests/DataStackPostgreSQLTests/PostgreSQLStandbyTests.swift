import DataStack
import DataStackPostgreSQL
import Foundation
import Synchronization
import Testing

/// Issue #37, item 3: reads from a streaming standby. A stack whose URL names
/// a standby reads from it, writes to the primary, and its main context never
/// refreshes to data older than the save it merges: a read waits until the
/// standby has replayed what it must see, and goes to the primary (saying so)
/// when the standby lags past its bound or is down.
@Suite("PostgreSQL standby reads", .serialized)
struct PostgreSQLStandbyTests {
    @Test("the main context reads from the standby; with replay paused or the standby stopped, merges read the primary and never show older data")
    func readsFromTheStandbyNeverOlderThanTheMergedSave() async throws {
        let primary = try PostgreSQLTestServer.start()
        defer { primary.stop() }
        let standby = try primary.startStandby()
        defer { standby.stop() }
        let local = try primary.makeDatabase()
        let name = String(local.path.dropFirst())
        let standbyURL = standby.url(database: name)
        let encoded = try #require(standbyURL.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let url = try #require(URL(string: local.absoluteString + "&standby=\(encoded)&standby_max_lag_ms=300"))
        // The standby has the new database once it replayed its creation.
        let control = try await connectOnceReplayed(standbyURL)
        defer { control.close() }

        PostgreSQLStore.register()
        let stack = StackManager()
        try await stack.setup(model: StoreTestModel.make(), storeURL: url)
        let mainStore = try #require(stack.mainCoordinator.persistentStores.first as? PostgreSQLStore)
        let events = StoreEvents(mainStore)

        // A company the main context shows, and every value it shows after each merge.
        try await save(stack, employees: 1, inserting: true)
        let holder = Holder()
        let first = try await eventually(stack, 1) { main in
            let company = try main.fetch(FetchRequest<ManagedObject>(entityName: "Company")).first
            holder.object = company
            return try company?.value(forKey: "employees") as? Int ?? -1
        }
        #expect(first == 1)
        #expect(mainStore.readsFromStandby == true, "the fetch ran on the standby")
        let shown = Mutex<[Int]>([])
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { _ in
            // Posted on the main queue, after the merge refreshed the object.
            let value = (try? holder.object?.value(forKey: "employees") as? Int) ?? nil
            shown.withLock { $0.append(value ?? -1) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        // Reads go to the standby: a row written outside DataStack (no history, no
        // notification) while its replay is paused is not seen there; the primary has it.
        let writer = try PostgreSQLConnection(url: local)
        defer { writer.close() }
        try await waitUntilReplayed(control, writer)
        _ = try control.execute("SELECT pg_wal_replay_pause()")
        _ = try writer.execute("INSERT INTO ZCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZEMPLOYEES, ZACTIVE) VALUES (999, 1, 1, 'RAW', 0, 1)")
        let counted = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(counted == 1, "read on the paused standby: the raw row is not there yet")
        #expect(try writer.execute("SELECT count(*) FROM ZCOMPANY").int64(row: 0, column: 0) == 2)

        // Replay paused: a save's merge cannot wait for the standby, reads the primary, and says so.
        try await save(stack, employees: 2)
        #expect(try await eventually(stack, 2) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 } == 2)
        #expect(events.fellBack.withLock { $0 } >= 1, "readsDidFallBack was posted")
        #expect(mainStore.readsFromStandby == false)

        // Replay resumed: reads return to the standby once it has replayed the saves.
        _ = try control.execute("SELECT pg_wal_replay_resume()")
        try await save(stack, employees: 3)
        #expect(try await eventually(stack, 3) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 } == 3)
        let backOnStandby = try await eventually(stack, true) { main in
            _ = try main.count(for: FetchRequest<ManagedObject>(entityName: "Company"))
            return mainStore.readsFromStandby == true
        }
        #expect(backOnStandby, "reads returned to the standby")
        #expect(events.returned.withLock { $0 } >= 1, "readsDidReturnToStandby was posted")

        // The standby stopped: reads fall back to the primary, and merges go on.
        control.close()
        try standby.stopKeepingData()
        try await save(stack, employees: 4)
        #expect(try await eventually(stack, 4) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 } == 4)
        #expect(mainStore.readsFromStandby == false)

        let values = shown.withLock { $0 }
        #expect(values == values.sorted(), "a merge never showed older data: \(values)")
        #expect(!values.contains(-1) && values.last == 4, "\(values)")
    }

    // MARK: - Helpers

    /// Saves the one company with `employees` through the stack's importer (inserting it the first time).
    private func save(_ stack: StackManager, employees: Int, inserting: Bool = false) async throws {
        let importer = stack.importerContext()
        try await importer.perform {
            let company: ManagedObject
            if inserting {
                company = ManagedObject(entity: try #require(importer.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"]),
                                        insertInto: importer)
                try company.setValue("ACME", forKey: "symbol")
            } else {
                company = try #require(try importer.fetch(FetchRequest<ManagedObject>(entityName: "Company",
                                                                                      predicate: try FetchPredicate(format: "symbol == 'ACME'"))).first)
            }
            try company.setValue(employees, forKey: "employees")
            try importer.save()
        }
    }

    /// A connection to the standby's copy of a database, once it has one.
    private func connectOnceReplayed(_ url: URL) async throws -> PostgreSQLConnection {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                return try PostgreSQLConnection(url: url)
            } catch let error as PostgreSQLError where error.kind == .connectionFailed && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Waits until the standby has replayed everything the primary has written.
    private func waitUntilReplayed(_ standby: PostgreSQLConnection, _ primary: PostgreSQLConnection) async throws {
        let target = try #require(primary.execute("SELECT pg_current_wal_lsn()").string(row: 0, column: 0))
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try standby.execute("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", [.text(target)]).string(row: 0, column: 0) == "t" { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the standby did not replay \(target) within 10 s")
    }
}

/// The store's read-source notifications, counted.
private final class StoreEvents: @unchecked Sendable {
    // @unchecked Sendable: the counters are Mutexes; `observers` is written once, in init.
    let fellBack = Mutex(0)
    let returned = Mutex(0)
    private var observers: [any NSObjectProtocol] = []

    init(_ store: PostgreSQLStore) {
        observers = [
            NotificationCenter.default.addObserver(forName: PostgreSQLStore.readsDidFallBackNotification, object: store, queue: nil) { [weak self] _ in
                self?.fellBack.withLock { $0 += 1 }
            },
            NotificationCenter.default.addObserver(forName: PostgreSQLStore.readsDidReturnToStandbyNotification, object: store, queue: nil) { [weak self] _ in
                self?.returned.withLock { $0 += 1 }
            },
        ]
    }

    deinit {
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
    }
}

/// An object handed between main-queue blocks of one test.
private final class Holder: @unchecked Sendable {
    // @unchecked Sendable: written and read on the main context's queue only.
    var object: ManagedObject?
}
