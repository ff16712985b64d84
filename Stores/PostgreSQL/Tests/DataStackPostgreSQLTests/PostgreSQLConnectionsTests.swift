import DataStackPostgreSQL
import Dispatch
import Foundation
import ObjectGraph
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue #37, item 2: the store's sessions. Reads run on a pool of reader
/// sessions (up to `maximumReaderCount`) and never wait behind a save;
/// connecting gives up after the connect timeout of the options or the URL;
/// keepalives come from the options or the URL; the writer and the readers
/// connect again after an outage, a save during which throws `ioFailure`
/// naming the server; the change listener hands changes over with no lock held.
@Suite("PostgreSQL store connections", .serialized)
struct PostgreSQLConnectionsTests {
    // MARK: - The reader pool

    @Test("a fetch of another context returns while a save of the same coordinator waits inside its transaction")
    func readsDoNotWaitBehindASave() throws {
        let model = StoreTestModel.make()
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let coordinator = try coordinator(model, at: url)
        let saving = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try saving.performAndWait {
            for symbol in ["ACME", "GLBX", "INIT"] { try insertCompany(symbol, model, into: saving) }
            try saving.save()
            try insertCompany("NEW1", model, into: saving)
        }
        // The save's first statement takes Company's key counter; held here, the save waits inside its transaction.
        let blocker = try PostgreSQLConnection(url: url)
        defer { blocker.close() }
        _ = try blocker.execute("BEGIN")
        _ = try blocker.execute("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company' FOR UPDATE")
        let save = BackgroundSave(saving)
        try #require(try blocker.waitUntilAnotherSessionWaitsForALock(), "the save never reached the key counter")

        let reading = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let read = BackgroundFetch(reading) { try symbols(in: reading) }
        let seen = try #require(read.outcome(within: 10), "the fetch waited behind the save (it did not return within 10 s)")
        #expect(try seen.get() == ["ACME", "GLBX", "INIT"], "the last commit, without the save in progress")
        #expect(save.outcome(within: 0) == nil, "the save was still waiting when the fetch returned")

        _ = try blocker.execute("ROLLBACK")
        let outcome = try #require(save.outcome(within: 20), "the save did not finish once released")
        #expect(outcome == nil, "\(String(describing: outcome))")
        // A read after the save returned sees it, although it runs on another session than the save.
        #expect(try reading.performAndWait { try symbols(in: reading) } == ["ACME", "GLBX", "INIT", "NEW1"])
    }

    @Test("readers are opened on demand up to maximumReaderCount; reads beyond it wait for one and then run")
    func readersAreOpenedUpToTheMaximum() throws {
        let model = StoreTestModel.make()
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        var options = StoreOptions()
        options.maximumReaderCount = 2
        let coordinator = try coordinator(model, at: url, options: options)
        let seeding = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try seeding.performAndWait {
            try insertCompany("ACME", model, into: seeding)
            try seeding.save()
        }
        let watcher = try PostgreSQLConnection(url: url)
        defer { watcher.close() }
        /// Sessions on the database other than the watcher's and the blocker's: the store's writer and readers.
        func storeSessions(besides blocker: Int32) throws -> Int64? {
            try watcher.execute("""
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> $1::int
                """, [PostgreSQLValue(Int64(blocker))]).int64(row: 0, column: 0)
        }
        // The writer and the one reader the seeding save's uniqueness check used.
        #expect(try storeSessions(besides: 0) ?? 0 <= 2, "the writer, and a reader for the save's uniqueness check")

        // Four reads at once, each stuck on a table lock the blocker holds: two sessions, two reads waiting for them.
        let blocker = try PostgreSQLConnection(url: url)
        defer { blocker.close() }
        _ = try blocker.execute("BEGIN")
        _ = try blocker.execute("LOCK TABLE ZCOMPANY IN ACCESS EXCLUSIVE MODE")
        let reads = (0..<4).map { _ in
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            return BackgroundFetch(context) { try symbols(in: context) }
        }
        try #require(try blocker.waitUntilSessionsWaitForALock(2), "two reads never waited on the table lock")
        _ = try blocker.execute("COMMIT")
        for read in reads {
            let seen = try #require(read.outcome(within: 20), "a read did not finish once released")
            #expect(try seen.get() == ["ACME"])
        }
        #expect(try storeSessions(besides: blocker.serverProcessID) == 3, "the writer and two readers, kept open")
    }

