import Foundation
import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite
import DataStackStores

/// A row with the same unique values that another coordinator (or process)
/// saves between a context's uniqueness check and its write transaction is
/// resolved inside that transaction with the context's merge policy, as
/// version conflicts are, instead of failing the save.
@Suite struct UniquenessRaceTests {
    /// A context on its own coordinator of `graph`'s file, whose store tells
    /// `gate` when a save finds the write lock taken.
    private func racingContext(_ graph: GraphStack, _ policy: MergePolicy, gate: WriterGate) throws -> ManagedObjectContext {
        var options = StoreOptions()
        options.busyMode = .callback { tries in gate.saveWaits(tries: tries) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: graph.storeURL, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.mergePolicy = policy
        return context
    }

    /// Saves `context` on another thread while `holder` keeps the write lock;
    /// once the save waits for it (the store's busy handler says so through
    /// `gate`), `meanwhile` runs on `holder` and commits, and only then does
    /// the save try the lock again: the interleaving is forced, not hoped for.
    private func saveWhileAnotherWriterCommits(_ context: ManagedObjectContext, gate: WriterGate, holder: Connection,
                                               meanwhile: String) throws -> (any Error)? {
        try holder.execute("BEGIN IMMEDIATE")
        let outcome = SharedValue<(any Error)?>(nil)
        let finished = Signal()
        Thread.detachNewThread {
            let error = context.saveReturningError()
            outcome.update { $0 = error }
            finished.fire()
        }
        // The save checks uniqueness (finding nothing), then waits at BEGIN IMMEDIATE.
        let waited = gate.waiting.waitBlocking(for: "the save waiting for the write lock")
        try holder.execute(meanwhile + "; COMMIT")
        gate.committed.fire()
        finished.waitBlocking(for: "the save finishing")
        #expect(waited, "the other writer committed while the save waited for the lock")
        return outcome.current
    }

    /// SQL that inserts a listing as another program would: a key from Listing's counter.
    private func insertListing(_ symbol: String, name: String, price: Double) -> String {
        """
        UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_NAME = 'Listing';
        INSERT INTO ZLISTING (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZPRICE)
            SELECT Z_MAX, Z_ENT, 1, '\(symbol)', '\(name)', \(price) FROM Z_PRIMARYKEY WHERE Z_NAME = 'Listing'
        """
    }

    @Test func underObjectTrumpARowSavedMeanwhileTakesTheContextsValues() throws {
        let graph = try GraphStack()
        let gate = WriterGate()
        let context = try racingContext(graph, .mergeByPropertyObjectTrump, gate: gate)
        context.performAndWait {
            let listing = Listing(context: context)
            listing.symbol = "ACME"
            listing.price = 12
        }
        let holder = try RawStore.open(graph.storeURL)
        let error = try saveWhileAnotherWriterCommits(context, gate: gate, holder: holder,
                                                      meanwhile: insertListing("ACME", name: "Other importer", price: 5))
        #expect(error == nil, "\(error.map { "\($0)" } ?? "")")
        // One row: the other writer's, with the context's value over it and its own where the context set none.
        #expect(try RawStore.texts(graph.storeURL, "SELECT ZSYMBOL || ':' || ZNAME || ':' || ZPRICE FROM ZLISTING")
                == ["ACME:Other importer:12.0"])
        try context.performAndWait {
            #expect(!context.hasChanges)
            let saved = try context.fetch(FetchRequest<Listing>())
            #expect(saved.map(\.symbol) == ["ACME"])
            #expect(saved.first?.objectID.isTemporaryID == false)
        }
    }

