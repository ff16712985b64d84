import DataStack
import DataStackSync
import Foundation
import Synchronization
import Testing

/// Snapshots and re-seeding: a replica that needs changes the hub purged —
/// a new one, or one whose registration was removed — starts again from the
/// snapshot another replica published, and converges with the others.
@Suite("Sync snapshots and re-seeding")
struct SyncSnapshotTests {
    typealias Replica = SyncEngineTests.Replica

    /// Companies, a tag on two of them, a person employed by one, an update
    /// from the second replica and a delete: what a snapshot must carry.
    static func populate(_ a: Replica, _ b: Replica) throws {
        for name in ["Acme", "Globex", "Initech"] { try a.insertCompany(name) }
        try a.save { context in
            let tag = try SyncEngineTests.insert("Tag", into: context)
            try tag.setValue("red", forKey: "label")
            try tag.setValue(Set([try a.object("Company", named: "Acme", in: context),
                                  try a.object("Company", named: "Globex", in: context)]), forKey: "companies")
            let person = try SyncEngineTests.insert("Person", into: context)
            try person.setValue("Ann", forKey: "name")
            try person.setValue(try a.object("Company", named: "Acme", in: context), forKey: "employer")
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try b.update("Company", named: "Globex") { try $0.setValue(Int64(7), forKey: "employees") }
        try a.save { context in context.delete(try a.object("Company", named: "Initech", in: context)) }
        try b.engine.syncNow()
        try a.engine.syncNow()
        try b.engine.syncNow()
    }

    /// The events `events` has buffered until one matches, or five seconds passed.
    static func events(_ events: AsyncStream<SyncEvent>, until match: @escaping @Sendable (SyncEvent) -> Bool) async -> [SyncEvent] {
        await withTaskGroup(of: [SyncEvent]?.self) { group in
            group.addTask {
                var seen: [SyncEvent] = []
                for await event in events {
                    seen.append(event)
                    if match(event) { return seen }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? []
        }
    }

    @Test("a new replica joins a hub purged past a published snapshot: it re-seeds, equals the others, and its edits reach them")
    func newReplicaJoinsAfterPurge() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try Self.populate(a, b)
        let published = try a.engine.publishSnapshot()
        #expect(published.isKept && published.objects >= 5, "\(published)")
        #expect(hub.purge() > 0)
        #expect(throws: SyncError.self) { try hub.pull(after: 0, limit: 10) }

        // Pages of two objects: references to objects of later pages must still be set.
        let c = try await Replica(hub: hub, chunkSize: 2)
        let events = c.engine.events
        try c.engine.syncNow()
        let seen = await Self.events(events) { if case .reseeded = $0 { return true } else { return false } }
        #expect(seen.contains(.statusChanged(.reseeding)), "\(seen)")
        #expect(seen.contains(.reseeded(through: published.through, objects: published.objects)), "\(seen)")
        #expect(c.engine.status == .idle)
        let dump = try a.dump()
        #expect(try c.dump() == dump)
        #expect(try b.dump() == dump)
        #expect(dump.contains { $0.hasPrefix("Company:Globex employees=7") }, "\(dump)")
        #expect(dump.contains { $0.hasPrefix("Person:Ann employer=Company:Acme") }, "\(dump)")
        #expect(!dump.contains { $0.hasPrefix("Company:Initech") }, "\(dump)")

        // The new replica's edits reach the others, and theirs reach it.
        try c.update("Company", named: "Acme") { try $0.setValue(Int64(42), forKey: "employees") }
        try c.insertCompany("Hooli")
        try c.engine.syncNow()
        try a.update("Company", named: "Globex") { try $0.setValue("global", forKey: "motto") }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try c.engine.syncNow()
        let after = try a.dump()
        #expect(try b.dump() == after)
        #expect(try c.dump() == after)
        #expect(after.contains { $0.hasPrefix("Company:Acme employees=42") }, "\(after)")
        #expect(after.contains { $0.hasPrefix("Company:Hooli") }, "\(after)")
        #expect(after.contains { $0.contains("motto=global") }, "\(after)")
    }

    @Test("a replica whose registration was removed comes back with unpushed edits: it re-seeds, keeps and pushes them, and converges")
    func removedReplicaKeepsItsEdits() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.insertCompany("Acme")
        try a.insertCompany("Gone")
        try a.engine.syncNow()
        try b.engine.syncNow()
        // B edits offline; meanwhile it is taken for gone: its registration is removed.
        try b.update("Company", named: "Acme") { try $0.setValue(Int64(5), forKey: "employees") }
        try b.insertCompany("Bravo")
        hub.removeReplica(b.engine.replica)
        try a.update("Company", named: "Acme") { try $0.setValue("onwards", forKey: "motto") }
        try a.insertCompany("Zeta")
        try a.save { context in context.delete(try a.object("Company", named: "Gone", in: context)) }
        try a.engine.syncNow()
        try a.engine.publishSnapshot()
        #expect(hub.purge() > 0, "the delete of Gone is purged: B learns it from the snapshot")

        let events = b.engine.events
        try b.engine.syncNow()
        let seen = await Self.events(events) { if case .reseeded = $0 { return true } else { return false } }
        #expect(seen.contains { if case .reseeded = $0 { return true } else { return false } }, "\(seen)")
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.contains { $0.hasPrefix("Company:Acme employees=5 motto=onwards") }, "\(dump)")
        #expect(dump.contains { $0.hasPrefix("Company:Bravo") } && dump.contains { $0.hasPrefix("Company:Zeta") }, "\(dump)")
        #expect(!dump.contains { $0.hasPrefix("Company:Gone") }, "\(dump)")
    }

