import DataStack
import DataStackSync
import Foundation
import Testing

/// Unique keys across replicas, decided in the hub's order alone: the cases
/// the randomized convergence run (`SyncConvergenceTests.uniqueKeyCollisions`)
/// met, each reduced to replicas on one in-memory hub and explicit
/// `syncNow()` calls, so that every test says in which order the hub holds
/// which insert and delete.
@Suite("Sync unique keys")
struct SyncUniqueKeyTests {
    typealias Replica = SyncEngineTests.Replica

    /// An engine of its own on `replica`'s stack that pulls `chunkSize` changes at a time.
    static func engine(_ replica: Replica, hub: any SyncHub, chunkSize: Int) throws -> SyncEngine {
        var options = SyncOptions(hub: hub)
        options.chunkSize = chunkSize
        return try SyncEngine(stack: replica.stack, options: options)
    }

    /// ``converged(_:)`` of `replicas` and of a fresh replica that only pulled
    /// (the hub's state): every replica equals what the log says.
    static func convergedWithTheHub(_ replicas: [Replica], hub: any SyncHub,
                                    sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
        let fresh = try await Replica(hub: hub, unique: true)
        try fresh.engine.syncNow()
        return try converged(replicas + [fresh], sourceLocation: sourceLocation)
    }

    /// The dumps of every replica, each checked equal to the first; returns it.
    static func converged(_ replicas: [Replica], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let dump = try replicas[0].dump()
        for (index, replica) in replicas.enumerated().dropFirst() {
            #expect(try replica.dump() == dump, "replica \(index) differs from replica 0", sourceLocation: sourceLocation)
        }
        return dump
    }