    @Test func underStoreTrumpTheRowSavedMeanwhileKeepsItsValues() throws {
        let graph = try GraphStack()
        let gate = WriterGate()
        let context = try racingContext(graph, .mergeByPropertyStoreTrump, gate: gate)
        context.performAndWait {
            let listing = Listing(context: context)
            listing.symbol = "ACME"
            listing.name = "Mine"
            listing.price = 12
        }
        let holder = try RawStore.open(graph.storeURL)
        let error = try saveWhileAnotherWriterCommits(context, gate: gate, holder: holder,
                                                      meanwhile: insertListing("ACME", name: "Theirs", price: 5))
        #expect(error == nil, "\(error.map { "\($0)" } ?? "")")
        #expect(try RawStore.texts(graph.storeURL, "SELECT ZSYMBOL || ':' || ZNAME || ':' || ZPRICE FROM ZLISTING")
                == ["ACME:Theirs:5.0"])
    }

    @Test func underTheErrorPolicyTheSaveStillThrowsAndKeepsItsChanges() throws {
        let graph = try GraphStack()
        let gate = WriterGate()
        let context = try racingContext(graph, .error, gate: gate)
        context.performAndWait { Listing(context: context).symbol = "ACME" }
        let holder = try RawStore.open(graph.storeURL)
        let error = try saveWhileAnotherWriterCommits(context, gate: gate, holder: holder,
                                                      meanwhile: insertListing("ACME", name: "Theirs", price: 5))
        guard let conflict = error as? ObjectGraphError, conflict.code == .uniquenessConflict else {
            Issue.record("expected a uniqueness conflict, got \(String(describing: error))")
            return
        }
        #expect(conflict.uniquenessConflicts.first?.entityName == "Listing")
        context.performAndWait { #expect(context.insertedObjects.count == 1) }
    }

    @Test func twoImportersInsertingTheSameNewKeysUnderObjectTrumpNeverFail() throws {
        let graph = try GraphStack()
        let second = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try second.addPersistentStore(type: .sqlite, at: graph.storeURL)
        let symbols = (0..<40).map { "S\($0)" }
        let errors = SharedValue<[String]>([])
        let rounds = SharedValue(0)
        let deadline = Date().addingTimeInterval(2)
        let done = DispatchGroup()
        for (number, coordinator) in [graph.coordinator, second].enumerated() {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var round = 0
                while Date() < deadline {
                    round += 1
                    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
                    context.mergePolicy = .mergeByPropertyObjectTrump
                    context.performAndWait {
                        for symbol in symbols.shuffled().prefix(10) {
                            let listing = Listing(context: context)
                            listing.symbol = symbol
                            listing.price = Double(number * 1000 + round)
                        }
                        do {
                            try context.save()
                        } catch {
                            errors.update { $0.append("importer \(number), round \(round): \(error)") }
                        }
                    }
                    rounds.update { $0 += 1 }
                }
            }
        }
        done.wait()
        #expect(errors.current.isEmpty, "\(errors.current.prefix(3))")
        #expect(rounds.current > 10)
        let stored = try RawStore.texts(graph.storeURL, "SELECT ZSYMBOL FROM ZLISTING ORDER BY ZSYMBOL")
        #expect(stored.count == Set(stored).count, "one row per key")
        #expect(Set(stored).isSubset(of: Set(symbols)))
        #expect(try RawStore.text(graph.storeURL, "PRAGMA integrity_check") == "ok")
    }
}

/// The handshake between a save waiting for the write lock and the test's
/// other writer, through the saving store's busy mode.
private final class WriterGate: Sendable {
    /// The save found the write lock taken.
    let waiting = Signal()
    /// The other writer committed and released the lock.
    let committed = Signal()

    /// The busy callback: says the save waits, and holds it there until the
    /// other writer committed (bounded: the save then fails with a busy
    /// error, which the test reports).
    func saveWaits(tries: Int) -> Bool {
        waiting.fire()
        return committed.waitBlocking(for: "the other writer's commit") && tries < 100
    }
}

/// A value shared with the threads of a test.
private final class SharedValue<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func update(_ body: (inout Value) -> Void) { value.withLock { body(&$0) } }
    var current: Value { value.withLock { $0 } }
}
