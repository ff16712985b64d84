import DataStack
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import Testing

/// The smallest cases that ``SyncConvergenceTests`` runs found, replayed in
/// one process, step by step, through a PostgreSQL hub: each names the
/// random run's symptom and the engine change it waits for.
@Suite("Sync convergence: reduced cases", .serialized)
struct SyncConvergenceReducedTests {
    static func model() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "key", type: .string, isOptional: false),
                RelationshipDescription(name: "staff", destination: "Person", inverse: "employer", isToMany: true),
            ]),
            EntityDescription(name: "Person", properties: [
                AttributeDescription(name: "key", type: .string, isOptional: false),
                RelationshipDescription(name: "employer", destination: "Company", inverse: "staff"),
            ]),
        ])
    }

    /// A stack on a file of its own and its engine on the hub at `url`, with
    /// chunks (and snapshot pages) of `chunkSize` when given.
    final class Replica: Sendable {
        let stack: StackManager
        let engine: SyncEngine

        init(hub url: URL, folder: URL, chunkSize: Int? = nil) async throws {
            stack = StackManager()
            try await stack.setup(model: SyncConvergenceReducedTests.model(),
                                  storeURL: folder.appendingPathComponent("\(UUID().uuidString.prefix(8)).sqlite"))
            var options = SyncOptions(hub: try PostgreSQLSyncHub(url: url))
            if let chunkSize { options.chunkSize = chunkSize }
            engine = try SyncEngine(stack: stack, options: options)
        }

        func save(_ body: @escaping (ManagedObjectContext) throws -> Void) throws {
            let context = stack.importerContext()
            try context.performAndWait {
                try body(context)
                try context.save()
            }
        }

        func insert(_ entity: String, key: String, in context: ManagedObjectContext) throws -> ManagedObject {
            let description = try #require(stack.writerCoordinator.managedObjectModel.entitiesByName[entity])
            let object = ManagedObject(entity: description, insertInto: context)
            try object.setValue(key, forKey: "key")
            return object
        }

        func object(_ entity: String, _ key: String, in context: ManagedObjectContext) throws -> ManagedObject? {
            try context.fetch(FetchRequest<ManagedObject>(entityName: entity, predicate: try FetchPredicate(format: "key == %@", key))).first
        }

        /// The object of `entity` whose key is `key`; a missing one fails the test.
        func existing(_ entity: String, _ key: String, in context: ManagedObjectContext) throws -> ManagedObject {
            try #require(try object(entity, key, in: context), "no \(entity) \(key)")
        }

        /// Every object as `Entity key relationship=keys`, sorted.
        func dump() throws -> [String] {
            let context = stack.importerContext()
            return try context.performAndWait {
                var lines: [String] = []
                for company in try context.fetch(FetchRequest<ManagedObject>(entityName: "Company")) {
                    let staff = (try company.value(forKey: "staff") as? Set<ManagedObject> ?? []).map { try? $0.value(forKey: "key") as? String }
                    lines.append("Company \(try company.value(forKey: "key") ?? "?") staff=\(staff.compactMap { $0 ?? nil }.sorted())")
                }
                for person in try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
                    let employer = try (person.value(forKey: "employer") as? ManagedObject)?.value(forKey: "key") as? String
                    lines.append("Person \(try person.value(forKey: "key") ?? "?") employer=\(employer ?? "nil")")
                }
                return lines.sorted()
            }
        }

        /// The person's employer's key: nil for none, "?" for a reference to no stored company.
        func employer(of person: String) throws -> String?? {
            let context = stack.importerContext()
            return try context.performAndWait {
                guard let person = try object("Person", person, in: context) else { return nil }
                guard let employer = try person.value(forKey: "employer") as? ManagedObject else { return .some(nil) }
                return .some(try employer.value(forKey: "key") as? String ?? "?")
            }
        }
    }

    @Test("a to-one set on one replica to an object another deleted concurrently is empty on a replica that pulls both in one chunk")
    func referenceToAnObjectDeletedEarlierInTheChunk() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ds-reduced-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }   // a leftover folder is harmless
        let a = try await Replica(hub: url, folder: folder)
        let b = try await Replica(hub: url, folder: folder)
        try b.save { context in _ = try b.insert("Company", key: "X", in: context) }
        try b.engine.syncNow()
        try a.engine.syncNow()
        // A, not yet knowing that B deletes X, hires someone at X.
        try a.save { context in
            let person = try a.insert("Person", key: "P", in: context)
            try person.setValue(try a.object("Company", "X", in: context), forKey: "employer")
        }
        try b.save { context in context.delete(try #require(try b.object("Company", "X", in: context))) }
        try b.engine.syncNow()
        try a.engine.syncNow()   // the hub now says: insert X, delete X, insert P (employer X)
        try b.engine.syncNow()
        #expect(try a.employer(of: "P") == .some(nil))
        #expect(try b.employer(of: "P") == .some(nil))

        // A fresh replica pulls the three changes in one chunk.
        let fresh = try await Replica(hub: url, folder: folder)
        try fresh.engine.syncNow()
        let freshEmployer = try fresh.employer(of: "P")
        #expect(freshEmployer == .some(nil), "fresh replica: P's employer is \(String(describing: freshEmployer))")
    }
}