    @Test("an own insert meeting a key that was taken and freed again before it reached the hub keeps its object (the convergence run's divergence)")
    func ownInsertAfterTheKeyWasFreed() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        // On the hub: A's insert of KEY (1), A's delete of it (2).
        try a.insertCompany("from A", symbol: "KEY")
        try a.engine.syncNow()
        try a.save { context in context.delete(try a.object("Company", named: "from A", in: context)) }
        try a.engine.syncNow()
        // B inserted KEY offline: its push makes it 3, after the delete freed the key; its
        // pull then folds 1-3 with its own insert still in its store.
        try b.insertCompany("from B", symbol: "KEY")
        try b.engine.syncNow()
        try a.engine.syncNow()
        let fresh = try await Replica(hub: hub, unique: true)
        try fresh.engine.syncNow()
        let dump = try Self.converged([a, b, fresh])
        #expect(dump.count == 1 && dump.first?.hasPrefix("Company:from B") == true, "\(dump)")
        // B's later edits reach the others: its object is the one everyone has.
        try b.update("Company", named: "from B") { try $0.setValue(Int64(7), forKey: "employees") }
        try b.engine.syncNow()
        try a.engine.syncNow()
        try fresh.engine.syncNow()
        let edited = try Self.converged([a, b, fresh])
        #expect(edited.first?.contains("employees=7") == true, "\(edited)")
    }

    /// Over chunk bytes too (``ChunkWireHub``): the pulls of one fold then name
    /// objects inserted in an earlier pull of it by their numbers (A's update).
    @Test("an own insert merged into a key's holder pulled in an earlier chunk than the own insert's return ends as everywhere",
          arguments: [false, true])
    func twinAcrossChunks(overChunkBytes: Bool) async throws {
        let hub: any SyncHub = overChunkBytes ? ChunkWireHub() : InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("from A", symbol: "KEY")
        try a.save { context in
            for label in ["t1", "t2", "t3"] { try SyncEngineTests.insert("Tag", into: context).setValue(label, forKey: "label") }
        }
        try a.engine.syncNow()
        try a.update("Company", named: "from A") { try $0.setValue(Int64(3), forKey: "employees") }
        try a.engine.syncNow()
        try b.save { context in
            let company = try SyncEngineTests.insert("Company", into: context)
            try company.setValue("from B", forKey: "name")
            try company.setValue("KEY", forKey: "symbol")
            let person = try SyncEngineTests.insert("Person", into: context)
            try person.setValue("Bob", forKey: "name")
            try person.setValue(company, forKey: "employer")
        }
        // Two changes a pull: A's insert comes in the first chunk, B's own back only in the third.
        let chunked = try Self.engine(b, hub: hub, chunkSize: 2)
        try chunked.syncNow()
        try a.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b], hub: hub)
        let companies = dump.filter { $0.hasPrefix("Company:") }
        #expect(companies.count == 1 && companies.first?.contains("staff=[Person:Bob]") == true, "\(dump)")
    }

    @Test("an own insert whose key was taken, freed and taken again by a third replica before it reached the hub merges into the last holder")
    func ownInsertAfterTheKeyWasTakenAgain() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        let c = try await Replica(hub: hub, unique: true)
        try a.insertCompany("from A", symbol: "KEY")
        try a.engine.syncNow()
        try a.save { context in context.delete(try a.object("Company", named: "from A", in: context)) }
        try a.engine.syncNow()
        try c.insertCompany("from C", symbol: "KEY")
        try c.engine.syncNow()
        try b.save { context in
            let company = try SyncEngineTests.insert("Company", into: context)
            try company.setValue("from B", forKey: "name")
            try company.setValue("KEY", forKey: "symbol")
            try company.setValue(Int64(5), forKey: "employees")
        }
        try b.engine.syncNow()
        try a.engine.syncNow()
        try c.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b, c], hub: hub)
        let companies = dump.filter { $0.hasPrefix("Company:") }
        // One company, C's object with B's values merged in (B saved last).
        #expect(companies.count == 1 && companies.first?.contains("employees=5") == true, "\(dump)")
    }

    @Test("a key inserted, deleted and inserted again on one replica before its engine read any of it merges into the key's holder once")
    func ownKeyInsertedTwiceBeforeTheScan() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("from A", symbol: "KEY")
        try a.engine.syncNow()
        try b.insertCompany("from B", symbol: "KEY")
        try b.save { context in context.delete(try b.object("Company", named: "from B", in: context)) }
        try b.insertCompany("again from B", symbol: "KEY")
        try b.engine.syncNow()
        try a.engine.syncNow()
        try b.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b], hub: hub)
        #expect(dump.filter { $0.hasPrefix("Company:") }.count == 1, "\(dump)")
    }

    @Test("an own insert the hub never sends back (a damaged hub) ends the pull, which fails as a concurrent save naming the key, not a hang")
    func awaitedTwinNeverReturns() async throws {
        let shared = InMemorySyncHub()
        let a = try await Replica(hub: shared, unique: true)
        let b = try await Replica(hub: shared, unique: true)
        try a.insertCompany("from A", symbol: "KEY")
        try a.engine.syncNow()
        try b.insertCompany("from B", symbol: "KEY")
        // B's own changes are kept by the hub but never pulled back.
        let blind = try SyncEngine(stack: b.stack, options: SyncOptions(hub: ForgetfulHub(shared, forgetting: b.engine.replica)))
        let started = ContinuousClock.now
        #expect {
            try blind.syncNow()
        } throws: { error in
            guard let error = error as? SyncError else { return false }
            return error.code == .concurrentSave && error.message.contains("symbol")
        }
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(try b.dump().filter { $0.hasPrefix("Company:") } == ["Company:from B employees=0 motto=nil name=from B staff=[] symbol=KEY tags=[]"])
    }

    // MARK: - Keys that meet through an update

    /// The first unique-key conflict `events` reports, nil if none within five seconds.
    static func firstKeyConflict(in events: AsyncStream<SyncEvent>) async -> SyncConflict? {
        await withTaskGroup(of: SyncConflict?.self) { group in
            group.addTask {
                for await event in events { if case .uniqueKeyConflict(let conflict) = event { return conflict } }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test("an update onto a key another insert took first in the hub's order loses that attribute on every replica, reported as a conflict")
    func updateOntoAKeyTakenBefore() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("moving", symbol: "OLD")
        try a.engine.syncNow()
        try b.engine.syncNow()
        // B's insert of NEW reaches the hub first; A, offline, moves its company onto NEW.
        try b.insertCompany("inserted", symbol: "NEW")
        try b.engine.syncNow()
        try a.update("Company", named: "moving") { try $0.setValue("NEW", forKey: "symbol") }
        let aEvents = a.engine.events
        let bEvents = b.engine.events
        try a.engine.syncNow()
        try b.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b], hub: hub)
        #expect(dump.contains { $0.hasPrefix("Company:moving") && $0.contains("symbol=OLD") }, "\(dump)")
        #expect(dump.contains { $0.hasPrefix("Company:inserted") && $0.contains("symbol=NEW") }, "\(dump)")
        for events in [aEvents, bEvents] {
            let conflict = await Self.firstKeyConflict(in: events)
            #expect(conflict?.entity == "Company" && conflict?.property == "symbol", "\(String(describing: conflict))")
            #expect(conflict?.current == .string("OLD") && conflict?.incoming == .string("NEW"), "\(String(describing: conflict))")
        }
        // The status is idle, not an error: nothing waits for a hand to change a key.
        #expect(a.engine.status == .idle && b.engine.status == .idle)
    }

    @Test("an insert of a key another object took by an update earlier in the hub's order merges into it, its people moved along")
    func insertOntoAKeyTakenByAnUpdate() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("moving", symbol: "OLD")
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.update("Company", named: "moving") { try $0.setValue("NEW", forKey: "symbol") }
        try a.engine.syncNow()
        // B, offline, inserts NEW with a person: its insert reaches the hub after A's update.
        try b.save { context in
            let company = try SyncEngineTests.insert("Company", into: context)
            try company.setValue("inserted", forKey: "name")
            try company.setValue("NEW", forKey: "symbol")
            let person = try SyncEngineTests.insert("Person", into: context)
            try person.setValue("Bea", forKey: "name")
            try person.setValue(company, forKey: "employer")
        }
        try b.engine.syncNow()
        try a.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b], hub: hub)
        let companies = dump.filter { $0.hasPrefix("Company:") }
        #expect(companies.count == 1 && companies.first?.contains("symbol=NEW") == true, "\(dump)")
        #expect(companies.first?.contains("staff=[Person:Bea]") == true, "\(dump)")
        #expect(b.engine.status == .idle)
    }

    @Test("a chain of moves, each onto the key the next one freed, pulled in one chunk, is written last move first")
    func chainOfMoves() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        for (name, symbol) in [("x", "K1"), ("y", "K2"), ("z", "K3")] { try a.insertCompany(name, symbol: symbol) }
        try a.engine.syncNow()
        try b.engine.syncNow()
        // On A, one at a time: z K3 → K4, y K2 → K3, x K1 → K2. B pulls the three in one chunk.
        for (name, symbol) in [("z", "K4"), ("y", "K3"), ("x", "K2")] {
            try a.update("Company", named: name) { try $0.setValue(symbol, forKey: "symbol") }
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(b.engine.status == .idle)
        let dump = try Self.converged([a, b])
        for (name, symbol) in [("x", "K2"), ("y", "K3"), ("z", "K4")] {
            #expect(dump.contains { $0.hasPrefix("Company:\(name) ") && $0.contains("symbol=\(symbol)") }, "\(dump)")
        }
    }

    @Test("two updates onto one key: the first in the hub's order keeps it, the second loses it on every replica")
    func twoUpdatesOntoOneKey() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("first", symbol: "ONE")
        try a.insertCompany("second", symbol: "TWO")
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.update("Company", named: "first") { try $0.setValue("SAME", forKey: "symbol") }
        try b.update("Company", named: "second") { try $0.setValue("SAME", forKey: "symbol") }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.engine.syncNow()
        let dump = try await Self.convergedWithTheHub([a, b], hub: hub)
        #expect(dump.contains { $0.hasPrefix("Company:first") && $0.contains("symbol=SAME") }, "\(dump)")
        #expect(dump.contains { $0.hasPrefix("Company:second") && $0.contains("symbol=TWO") }, "\(dump)")
    }
}

/// A hub that keeps every change but never returns one replica's own from a pull.
final class ForgetfulHub: SyncHub, @unchecked Sendable {
    // @unchecked Sendable: both properties are immutable, and InMemorySyncHub is Sendable.
    private let hub: InMemorySyncHub
    private let forgotten: UUID

    init(_ hub: InMemorySyncHub, forgetting replica: UUID) {
        self.hub = hub
        forgotten = replica
    }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration { try hub.register(replica: replica, modelVersion: modelVersion) }
    func push(_ changes: [SyncChange]) throws -> [Int64] { try hub.push(changes) }
    func acknowledge(replica: UUID, through sequence: Int64) throws { try hub.acknowledge(replica: replica, through: sequence) }
    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try hub.pull(after: sequence, limit: limit).filter { $0.change.replica != forgotten }
    }
}
