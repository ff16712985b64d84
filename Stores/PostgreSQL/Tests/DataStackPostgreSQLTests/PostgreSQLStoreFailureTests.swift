import DataStackPostgreSQL
import Dispatch
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// What the PostgreSQL store does with bad input and failures: a server that
/// is not there, a database that is not a store, a model that does not match,
/// predicates PostgreSQL can't express, a server killed mid-save, a save that
/// fails inside its transaction, and two coordinators creating one store.
/// Each test checks the error's type and what its message says, then the
/// database afterwards.
@Suite("PostgreSQL store failures", .serialized)
struct PostgreSQLStoreFailureTests {
    // MARK: - Opening

    @Test("a URL whose server is not there throws cannotOpen naming PostgreSQL and the socket")
    func serverNotThere() throws {
        let url = try #require(URL(string: "postgresql://datastack@/nodb?host=/tmp/no-such-socket-dir"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        }
        #expect(error?.code == .cannotOpen)
        let message = String(describing: error)
        #expect(message.contains("PostgreSQL"), "\(message)")
        #expect(message.contains("/tmp/no-such-socket-dir"), "says where: \(message)")
        #expect(coordinator.persistentStores.isEmpty)
    }

    @Test("a password in the URL is in no error message")
    func passwordIsNotReported() throws {
        let url = try #require(URL(string: "postgresql://datastack:s3cret@/nodb?host=/tmp/no-such-socket-dir"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        }
        let message = String(describing: error)
        #expect(message.contains("/tmp/no-such-socket-dir"), "still says where: \(message)")
        #expect(!message.contains("s3cret"), "\(message)")
    }

    @Test("destroying a store drops its tables and nothing else of the database; a second destroy finds nothing to drop")
    func destroyDropsOnlyTheStore() throws {
        let model = StoreTestModel.make()
        let url = try server().makeDatabase()
        try seed(model, at: url)
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        try connection.executeScript("CREATE TABLE inventory (id BIGINT PRIMARY KEY); INSERT INTO inventory VALUES (7);")
        #expect(try tableCount(connection) ?? 0 > 5)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.destroyPersistentStore(at: url, type: PostgreSQLStore.storeType)
        let left = try connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        #expect(left.rowCount == 1)
        #expect(left.string(row: 0, column: 0) == "inventory")
        #expect(try connection.execute("SELECT id FROM inventory").string(row: 0, column: 0) == "7")
        try coordinator.destroyPersistentStore(at: url, type: PostgreSQLStore.storeType)
        #expect(try tableCount(connection) == 1)
        try connection.executeScript("DROP TABLE inventory")
        #expect(try companySymbols(model, at: url) == [], "a store added there afterwards starts empty")
    }