    @Test("a snapshot older than the hub's purge is refused; one no newer than the hub's is not kept")
    func staleSnapshotRefused() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub)
        let b = try await Replica(hub: hub)
        try a.insertCompany("Acme")
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(try b.engine.publishSnapshot().isKept)
        #expect(try a.engine.publishSnapshot().isKept == false, "a snapshot through the same sequence replaces nothing")
        hub.removeReplica(b.engine.replica)
        try a.insertCompany("Globex")
        try a.engine.syncNow()
        #expect(try a.engine.publishSnapshot().isKept)
        #expect(hub.purge() > 0)
        // B pulled only through the first snapshot, which the hub has purged past.
        #expect { try b.engine.publishSnapshot() } throws: { error in
            (error as? SyncError)?.code == .staleSnapshot && "\(error)".contains("purged")
        }
    }

    @Test("a damaged object in a snapshot page fails the re-seed with .corruptChange naming it; nothing of the page is applied")
    func damagedSnapshotPage() async throws {
        let inner = InMemorySyncHub()
        let a = try await Replica(hub: inner)
        try a.insertCompany("Acme")
        try a.insertCompany("Globex")
        try a.engine.syncNow()
        try a.engine.publishSnapshot()
        #expect(inner.purge() > 0)
        let page = try #require(try inner.snapshotPage(after: nil, limit: 10))
        let victim = try #require(page.objects.last)
        let hub = SnapshotHookHub(inner) { page, _ in
            var damaged = page
            damaged.objects = page.objects.map { object in
                var object = object
                if object.objectID == victim.objectID { object.state = Array((object.state ?? []).prefix(20)) }
                return object
            }
            return damaged
        }
        let c = try await Replica(hub: hub)
        #expect { try c.engine.syncNow() } throws: { error in
            (error as? SyncError)?.code == .corruptChange && "\(error)".contains(victim.objectID.uuidString)
        }
        #expect(try c.dump().isEmpty)
        if case .error(let error) = c.engine.status { #expect(error.code == .corruptChange) } else { Issue.record("status \(c.engine.status)") }
    }

    @Test("a re-seed cut short (the hub gone after the first page) starts again at the next cycle and ends as an uninterrupted one")
    func reseedResumes() async throws {
        let inner = InMemorySyncHub()
        let a = try await Replica(hub: inner)
        let b = try await Replica(hub: inner)
        try Self.populate(a, b)
        try a.engine.publishSnapshot()
        #expect(inner.purge() > 0)
        let cut = Flag()
        let hub = SnapshotHookHub(inner) { page, index in
            if index > 0, cut.isOn { throw SyncError(.offline, message: "link cut after the first snapshot page") }
            return page
        }
        let c = try await Replica(hub: hub, chunkSize: 2)
        #expect { try c.engine.syncNow() } throws: { ($0 as? SyncError)?.code == .offline }
        #expect(!(try c.dump()).isEmpty, "the first page was applied")
        cut.isOn = false
        try c.engine.syncNow()
        #expect(try c.dump() == a.dump())
        try c.engine.syncNow()
        #expect(try c.dump() == a.dump(), "a cycle after the re-seed changes nothing")
    }

    @Test("twins of a unique key merged before the snapshot: a replica joining after the purge has the survivor, and edits of the merged-away ID reach it")
    func uniqueKeyTwinsInASnapshot() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, unique: true)
        let b = try await Replica(hub: hub, unique: true)
        try a.insertCompany("ACME from A", symbol: "ACME")
        try b.insertCompany("ACME from B", symbol: "ACME")
        try a.engine.syncNow()
        try b.engine.syncNow()   // B's own insert merges into A's, first on the hub
        try a.engine.syncNow()
        try b.engine.publishSnapshot()
        #expect(hub.purge() > 0)
        let c = try await Replica(hub: hub, unique: true, chunkSize: 1)
        try c.engine.syncNow()
        let dump = try a.dump()
        #expect(try c.dump() == dump)
        #expect(dump.filter { $0.hasPrefix("Company:") }.count == 1, "\(dump)")
        // B names the company by its own (merged-away) ID on its edit; C, from the snapshot's alias, finds the survivor.
        let name = try #require(dump.first { $0.hasPrefix("Company:") }?.contains("from B") == true ? "ACME from B" : "ACME from A")
        try b.update("Company", named: name) { try $0.setValue(Int64(12), forKey: "employees") }
        try b.engine.syncNow()
        try c.engine.syncNow()
        try a.engine.syncNow()
        #expect(try c.dump() == a.dump())
        let after = try c.dump()
        #expect(after.contains { $0.contains("employees=12") }, "\(after)")
    }

    @Test("1,000 companies with staff re-seed in pages of 100 and equal the publisher's store")
    func largeSnapshotInPages() async throws {
        let hub = InMemorySyncHub()
        let a = try await Replica(hub: hub, chunkSize: 100)
        try a.save { context in
            for index in 0..<500 {
                let company = try SyncEngineTests.insert("Company", into: context)
                try company.setValue("company \(index)", forKey: "name")
                let person = try SyncEngineTests.insert("Person", into: context)
                try person.setValue("person \(index)", forKey: "name")
                try person.setValue(company, forKey: "employer")
            }
        }
        try a.engine.syncNow()
        let publishing = ContinuousClock.now
        let published = try a.engine.publishSnapshot()
        let publishTime = ContinuousClock.now - publishing
        #expect(published.objects == 1000)
        #expect(hub.purge() == 1000)
        let c = try await Replica(hub: hub, chunkSize: 100)
        let reseeding = ContinuousClock.now
        try c.engine.syncNow()
        let reseedTime = ContinuousClock.now - reseeding
        #expect(try c.dump() == a.dump())
        print("snapshot of 1,000 objects in pages of 100: published in \(publishTime), re-seeded in \(reseedTime)")
    }
}

