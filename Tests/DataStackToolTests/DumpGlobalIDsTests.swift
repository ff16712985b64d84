import DataStack
import DataStackSync
import Foundation
import Testing

/// `datastack dump --global-ids`: converged replicas, whose primary keys
/// differ, dump the same text; a store that is no replica, or one with an
/// object saved since it last recorded its changes, is refused.
@Suite struct DumpGlobalIDsTests {
    static func model() -> ManagedObjectModel {
        let company = EntityDescription(name: "Company", properties: [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "price", type: .double, defaultValue: .double(0)),
            RelationshipDescription(name: "employees", destination: "Employee", inverse: "employer", isToMany: true),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
        ])
        let employee = EntityDescription(name: "Employee", properties: [
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "employer", destination: "Company", inverse: "employees", isToMany: false),
        ])
        let tag = EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
        ])
        return ManagedObjectModel(entities: [company, employee, tag])
    }

    /// One replica: its stack, its engine, its file.
    struct Replica {
        let store: URL
        let stack: StackManager
        let engine: SyncEngine

        init(_ name: String, hub: InMemorySyncHub, in workspace: ToolWorkspace) async throws {
            store = workspace.url.appendingPathComponent("\(name).sqlite")
            stack = StackManager()
            try await stack.setup(model: DumpGlobalIDsTests.model(), storeURL: store)
            engine = try SyncEngine(stack: stack, options: SyncOptions(hub: hub))
        }

        /// Runs `body` in an importer context and saves it.
        func edit(_ body: @escaping @Sendable (ManagedObjectContext, ManagedObjectModel) throws -> Void) throws {
            let context = stack.importerContext()
            try context.performAndWait {
                try body(context, context.persistentStoreCoordinator!.managedObjectModel)
                try context.save()
            }
        }
    }

    static func insert(_ entity: String, _ values: [String: any Sendable], in context: ManagedObjectContext,
                       model: ManagedObjectModel) throws -> ManagedObject {
        let object = ManagedObject(entity: model.entitiesByName[entity]!, insertInto: context)
        for (key, value) in values { try object.setValue(value, forKey: key) }
        return object
    }

    static func fetch(_ entity: String, _ format: String, in context: ManagedObjectContext) throws -> ManagedObject {
        var request = FetchRequest<ManagedObject>(entityName: entity)
        request.predicate = try FetchPredicate(format: format)
        return try #require(try context.fetch(request).first, "no \(entity) where \(format)")
    }

    /// Three replicas that insert, relate, edit and delete in different
    /// orders (so their primary keys differ), then sync until quiet.
    static func convergedReplicas(in workspace: ToolWorkspace) async throws -> [Replica] {
        let hub = InMemorySyncHub()
        let a = try await Replica("A", hub: hub, in: workspace)
        let b = try await Replica("B", hub: hub, in: workspace)
        let c = try await Replica("C", hub: hub, in: workspace)
        // B and C make objects of their own before they see A's: their keys for A's objects differ from A's.
        try b.edit { context, model in
            _ = try insert("Tag", ["label": "energy"], in: context, model: model)
            _ = try insert("Company", ["name": "Bolt", "price": 3.5], in: context, model: model)
        }
        try c.edit { context, model in
            for label in ["tech", "retail"] { _ = try insert("Tag", ["label": label], in: context, model: model) }
        }
        try a.edit { context, model in
            let acme = try insert("Company", ["name": "Acme", "price": 10.25], in: context, model: model)
            for name in ["Ann", "Bob"] { try insert("Employee", ["name": name], in: context, model: model).setValue(acme, forKey: "employer") }
            _ = try insert("Company", ["name": "Zenith", "price": 99.0], in: context, model: model)
        }
        for replica in [c, b, a, c, b, a] { try replica.engine.syncNow() }
        try b.edit { context, _ in
            let acme = try fetch("Company", "name == 'Acme'", in: context)
            let energy = try fetch("Tag", "label == 'energy'", in: context)
            try energy.setValue(Set([acme]), forKey: "companies")
            try fetch("Employee", "name == 'Bob'", in: context).setValue(try fetch("Company", "name == 'Bolt'", in: context), forKey: "employer")
        }
        try c.edit { context, model in
            let tech = try fetch("Tag", "label == 'tech'", in: context)
            try tech.setValue(Set([try fetch("Company", "name == 'Acme'", in: context)]), forKey: "companies")
            try fetch("Company", "name == 'Acme'", in: context).setValue(11.5, forKey: "price")
            context.delete(try fetch("Company", "name == 'Zenith'", in: context))
            _ = try insert("Employee", ["name": "Cy"], in: context, model: model)
        }
        for _ in 0..<2 { for replica in [a, b, c] { try replica.engine.syncNow() } }
        for replica in [a, b, c] { await replica.stack.close() }
        return [a, b, c]
    }

    @Test func convergedReplicasDumpTheSameText() async throws {
        let workspace = try ToolWorkspace()
        let replicas = try await Self.convergedReplicas(in: workspace)
        for arguments in [["--json", "--global-ids"], ["--global-ids"], ["--global-ids", "--entity", "Company", "--where", "price > 5"]] {
            let dumps = try replicas.map { replica in
                let result = try Tool.run(["dump", replica.store.path] + arguments)
                #expect(result.status == 0, "\(arguments): \(result.errorOutput)")
                return result.output
            }
            #expect(dumps[1] == dumps[0] && dumps[2] == dumps[0], "\(arguments): \(dumps)")
        }
        // What the replicas hold, read back from one dump: every edit arrived, named by global IDs.
        let lines = try Tool.run(["dump", replicas[0].store.path, "--json", "--global-ids"]).jsonLines()
        #expect(lines.count == 2 + 3 + 3, "\(lines)")   // Acme and Bolt, Ann/Bob/Cy, three tags
        let byName = Dictionary(uniqueKeysWithValues: lines.compactMap { line -> (String, [String: Any])? in
            let attributes = line["attributes"] as? [String: Any]
            guard let name = (attributes?["name"] ?? attributes?["label"]) as? String else { return nil }
            return (name, line)
        })
        let acme = try #require(byName["Acme"]?["id"] as? String)
        let bolt = try #require(byName["Bolt"]?["id"] as? String)
        #expect(UUID(uuidString: acme) != nil, "\(acme)")
        #expect((byName["Ann"]?["relationships"] as? [String: Any])?["employer"] as? String == acme)
        #expect((byName["Bob"]?["relationships"] as? [String: Any])?["employer"] as? String == bolt)
        #expect((byName["Cy"]?["relationships"] as? [String: Any])?["employer"] is NSNull)
        #expect((byName["Acme"]?["attributes"] as? [String: Any])?["price"] as? Double == 11.5)
        let acmeTags = try #require((byName["Acme"]?["relationships"] as? [String: Any])?["tags"] as? [String])
        #expect(Set(acmeTags) == Set([byName["energy"]?["id"] as? String, byName["tech"]?["id"] as? String].compactMap { $0 }))
        #expect(acmeTags == acmeTags.sorted())
        // Each entity's objects come in the order of their global IDs.
        for entity in ["Company", "Employee", "Tag"] {
            let ids = lines.filter { $0["entity"] as? String == entity }.compactMap { $0["id"] as? String }
            #expect(ids == ids.sorted(), "\(entity): \(ids)")
        }
        // By primary keys, the same replicas dump differently: the global IDs are what makes them equal.
        let byKeys = try replicas.map { try Tool.run(["dump", $0.store.path, "--json"]).output }
        #expect(byKeys[0] != byKeys[1] || byKeys[0] != byKeys[2])
    }

    @Test func aStoreThatIsNoReplicaIsRefused() async throws {
        let workspace = try ToolWorkspace()
        let store = workspace.url.appendingPathComponent("Plain.sqlite")
        let stack = StackManager()
        try await stack.setup(model: Self.model(), storeURL: store)
        await stack.close()
        let result = try Tool.run(["dump", store.path, "--global-ids"])
        #expect(result.status == 65, "\(result.output)")
        #expect(result.errorOutput.contains("not a replica") && result.errorOutput.contains(store.path), "\(result.errorOutput)")
        #expect(result.output.isEmpty)
    }

    @Test func anObjectSavedSinceTheLastSyncIsRefusedNotLeftOut() async throws {
        let workspace = try ToolWorkspace()
        let hub = InMemorySyncHub()
        let replica = try await Replica("A", hub: hub, in: workspace)
        try replica.edit { context, model in _ = try Self.insert("Tag", ["label": "one"], in: context, model: model) }
        try replica.engine.syncNow()
        try replica.edit { context, model in _ = try Self.insert("Tag", ["label": "two"], in: context, model: model) }
        await replica.stack.close()
        let result = try Tool.run(["dump", replica.store.path, "--global-ids", "--entity", "Tag"])
        #expect(result.status == 65)
        #expect(result.errorOutput.contains("1 of the 2 Tag objects have no global ID"), "\(result.errorOutput)")
        // The entities whose objects all have one still dump.
        let companies = try Tool.run(["dump", replica.store.path, "--global-ids", "--entity", "Company"])
        #expect(companies.status == 0 && companies.output.isEmpty, "\(companies.errorOutput)")
    }
}
