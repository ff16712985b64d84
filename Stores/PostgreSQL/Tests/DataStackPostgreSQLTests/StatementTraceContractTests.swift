import DataStack
import DataStackPostgreSQL
import Dispatch
import Foundation
import Synchronization
import Testing

/// The public statement trace (`StoreOptions.statementTrace`, `traceStatements(_:)`),
/// run against the SQLite store and the PostgreSQL store alike.
@Suite("Statement trace contract", .serialized)
struct StatementTraceContractTests {
    /// A store of `kind` holding the companies `symbols`, and a coordinator on it.
    private func seeded(_ kind: StoreKind, _ symbols: [String] = ["ACME", "INIT"], options: StoreOptions = StoreOptions())
        throws -> (coordinator: PersistentStoreCoordinator, location: URL, model: ManagedObjectModel) {
        let model = StoreTestModel.make()
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(model, at: location, options: options)
        if !symbols.isEmpty { try insert(symbols, into: coordinator) }
        return (coordinator, location, model)
    }

    private func insert(_ symbols: [String], into coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let entity = try #require(coordinator.managedObjectModel.entitiesByName["Company"])
            for symbol in symbols {
                try ManagedObject(entity: entity, insertInto: context).setValue(symbol, forKey: "symbol")
            }
            try context.save()
        }
    }

    private static func fetchSymbols(_ coordinator: PersistentStoreCoordinator, equalTo symbol: String) throws -> [String] {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == %@", symbol))
            return try context.fetch(request).map { try #require($0.value(forKey: "symbol") as? String) }
        }
    }

    /// Calls the store's own `traceStatements(_:)`: each store type has it.
    private func trace(_ coordinator: PersistentStoreCoordinator, _ observer: (@Sendable (String) -> Void)?) throws {
        let store = try #require(coordinator.persistentStores.first)
        if let sqlite = store as? SQLiteStore {
            sqlite.traceStatements(observer)
        } else {
            try #require(store as? PostgreSQLStore).traceStatements(observer)
        }
    }

    /// Where a store writes a bound value in its SQL.
    private func placeholder(_ kind: StoreKind) -> String { kind == .sqlite ? "?" : "$1" }

    @Test("a fetch reports its SELECT, with its value as a placeholder", arguments: StoreKind.allCases)
    func fetchReportsItsSelect(_ kind: StoreKind) throws {
        let store = try seeded(kind)
        let recorder = StatementRecorder()
        try trace(store.coordinator, recorder.observer)
        defer { try? trace(store.coordinator, nil) }  // a store that is gone already traces nothing
        #expect(try Self.fetchSymbols(store.coordinator, equalTo: "ACME") == ["ACME"])
        let selects = recorder.recorded.filter { $0.hasPrefix("SELECT ") && $0.uppercased().contains("ZCOMPANY") }
        #expect(selects.count == 1, "\(recorder.recorded)")
        let select = try #require(selects.first)
        #expect(select.contains(placeholder(kind)), "the symbol is bound: \(select)")
        #expect(!recorder.recorded.contains { $0.contains("ACME") }, "bound values are never reported")
    }

    @Test("a save reports its INSERT and UPDATE between BEGIN and COMMIT", arguments: StoreKind.allCases)
    func saveReportsItsTransaction(_ kind: StoreKind) throws {
        let store = try seeded(kind, [])
        let recorder = StatementRecorder()
        try trace(store.coordinator, recorder.observer)
        defer { try? trace(store.coordinator, nil) }  // a store that is gone already traces nothing
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: store.coordinator)
        try context.performAndWait {
            let company = ManagedObject(entity: try #require(store.model.entitiesByName["Company"]), insertInto: context)
            try company.setValue("ACME", forKey: "symbol")
            try context.save()
            let inserted = recorder.recorded
            let begin = try #require(inserted.firstIndex { $0.hasPrefix("BEGIN") }, "\(inserted)")
            let insert = try #require(inserted.firstIndex { $0.uppercased().hasPrefix("INSERT INTO ZCOMPANY") }, "\(inserted)")
            let commit = try #require(inserted.lastIndex(of: "COMMIT"), "\(inserted)")
            #expect(begin < insert && insert < commit, "\(inserted)")

            recorder.clear()
            try company.setValue(7, forKey: "employees")
            try context.save()
            let updated = recorder.recorded
            let updateBegin = try #require(updated.firstIndex { $0.hasPrefix("BEGIN") }, "\(updated)")
            let update = try #require(updated.firstIndex { $0.uppercased().hasPrefix("UPDATE ZCOMPANY") }, "\(updated)")
            let updateCommit = try #require(updated.lastIndex(of: "COMMIT"), "\(updated)")
            #expect(updateBegin < update && update < updateCommit, "\(updated)")
            #expect(!updated.contains { $0.contains("ACME") }, "bound values are never reported")
        }
    }

    @Test("nil stops the trace, and a new observer replaces the old one", arguments: StoreKind.allCases)
    func nilStopsAndANewObserverReplaces(_ kind: StoreKind) throws {
        let store = try seeded(kind)
        let first = StatementRecorder()
        let second = StatementRecorder()
        try trace(store.coordinator, first.observer)
        try trace(store.coordinator, second.observer)
        #expect(try Self.fetchSymbols(store.coordinator, equalTo: "INIT") == ["INIT"])
        #expect(first.recorded.isEmpty, "the replaced observer is not called: \(first.recorded)")
        #expect(second.recorded.contains { $0.hasPrefix("SELECT ") }, "\(second.recorded)")

        try trace(store.coordinator, nil)
        second.clear()
        #expect(try Self.fetchSymbols(store.coordinator, equalTo: "ACME") == ["ACME"])
        try insert(["GLBX"], into: store.coordinator)
        #expect(second.recorded.isEmpty, "nothing after traceStatements(nil): \(second.recorded)")
    }

    @Test("StoreOptions.statementTrace reports from the opening on", arguments: StoreKind.allCases)
    func optionGivenAtOpen(_ kind: StoreKind) throws {
        let store = try seeded(kind)
        let recorder = StatementRecorder()
        var options = StoreOptions()
        options.statementTrace = recorder.observer
        let coordinator = try kind.coordinator(store.model, at: store.location, options: options)
        #expect(recorder.recorded.contains { $0.uppercased().contains("Z_METADATA") }, "the opening reads the metadata: \(recorder.recorded)")
        recorder.clear()
        #expect(try Self.fetchSymbols(coordinator, equalTo: "ACME") == ["ACME"])
        #expect(recorder.recorded.contains { $0.hasPrefix("SELECT ") && $0.uppercased().contains("ZCOMPANY") }, "\(recorder.recorded)")
        try insert(["GLBX"], into: coordinator)
        #expect(recorder.recorded.contains { $0.uppercased().hasPrefix("INSERT INTO ZCOMPANY") }, "\(recorder.recorded)")
        try trace(coordinator, nil)
    }

    /// A read held on one pooled reader (inside the observer, on its SELECT)
    /// makes a second read open another session: it reports too, from its
    /// first statement, although it opened after `traceStatements` was called.
    @Test("a reader opened after traceStatements reports its statements")
    func readerOpenedLaterReports() throws {
        var options = StoreOptions()
        options.maximumReaderCount = 4
        let store = try seeded(.postgreSQL, options: options)
        let postgreSQL = try #require(store.coordinator.persistentStores.first as? PostgreSQLStore)
        #expect(try Self.fetchSymbols(store.coordinator, equalTo: "ACME") == ["ACME"], "a reader is open before the trace starts")

        let recorder = StatementRecorder()
        let gate = FirstSelectGate()
        postgreSQL.traceStatements { sql in
            recorder.record(sql)
            if sql.hasPrefix("SELECT ") && sql.uppercased().contains("ZCOMPANY") { gate.selectStarted() }
        }
        defer { postgreSQL.traceStatements(nil) }

        let coordinator = store.coordinator
        let firstRead = ResultBox()
        Thread {
            firstRead.set(Result { try Self.fetchSymbols(coordinator, equalTo: "ACME") })
        }.start()
        #expect(gate.firstStarted.wait(timeout: .now() + 30) == .success, "the first read reached its SELECT")
        let second = Result { try Self.fetchSymbols(coordinator, equalTo: "INIT") }
        gate.release.signal()
        #expect(firstRead.done.wait(timeout: .now() + 30) == .success)
        #expect(try second.get() == ["INIT"])
        #expect(try #require(firstRead.result).get() == ["ACME"])

        let statements = recorder.recorded
        #expect(statements.contains { $0.contains("pg_advisory_lock_shared") }, "the new reader's opening is reported: \(statements)")
        #expect(gate.selectCount == 2, "both reads' SELECTs: \(statements)")
    }
}

/// Holds the first SELECT a trace reports (inside the observer, so its session
/// stays checked out) until `release` is signalled; later ones pass.
private final class FirstSelectGate: Sendable {
    let firstStarted = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    private let count = Atomic<Int>(0)

    var selectCount: Int { count.load(ordering: .relaxed) }

    func selectStarted() {
        guard count.add(1, ordering: .relaxed).newValue == 1 else { return }
        firstStarted.signal()
        // Bounded: a read that never comes must fail the test, not hang it.
        _ = release.wait(timeout: .now() + 30)
    }
}

/// The outcome of a read run on another thread.
private final class ResultBox: Sendable {
    let done = DispatchSemaphore(value: 0)
    private let value = Mutex<Result<[String], any Error>?>(nil)

    var result: Result<[String], any Error>? { value.withLock { $0 } }

    func set(_ result: Result<[String], any Error>) {
        value.withLock { $0 = result }
        done.signal()
    }
}
