import DataStack
import DataStackPostgreSQL
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import Testing

/// Snapshots through a PostgreSQL hub: published in pages, kept only when
/// newer, bounding the purge; a replica that joins after the purge re-seeds
/// from it and converges with the others.
@Suite("PostgreSQL sync hub: snapshots and re-seeding", .serialized)
struct PostgreSQLSyncSnapshotTests {
    typealias Replica = SyncConvergenceReducedTests.Replica

    @Test("a replica joins a PostgreSQL hub purged past a snapshot published in pages, equals the others, and syncs on")
    func joinAfterPurge() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("PostgreSQLSyncSnapshotTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let hub = try PostgreSQLSyncHub(url: url)
        let a = try await Replica(hub: url, folder: folder, chunkSize: 2)
        let b = try await Replica(hub: url, folder: folder, chunkSize: 2)
        try a.save { context in
            let companies = try ["acme", "globex", "initech"].map { try a.insert("Company", key: $0, in: context) }
            for (index, key) in ["ann", "bob", "cy", "dee"].enumerated() {
                try a.insert("Person", key: key, in: context).setValue(companies[index % 3], forKey: "employer")
            }
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try b.save { context in
            try b.existing("Person", "dee", in: context).setValue(try b.existing("Company", "globex", in: context), forKey: "employer")
            context.delete(try b.existing("Company", "initech", in: context))
        }
        try b.engine.syncNow()
        try a.engine.syncNow()

        #expect(try hub.snapshotPage(after: nil, limit: 10) == nil, "no snapshot yet")
        let published = try a.engine.publishSnapshot()
        #expect(published.isKept && published.objects >= 7, "\(published)")
        #expect(try b.engine.publishSnapshot().isKept == false, "B's snapshot is through the same sequence: the hub keeps A's")
        #expect(try hub.purge() > 0)
        let page = try #require(try hub.snapshotPage(after: nil, limit: 3))
        #expect(page.sequence == published.through && page.objects.count == 3)
        let next = try #require(try hub.snapshotPage(after: page.objects.last?.objectID, limit: 100))
        #expect(next.objects.count == published.objects - 3)
        #expect(next.objects.allSatisfy { $0.objectID.uuidString > page.objects[2].objectID.uuidString })

        let c = try await Replica(hub: url, folder: folder, chunkSize: 2)
        try c.engine.syncNow()
        let dump = try a.dump()
        #expect(try c.dump() == dump)
        #expect(try b.dump() == dump)
        #expect(dump.contains("Person dee employer=globex") && !dump.contains { $0.hasPrefix("Company initech") }, "\(dump)")

        try c.save { context in try c.insert("Person", key: "eve", in: context).setValue(try c.existing("Company", "acme", in: context), forKey: "employer") }
        try c.engine.syncNow()
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(try a.dump() == c.dump())
        #expect(try b.dump() == c.dump())
        #expect(try a.dump().contains("Person eve employer=acme"))
    }

    @Test("a replica whose row was deleted from datastack_sync_replicas comes back with unpushed edits: it re-seeds, keeps them, converges")
    func removedReplicaComesBack() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("PostgreSQLSyncSnapshotTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let hub = try PostgreSQLSyncHub(url: url)
        let a = try await Replica(hub: url, folder: folder, chunkSize: 3)
        let b = try await Replica(hub: url, folder: folder, chunkSize: 3)
        try a.save { context in
            let acme = try a.insert("Company", key: "acme", in: context)
            try a.insert("Person", key: "ann", in: context).setValue(acme, forKey: "employer")
            _ = try a.insert("Company", key: "gone", in: context)
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        // B works on offline, and is taken for gone.
        try b.save { context in try b.insert("Person", key: "bob", in: context).setValue(try b.existing("Company", "acme", in: context), forKey: "employer") }
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("DELETE FROM datastack_sync_replicas WHERE replica = $1::uuid", [.text(b.engine.replica.uuidString)])
        try a.save { context in
            context.delete(try a.existing("Company", "gone", in: context))
            _ = try a.insert("Company", key: "zeta", in: context)
        }
        try a.engine.syncNow()
        try a.engine.publishSnapshot()
        #expect(try hub.purge() > 0)

        try b.engine.syncNow()
        try a.engine.syncNow()
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.contains("Person bob employer=acme") && dump.contains { $0.hasPrefix("Company zeta") }, "\(dump)")
        #expect(!dump.contains { $0.hasPrefix("Company gone") }, "\(dump)")
        let registered = try admin.execute("SELECT count(*) FROM datastack_sync_replicas WHERE replica = $1::uuid",
                                           [.text(b.engine.replica.uuidString)]).int64(row: 0, column: 0)
        #expect(registered == 1, "the re-seed registered the replica again")
    }

    @Test("a PostgreSQL hub refuses a snapshot older than its purge, and a hub without one purges by acknowledgments alone")
    func staleSnapshotRefused() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("PostgreSQLSyncSnapshotTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let hub = try PostgreSQLSyncHub(url: url)
        let a = try await Replica(hub: url, folder: folder, chunkSize: 500)
        try a.save { context in _ = try a.insert("Company", key: "acme", in: context) }
        try a.engine.syncNow()
        try a.save { context in _ = try a.insert("Company", key: "globex", in: context) }
        try a.engine.syncNow()
        #expect(try hub.purge() == 2, "no snapshot: as far as every replica acknowledged")
        let publisher = UUID()
        try hub.putSnapshotPage([], through: 1, publisher: publisher)
        #expect { try hub.commitSnapshot(through: 1, publisher: publisher) } throws: { error in
            (error as? SyncError)?.code == .staleSnapshot && "\(error)".contains("purged the changes through 2")
        }
        #expect(try hub.snapshotPage(after: nil, limit: 10) == nil)
        // A new replica finds neither the changes nor a snapshot: it says so, and waits.
        let c = try await Replica(hub: url, folder: folder, chunkSize: 500)
        #expect { try c.engine.syncNow() } throws: { error in
            (error as? SyncError)?.code == .snapshotRequired && "\(error)".contains("publishSnapshot")
        }
        #expect(try a.engine.publishSnapshot().isKept)
        try c.engine.syncNow()
        #expect(try c.dump() == a.dump())
    }
}