    // MARK: - Timeouts and keepalives

    @Test("connecting to a server that never answers gives up after the options' connect timeout, or the URL's, naming the server")
    func connectTimeoutFromOptionsAndURL() throws {
        let silent = try SilentTCPServer()
        let url = try #require(URL(string: "postgresql://datastack@127.0.0.1:\(silent.port)/db"))

        var options = StoreOptions()
        options.connectionTimeout = .milliseconds(300)
        var started = ContinuousClock.now
        let error = #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
                .addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        }
        var elapsed = ContinuousClock.now - started
        #expect(error?.code == .cannotOpen)
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(2), "gave up after \(elapsed)")
        let message = String(describing: error)
        #expect(message.contains("127.0.0.1:\(silent.port)") && message.contains("connect timeout"), "\(message)")

        // The URL's connect_timeout (seconds) wins over the options'.
        let withTimeout = try #require(URL(string: "postgresql://datastack@127.0.0.1:\(silent.port)/db?connect_timeout=1"))
        options.connectionTimeout = .seconds(30)
        started = ContinuousClock.now
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: StoreTestModel.make())
                .addPersistentStore(type: PostgreSQLStore.storeType, at: withTimeout, options: options)
        }
        elapsed = ContinuousClock.now - started
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(3), "gave up after \(elapsed)")

        // The connection layer alone: the same deadline.
        started = ContinuousClock.now
        let connectionError = #expect(throws: PostgreSQLError.self) {
            _ = try PostgreSQLConnection(url: url, settings: PostgreSQLConnectionSettings(connectTimeout: .milliseconds(200)))
        }
        #expect(connectionError?.kind == .connectionFailed)
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test("keepalives come from the settings where the URL gives none, and the URL's win")
    func keepAlivesFromSettingsAndURL() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let settings = PostgreSQLConnectionSettings(keepAliveTimeout: .seconds(10))
        let connection = try PostgreSQLConnection(url: url, settings: settings)
        defer { connection.close() }
        #expect(connection.parameters["keepalives"] == "1")
        #expect(connection.parameters["keepalives_idle"] == "5")
        #expect(connection.parameters["keepalives_interval"] == "2")
        #expect(connection.parameters["keepalives_count"] == "2")
        #expect(connection.parameters["tcp_user_timeout"] == "10000")

        var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "keepalives_idle", value: "7")]
        let given = try PostgreSQLConnection(url: try #require(components.url), settings: settings)
        defer { given.close() }
        #expect(given.parameters["keepalives_idle"] == "7", "the URL's")
        #expect(given.parameters["keepalives_interval"] == "2", "the settings', where the URL says nothing")
        #expect(!connection.server.isEmpty && connection.server.contains(".s.PGSQL."), "\(connection.server)")
    }

    // MARK: - Outages

    @Test("a save while the server is stopped throws ioFailure naming the server, and so does a read; both work once it is back")
    func saveDuringAnOutageThenAfterIt() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let model = StoreTestModel.make()
        let coordinator = try coordinator(model, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            try insertCompany("ACME", model, into: context)
            try context.save()
            try insertCompany("NEW1", model, into: context)
        }
        #expect(try reader.performAndWait { try symbols(in: reader) } == ["ACME"])

        try server.stopKeepingData()
        let error = context.performAndWait {
            #expect(throws: PersistentStoreError.self) { try context.save() }
        }
        #expect(error?.code == .ioFailure, "an outage of an open store: \(String(describing: error?.code))")
        let message = String(describing: error)
        #expect(message.contains(server.socketDirectory), "names the server: \(message)")
        #expect(context.performAndWait { context.insertedObjects.count } == 1, "the unsaved insert is still pending")
        let readError = reader.performAndWait { #expect(throws: PersistentStoreError.self) { try symbols(in: reader) } }
        #expect(readError?.code == .ioFailure)

        try server.restart()
        // The reader's session died while idle: the pool drops it and opens another.
        #expect(try reader.performAndWait { try symbols(in: reader) } == ["ACME"], "nothing of the failed save")
        try context.performAndWait { try context.save() }
        #expect(try reader.performAndWait { try symbols(in: reader) } == ["ACME", "NEW1"])
    }

    @Test("a save whose COMMIT loses its answer after the server committed it returns success, not an error")
    func lostCommitAnswerIsResolved() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let model = StoreTestModel.make()
        let coordinator = try coordinator(model, at: url)
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        // The test's own writes never wait for the standby that never comes.
        _ = try admin.execute("SET synchronous_commit = local")
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        let acme = try context.performAndWait {
            try insertCompany("ACME", model, into: context)
            try context.save()
            try insertCompany("NEW1", model, into: context)
            return try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Company")).first)
        }
        // Each save below first meets a version conflict on ACME (another session changed its
        // row), so it rolls back and begins again before its COMMIT: the COMMIT to settle is the
        // second transaction's, not the first's.
        var employees = 0
        func changeACMEOnBothSides() throws {
            employees += 1
            _ = try admin.execute("UPDATE ZCOMPANY SET Z_OPT = Z_OPT + 1, ZNAME = 'elsewhere' WHERE ZSYMBOL = 'ACME'")
            try context.performAndWait { try acme.setValue(employees, forKey: "employees") }
        }
        // A synchronous standby that never comes: COMMIT writes the commit, then waits for it
        // (wait event SyncRep). Ending the session there loses COMMIT's answer after the commit.
        _ = try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        _ = try admin.execute("SELECT pg_reload_conf()")
        defer {
            // Cleanup of a throwaway server: a failure here changes nothing the test checked.
            _ = try? admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            _ = try? admin.execute("SELECT pg_reload_conf()")
        }
        // pg_reload_conf() only signals the server: a session takes the new setting when the
        // signal reaches it, so a save started at once may still commit without waiting. Such a
        // save is no failure of the store; the test saves again until a COMMIT waits.
        try changeACMEOnBothSides()
        var save = BackgroundSave(context)
        var waiting: Int64?
        var committedBeforeTheSettingApplied = 0
        let deadline = ContinuousClock.now + .seconds(15)
        while waiting == nil, ContinuousClock.now < deadline {
            _ = try admin.execute("SELECT pg_stat_clear_snapshot()")
            let sessions = try admin.execute("SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND datname = current_database()")
            waiting = sessions.rowCount > 0 ? try sessions.int64(row: 0, column: 0) : nil
            if waiting == nil, save.hasReturned {
                #expect(try #require(save.outcome(within: 0)) == nil, "a save before the setting applied succeeds")
                committedBeforeTheSettingApplied += 1
                try context.performAndWait { try insertCompany("NEW\(committedBeforeTheSettingApplied + 1)", model, into: context) }
                try changeACMEOnBothSides()
                save = BackgroundSave(context)
            } else if waiting == nil {
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        let pid = try #require(waiting, "the save's COMMIT never waited for the synchronous standby")
        _ = try admin.execute("SELECT pg_terminate_backend($1::int)", [PostgreSQLValue(pid)])
        let outcome = try #require(save.outcome(within: 20), "the save did not return")
        #expect(outcome == nil, "committed, so the save succeeded: \(String(describing: outcome))")
        _ = try admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
        _ = try admin.execute("SELECT pg_reload_conf()")
        let saved = committedBeforeTheSettingApplied + 1
        #expect(try admin.execute("SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL LIKE 'NEW%'").int64(row: 0, column: 0) == Int64(saved))
        #expect(context.performAndWait { !context.hasChanges }, "the context knows its save went through")
        let stored = try admin.execute("SELECT ZEMPLOYEES, ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'ACME'")
        #expect(try stored.int64(row: 0, column: 0) == Int64(employees) && stored.string(row: 0, column: 1) == "elsewhere",
                "the retried save merged its change with the other session's")
    }

    @Test("a save whose session is lost while the server still runs its COMMIT throws, the server ends that COMMIT, and nothing of it is kept")
    func lostCommitStillInProgressIsEnded() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        let before = Self.socketDescriptors(connectedTo: server.socketDirectory)
        let model = StoreTestModel.make()
        let trace = StatementRecorder()
        var options = StoreOptions()
        options.statementTrace = trace.observer
        let coordinator = try coordinator(model, at: url, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            try insertCompany("ACME", model, into: context)
            try context.save()
            try insertCompany("NEW1", model, into: context)
        }
        // The store's sessions: its writer, and a reader if it opened one. Only sockets to this
        // test's own server: tests running beside this one hold sockets of their own.
        let storeSockets = Self.socketDescriptors(connectedTo: server.socketDirectory).subtracting(before)
        try #require(!storeSockets.isEmpty, "the store opened no session")

        // A deferred constraint trigger runs at COMMIT, before the commit is written: holding the
        // advisory lock it takes keeps the save's COMMIT running on the server, in progress.
        _ = try admin.execute("""
            CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$
            """)
        _ = try admin.execute("""
            CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON ZCOMPANY DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION hold_commit()
            """)
        _ = try admin.execute("SELECT pg_advisory_lock(4242)")
        let save = BackgroundSave(context)
        try #require(try admin.waitUntilAnotherSessionWaitsForALock(), "the save's COMMIT never waited for the lock")
        // The client loses its sessions (a link dying on its side); the server goes on waiting.
        for socket in storeSockets { shutdown(socket, Int32(SHUT_RDWR)) }

        let outcome = try #require(save.outcome(within: 30), "the save did not return")
        let error = try #require(outcome as? PersistentStoreError, "the save threw \(String(describing: outcome))")
        #expect(error.code == .ioFailure, "\(error)")
        #expect(error.message.contains("did not commit"), "the server was asked, and ended it: \(error.message)")
        #expect(trace.recorded.contains { $0.contains("pg_terminate_backend") }, "found in progress, the COMMIT's session was ended")
        _ = try admin.execute("SELECT pg_advisory_unlock(4242)")
        #expect(try admin.execute("SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL = 'NEW1'").int64(row: 0, column: 0) == 0)
        #expect(context.performAndWait { context.insertedObjects.count } == 1, "the insert is still pending")
        try context.performAndWait { try context.save() }
        #expect(try admin.execute("SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL = 'NEW1'").int64(row: 0, column: 0) == 1)
    }

    /// The process's open Unix sockets whose peer is a socket in `directory` (the
    /// descriptors from /proc/self/fd, each peer from `getpeername`), to tell which
    /// ones a store opened to a server no other test uses.
    private static func socketDescriptors(connectedTo directory: String) -> Set<Int32> {
        let folder = "/proc/self/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return Set(entries.compactMap { entry -> Int32? in
            guard let descriptor = Int32(entry),
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(entry)"),
                  target.hasPrefix("socket:"),
                  let peer = peerPath(of: descriptor),
                  peer.hasPrefix(directory + "/") else { return nil }
            return descriptor
        })
    }

    /// The path of the Unix socket `descriptor` is connected to, or nil for any other socket.
    private static func peerPath(of descriptor: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        return withUnsafeBytes(of: address.sun_path) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    // MARK: - The change listener

    @Test("the change listener calls onChange with no lock held: onChange may stop the listener")
    func onChangeMayStopTheListener() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let coordinator = try coordinator(StoreTestModel.make(), at: url)
        let store = try #require(coordinator.persistentStores.first as? PostgreSQLStore)
        let called = DispatchSemaphore(value: 0)
        let calls = Mutex(0)
        try store.startObservingRemoteChanges { _ in
            calls.withLock { $0 += 1 }
            // Stopping from inside onChange: with onChange called under the listener's lock, this waited forever.
            store.stopObservingRemoteChanges()
            called.signal()
        }
        let sender = try PostgreSQLConnection(url: url)
        defer { sender.close() }
        try sender.notify("datastack_history", payload: "\(store.identifier):1")
        #expect(called.wait(timeout: .now() + 10) == .success, "onChange did not return")
        // Stopped: a later notification is not reported. A fresh listener on the same channel proves it was delivered.
        let proof = try PostgreSQLConnection(url: url)
        defer { proof.close() }
        try proof.listen("datastack_history")
        try sender.notify("datastack_history", payload: "\(store.identifier):2")
        #expect(try proof.notifications(waitingUpTo: .seconds(5)).map(\.payload) == ["\(store.identifier):2"])
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("ping answers on a live session, and throws connectionLost once the server is gone")
    func pingTellsALiveSessionFromALostOne() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let connection = try PostgreSQLConnection(url: try server.makeDatabase())
        try connection.ping(timeout: .seconds(5))
        #expect(connection.isAlive)
        try server.kill()
        let error = #expect(throws: PostgreSQLError.self) { try connection.ping(timeout: .seconds(5)) }
        #expect(error?.kind == .connectionLost)
        #expect(!connection.isAlive)
    }

    // MARK: - Helpers

    private func coordinator(_ model: ManagedObjectModel, at url: URL, options: StoreOptions = StoreOptions()) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        return coordinator
    }

    private func insertCompany(_ symbol: String, _ model: ManagedObjectModel, into context: ManagedObjectContext) throws {
        let company = ManagedObject(entity: try #require(model.entitiesByName["Company"]), insertInto: context)
        try company.setValue(symbol, forKey: "symbol")
    }
}