/// A switch tests turn off from another thread.
final class Flag: Sendable {
    private let state = Mutex(true)
    var isOn: Bool {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A hub that hands every snapshot page it reads through `hook` (with the
/// page's index in its read), to damage it or fail.
final class SnapshotHookHub: SyncHub {
    let hub: InMemorySyncHub
    let hook: @Sendable (SyncSnapshotPage, Int) throws -> SyncSnapshotPage
    private let reads = Mutex(0)

    init(_ hub: InMemorySyncHub, hook: @escaping @Sendable (SyncSnapshotPage, Int) throws -> SyncSnapshotPage) {
        self.hub = hub
        self.hook = hook
    }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration { try hub.register(replica: replica, modelVersion: modelVersion) }
    func push(_ changes: [SyncChange]) throws -> [Int64] { try hub.push(changes) }
    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] { try hub.pull(after: sequence, limit: limit) }
    func acknowledge(replica: UUID, through sequence: Int64) throws { try hub.acknowledge(replica: replica, through: sequence) }
    func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        try hub.putSnapshotPage(objects, through: sequence, publisher: publisher)
    }
    func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool { try hub.commitSnapshot(through: sequence, publisher: publisher) }
    func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        guard let page = try hub.snapshotPage(after: objectID, limit: limit) else { return nil }
        let index = reads.withLock { count in
            defer { count += 1 }
            return objectID == nil ? 0 : count
        }
        return try hook(page, index)
    }
}
