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
        let events = ReadSourceEvents(stack)

        // A company the main context shows, and every value it shows after each merge.
        try await save(stack, employees: 1, inserting: true)
        let holder = Holder()
        let first = try await eventually(stack, 1) { main in
            let company = try main.fetch(FetchRequest<ManagedObject>(entityName: "Company")).first
            holder.object = company
            return try company?.value(forKey: "employees") as? Int ?? -1
        }
        #expect(first == 1)
        #expect(mainStore.readsFromReplica == true, "the fetch ran on the standby")
        #expect(stack.readsFromStandby == true)
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
        let fellBack = try #require(events.changes.withLock { $0.first }, "the stack reported the move")
        #expect(!fellBack.readsFromReplica && fellBack.storeIdentifier == mainStore.identifier)
        #expect(fellBack.reason?.contains("had not replayed") == true, "\(fellBack.reason ?? "no reason")")
        #expect(stack.readsFromStandby == false)

        // Replay resumed: reads return to the standby once it has replayed the saves.
        _ = try control.execute("SELECT pg_wal_replay_resume()")
        try await save(stack, employees: 3)
        #expect(try await eventually(stack, 3) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 } == 3)
        let backOnStandby = try await eventually(stack, true) { main in
            _ = try main.count(for: FetchRequest<ManagedObject>(entityName: "Company"))
            return mainStore.readsFromReplica == true
        }
        #expect(backOnStandby, "reads returned to the standby")
        #expect(events.changes.withLock { $0.last }?.readsFromReplica == true, "the stack reported the return")
        #expect(events.changes.withLock { $0.last }?.reason == nil)

        // The standby stopped: reads fall back to the primary, and merges go on.
        control.close()
        try standby.stopKeepingData()
        try await save(stack, employees: 4)
        #expect(try await eventually(stack, 4) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 } == 4)
        #expect(mainStore.readsFromReplica == false)
        let moves = events.changes.withLock { $0 }
        // A standby slow under load may make reads move more often; each move is reported once.
        let sources = moves.map(\.readsFromReplica)
        #expect(sources.first == false && sources.last == false && sources.count >= 3, "\(sources)")
        #expect(zip(sources, sources.dropFirst()).allSatisfy { $0 != $1 }, "no report for reads that stayed: \(sources)")

        let values = shown.withLock { $0 }
        #expect(values == values.sorted(), "a merge never showed older data: \(values)")
        #expect(!values.contains(-1) && values.last == 4, "\(values)")
    }

    @Test("a standby named in StoreOptions serves the main context's reads; stopped, reads fall back to the primary and the stack says why")
    func standbyFromStoreOptions() async throws {
        let primary = try PostgreSQLTestServer.start()
        defer { primary.stop() }
        let standby = try primary.startStandby()
        defer { standby.stop() }
        let url = try primary.makeDatabase()
        let control = try await connectOnceReplayed(standby.url(database: String(url.path.dropFirst())))
        control.close()

        PostgreSQLStore.register()
        var options = StoreOptions.stackDefaults
        options.standbyURL = standby.url(database: String(url.path.dropFirst()))
        options.standbyMaximumLag = .seconds(5)
        let stack = StackManager()
        try await stack.setup(model: StoreTestModel.make(), storeURL: url, storeType: PostgreSQLStore.storeType, options: options)
        let events = ReadSourceEvents(stack)
        try await save(stack, employees: 7, inserting: true)
        let employees = try await stack.mainContext.perform {
            try stack.mainContext.fetch(FetchRequest<ManagedObject>(entityName: "Company")).first?.value(forKey: "employees") as? Int
        }
        #expect(employees == 7, "the standby waited for the save before the read")
        #expect(stack.readsFromStandby == true)

        try standby.stopKeepingData()
        let counted = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(counted == 1, "read on the primary")
        #expect(stack.readsFromStandby == false)
        let moves = events.changes.withLock { $0 }
        #expect(moves.count == 1 && moves.first?.readsFromReplica == false, "\(moves)")
        #expect(moves.first?.reason?.contains("cannot be reached") == true, "\(moves.first?.reason ?? "no reason")")
    }

    @Test("a standby parameter or option that is not valid is refused when the store is added, naming it",
          arguments: [("standby=http%3A%2F%2Freplica", "postgresql://"), ("standby_max_lag_ms=soon", "standby_max_lag_ms"),
                      ("standby_max_lag_ms=-5", "standby_max_lag_ms")])
    func badStandbyParametersAreRefused(_ parameter: String, _ named: String) throws {
        let url = try #require(URL(string: "postgresql://nobody@localhost/none?\(parameter)"))
        let error = #expect(throws: PersistentStoreError.self) {
            _ = try PostgreSQLStore(configuration: StoreConfiguration(model: StoreTestModel.make(), configurationName: nil, url: url,
                                                                      options: StoreOptions()))
        }
        #expect(error?.code == .cannotOpen)
        #expect(String(describing: error).contains(named), "\(String(describing: error))")
    }

    @Test("StoreOptions.standbyURL that is not a postgresql:// URL, or a negative lag, is refused naming it")
    func badStandbyOptionsAreRefused() throws {
        let url = try #require(URL(string: "postgresql://nobody@localhost/none"))
        var options = StoreOptions()
        options.standbyURL = URL(fileURLWithPath: "/tmp/replica")
        var error = #expect(throws: PersistentStoreError.self) {
            _ = try PostgreSQLStore(configuration: StoreConfiguration(model: StoreTestModel.make(), configurationName: nil, url: url, options: options))
        }
        #expect(String(describing: error).contains("not file"), "\(String(describing: error))")
        options.standbyURL = URL(string: "postgresql://nobody@replica/none")
        options.standbyMaximumLag = .milliseconds(-1)
        error = #expect(throws: PersistentStoreError.self) {
            _ = try PostgreSQLStore(configuration: StoreConfiguration(model: StoreTestModel.make(), configurationName: nil, url: url, options: options))
        }
        #expect(String(describing: error).contains("standbyMaximumLag"), "\(String(describing: error))")
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

/// The stack's read-source notifications, in order.
private final class ReadSourceEvents: @unchecked Sendable {
    // @unchecked Sendable: `changes` is a Mutex; `observer` is written once, in init.
    let changes = Mutex<[ReadSourceChange]>([])
    private var observer: (any NSObjectProtocol)?

    init(_ stack: StackManager) {
        observer = NotificationCenter.default.addObserver(forName: StackManager.readSourceDidChangeNotification, object: stack,
                                                          queue: nil) { [weak self] notification in
            guard let change = try? ReadSourceChange(notification) else {
                Issue.record("a readSourceDidChange without its payload")
                return
            }
            self?.changes.withLock { $0.append(change) }
        }
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }
}

/// An object handed between main-queue blocks of one test.
private final class Holder: @unchecked Sendable {
    // @unchecked Sendable: written and read on the main context's queue only.
    var object: ManagedObject?
}