/// Every company's symbol in `context`, sorted (call on its queue).
private func symbols(in context: ManagedObjectContext) throws -> [String] {
    let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
    return try context.fetch(request).map { try $0.value(forKey: "symbol") as? String ?? "" }
}

/// A fetch run on another thread, so that a test can hold a lock while it runs.
final class BackgroundFetch<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` is written before `done` is signalled and read after it is waited for.
    private var result: Result<Value, any Error>?
    private let done = DispatchSemaphore(value: 0)

    init(_ context: ManagedObjectContext, _ body: @escaping @Sendable () throws -> Value) {
        // A thread of its own: Dispatch's global queue adds threads for blocked work only after a while.
        Thread {
            self.result = Result { try context.performAndWait { try body() } }
            self.done.signal()
        }.start()
    }

    /// The result, or nil when the fetch has not returned within `seconds`.
    func outcome(within seconds: Int) -> Result<Value, any Error>? {
        done.wait(timeout: .now() + .seconds(seconds)) == .success ? result : nil
    }
}

/// A TCP port on 127.0.0.1 that completes the handshake (the kernel does)
/// and never answers: a server that hangs, for connect timeouts.
final class SilentTCPServer {
    let port: UInt16
    private let socketDescriptor: Int32

    init() throws {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw PostgreSQLTestServerError(description: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw PostgreSQLTestServerError(description: "bind/listen on 127.0.0.1 failed: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        socketDescriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit {
        close(socketDescriptor)
    }
}

extension PostgreSQLConnection {
    /// Waits, up to `seconds`, until `count` other sessions of this database
    /// (or more) wait for a lock; false when the deadline passes first.
    /// Inside a transaction too: the statistics snapshot is cleared before each look.
    func waitUntilSessionsWaitForALock(_ count: Int64, within seconds: Int = 10) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            // pg_stat_activity is read once per transaction unless told to look again.
            _ = try execute("SELECT pg_stat_clear_snapshot()")
            let waiting = try execute("""
                SELECT count(*) FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND datname = current_database()
                """).int64(row: 0, column: 0)
            if let waiting, waiting >= count { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }
}