    @Test("a store whose history holds transactions, opened without tracking, refuses saves and says why")
    func untrackedHistoryRefusesSaves() throws {
        let model = StoreTestModel.make()
        let url = try server().makeDatabase()
        let first = try context(model, at: url, tracksHistory: true)
        try first.performAndWait {
            try insertCompany("ACME", model, into: first)
            try first.save()
        }
        let untracked = try context(model, at: url)
        let error = untracked.performAndWait {
            #expect(throws: PersistentStoreError.self) {
                try insertCompany("GLBX", model, into: untracked)
                try untracked.save()
            }
        }
        #expect(error?.code == .readOnly)
        #expect(String(describing: error).contains("persistentHistoryTracking"), "\(String(describing: error))")
        #expect(try companySymbols(model, at: url) == ["ACME"])
    }

    @Test("a URL that is not postgresql:// throws cannotOpen saying the scheme")
    func wrongScheme() throws {
        let url = URL(fileURLWithPath: "/tmp/x")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        }
        #expect(error?.code == .cannotOpen)
        let message = String(describing: error)
        #expect(message.contains("postgresql://"), "\(message)")
        #expect(message.contains("not file"), "names the scheme it got: \(message)")
    }

    @Test("a database with a table of its own and no Z_METADATA is notAStore, and is left as it was")
    func foreignDatabaseIsNotAStore() throws {
        let url = try server().makeDatabase()
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        try connection.executeScript("""
            CREATE TABLE inventory (id BIGINT PRIMARY KEY, label TEXT);
            INSERT INTO inventory VALUES (1, 'bolt'), (2, 'nut');
            """)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        }
        #expect(error?.code == .notAStore)
        let message = String(describing: error)
        #expect(message.contains("Z_METADATA") && message.contains("not a DataStack store"), "\(message)")
        #expect(message.contains(url.path), "says which database: \(message)")
        let labels = try connection.execute("SELECT label FROM inventory ORDER BY id")
        #expect(labels.rowCount == 2)
        #expect(labels.string(row: 0, column: 0) == "bolt")
        #expect(labels.string(row: 1, column: 0) == "nut")
        #expect(try tableCount(connection) == 1, "no store table was created beside it")
    }

    @Test("a model with one more attribute is incompatibleModel naming it; the store still reads with its own model")
    func incompatibleModel() throws {
        let url = try server().makeDatabase()
        let model = StoreTestModel.make()
        try seed(model, at: url)

        let changed = StoreTestModel.make()
        let company = try #require(changed.entitiesByName["Company"])
        company.properties.append(AttributeDescription(name: "ticker", type: .string))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: changed)
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        }
        #expect(error?.code == .incompatibleModel)
        #expect(error?.isModelMismatch == true)
        let message = String(describing: error)
        #expect(message.contains("entity Company") && message.contains("ticker"), "names the entity and attribute: \(message)")

        #expect(try companySymbols(model, at: url) == ["ACME", "GLBX", "INIT"], "the refused open changed nothing")
    }

    @Test("a new database added read-only throws and creates no table")
    func readOnlyOnEmptyDatabaseCreatesNothing() throws {
        let url = try server().makeDatabase()
        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        }
        #expect(error?.code == .cannotOpen)
        let message = String(describing: error)
        #expect(message.contains("read-only") && message.contains("no store yet"), "\(message)")
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        #expect(try tableCount(connection) == 0)
    }

    // MARK: - Fetching

    @Test("predicates and sorts PostgreSQL can't express throw FetchPredicateError, and the store still fetches")
    func inexpressiblePredicatesThrow() throws {
        let url = try server().makeDatabase()
        let model = StoreTestModel.make()
        try seed(model, at: url)
        let context = try context(model, at: url)
        let cases: [(format: String, says: String)] = [
            ("name CONTAINS[d] 'e'", "[d]"),
            ("employees == 'ten'", "a number beside text"),
            ("name MATCHES[search] 'x'", "search"),
        ]
        try context.performAndWait {
            for (format, says) in cases {
                // Parsing succeeds: the error must come from compiling for PostgreSQL.
                let predicate = try FetchPredicate(format: format)
                let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: predicate)
                let error = #expect(throws: FetchPredicateError.self, "\(format)") { try context.fetch(request) }
                let message = String(describing: error)
                #expect(message.contains(says), "\(format) → \(message)")
                #expect(message.contains(format), "names the predicate: \(message)")
                #expect(throws: FetchPredicateError.self, "count of \(format)") { try context.count(for: request) }
            }
            let query = try SearchQuery("x")
            let relevance = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil,
                                                        sortDescriptors: [FetchSort(key: "name", relevanceTo: query)])
            let error = #expect(throws: FetchPredicateError.self) { try context.fetch(relevance) }
            let message = String(describing: error)
            #expect(message.contains("relevance") && message.contains("name"), "\(message)")

            let all = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
            #expect(try context.fetch(all).map { try $0.value(forKey: "symbol") as? String } == ["ACME", "GLBX", "INIT"],
                    "the refused fetches left the connection usable")
        }
    }

    // MARK: - Saving

    @Test("a save while the server is down throws promptly; after a restart the same context saves, and nothing was half-written")
    func serverKilledMidSave() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let model = StoreTestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for symbol in ["ACME", "GLBX", "INIT"] { try insertCompany(symbol, model, into: context) }
            try context.save()
            for symbol in ["NEW1", "NEW2"] { try insertCompany(symbol, model, into: context) }
        }

        try server.kill()
        let started = ContinuousClock.now
        let save = BackgroundSave(context)
        guard let outcome = save.outcome(within: 20) else {
            Issue.record("the save did not return within 20 s of the server's death")
            return
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(5), "the save took \(elapsed)")
        let error = try #require(outcome, "the save claimed to succeed with the server down")
        let storeError = try #require(error as? PersistentStoreError, "not a PersistentStoreError: \(type(of: error)) \(error)")
        #expect(storeError.code == .ioFailure || storeError.code == .cannotOpen, "\(storeError.code)")
        let message = String(describing: storeError)
        #expect(message.contains("PostgreSQL") && message.contains(url.path), "says what and where: \(message)")
        #expect(context.performAndWait { context.insertedObjects.count } == 2, "the unsaved inserts are still pending")

        try server.restart()
        try context.performAndWait { try context.save() }
        #expect(try companySymbols(model, at: url) == ["ACME", "GLBX", "INIT", "NEW1", "NEW2"])
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        #expect(try connection.execute("SELECT count(*) FROM ZCOMPANY").int64(row: 0, column: 0) == 5, "no partial rows")
    }

    @Test("a server killed while a save's transaction has written its rows: the save throws, and after a restart none of them is there")
    func serverKilledInsideTheTransaction() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let model = StoreTestModel.make()
        let context = try context(model, at: url, tracksHistory: true)
        try context.performAndWait {
            try insertCompany("ACME", model, into: context)
            try context.save()
            for number in 0..<500 { try insertCompany("NEW\(number)", model, into: context) }
            let acme = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Company")).first)
            try acme.setValue("renamed", forKey: "name")
        }

        // The save takes the history counter's row last: held elsewhere, the save waits there with every row written.
        let blocker = try PostgreSQLConnection(url: url)
        _ = try blocker.execute("BEGIN")
        _ = try blocker.execute("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = 16002 FOR UPDATE")
        let save = BackgroundSave(context)
        // Only row 16002 is held, and the save takes it after its inserts and update: they are written, uncommitted.
        try #require(try blocker.waitUntilAnotherSessionWaitsForALock(), "the save never reached the history counter")
        try server.kill()
        blocker.close()
        guard let outcome = save.outcome(within: 20) else {
            Issue.record("the save did not return within 20 s of the server's death")
            return
        }
        let error = try #require(outcome, "the save claimed to succeed with the server killed inside it")
        #expect((error as? PersistentStoreError)?.code == .ioFailure, "\(error)")

        try server.restart()
        let check = try PostgreSQLConnection(url: url)
        defer { check.close() }
        #expect(try check.execute("SELECT count(*) FROM ZCOMPANY").int64(row: 0, column: 0) == 1, "no row of the killed save")
        #expect(try check.execute("SELECT ZNAME FROM ZCOMPANY").string(row: 0, column: 0) == "ACME Inc.", "its update rolled back")
        #expect(try check.execute("SELECT count(*) FROM ATRANSACTION").int64(row: 0, column: 0) == 1, "no history of it")
        // The context still holds the save: it goes through once the server is back.
        try context.performAndWait { try context.save() }
        #expect(try check.execute("SELECT count(*) FROM ZCOMPANY").int64(row: 0, column: 0) == 501)
    }

    @Test("a uniqueness violation inside the save's transaction rolls back its update, its other insert and Z_MAX")
    func failedSaveRollsBackEverything() throws {
        let url = try server().makeDatabase()
        let model = StoreTestModel.make()
        try seed(model, at: url)
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        func companyMax() throws -> Int64? {
            try connection.execute("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'").int64(row: 0, column: 0)
        }
        let maxBefore = try #require(try companyMax())
        #expect(maxBefore == 3)

        let context = try context(model, at: url)
        context.mergePolicy = .error
        let error = context.performAndWait {
            #expect(throws: ObjectGraphError.self) {
                // The update is written before any insert (deletes, updates, then inserts), so
                // it is certainly in the transaction when the refused insert aborts it; the
                // order of the two inserts is the store's.
                let globex = try #require(try context.fetch(FetchRequest<ManagedObject>(
                    entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'GLBX'"))).first)
                try globex.setValue("Changed", forKey: "name")
                try insertCompany("NEW", model, into: context)
                try insertCompany("ACME", model, into: context)   // the seed's symbol: refused by the unique index
                try context.save()
            }
        }
        let message = String(describing: error)
        #expect(message.contains("Company") && message.contains("symbol"), "names the entity and constraint: \(message)")

        #expect(try connection.execute("SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL = 'NEW'").int64(row: 0, column: 0) == 0,
                "the first insert was rolled back")
        #expect(try connection.execute("SELECT count(*) FROM ZCOMPANY").int64(row: 0, column: 0) == 3)
        #expect(try connection.execute("SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'GLBX'").string(row: 0, column: 0) == "GLBX Inc.",
                "the update written before the refused insert was rolled back")
        #expect(try companyMax() == maxBefore, "Z_MAX rolled back with the transaction")
    }

    // MARK: - Creating

    @Test("two coordinators opening one new database at once both succeed and see one store")
    func concurrentCreation() throws {
        let url = try server().makeDatabase()
        let model = StoreTestModel.make()
        let results = Mutex<[Result<String, any Error>]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            let result = Result<String, any Error> {
                let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
                return try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url).identifier
            }
            results.withLock { $0.append(result) }
        }
        let identifiers = try results.withLock { try $0.map { try $0.get() } }
        #expect(identifiers.count == 2)
        #expect(Set(identifiers).count == 1, "one store: \(identifiers)")
        #expect(identifiers.first?.isEmpty == false)
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        #expect(try connection.execute("SELECT count(*) FROM Z_METADATA").int64(row: 0, column: 0) == 1)
        #expect(try connection.execute("SELECT Z_UUID FROM Z_METADATA").string(row: 0, column: 0) == identifiers.first)
    }

    // MARK: - Helpers

    private func server() throws -> PostgreSQLTestServer {
        try PostgreSQLTestServer.shared.get()
    }

    /// A private-queue context on a new coordinator with the store at `url`.
    private func context(_ model: ManagedObjectModel, at url: URL, tracksHistory: Bool = false) throws -> ManagedObjectContext {
        var options = StoreOptions()
        options.persistentHistoryTracking = tracksHistory
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        return ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    private func insertCompany(_ symbol: String, _ model: ManagedObjectModel, into context: ManagedObjectContext) throws {
        let company = ManagedObject(entity: try #require(model.entitiesByName["Company"]), insertInto: context)
        try company.setValue(symbol, forKey: "symbol")
        try company.setValue("\(symbol) Inc.", forKey: "name")
    }

    /// Saves ACME, GLBX and INIT through a coordinator of their own.
    private func seed(_ model: ManagedObjectModel, at url: URL) throws {
        let context = try context(model, at: url)
        try context.performAndWait {
            for symbol in ["ACME", "GLBX", "INIT"] { try insertCompany(symbol, model, into: context) }
            try context.save()
        }
    }

    /// Every company's symbol, sorted, read through a fresh coordinator.
    private func companySymbols(_ model: ManagedObjectModel, at url: URL) throws -> [String?] {
        let context = try context(model, at: url)
        return try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
            return try context.fetch(request).map { try $0.value(forKey: "symbol") as? String }
        }
    }

    private func tableCount(_ connection: PostgreSQLConnection) throws -> Int64? {
        try connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").int64(row: 0, column: 0)
    }
}

