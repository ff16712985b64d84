import DataStack
import DataStackPostgreSQL
import Foundation
import Testing

/// The stack on PostgreSQL: two stacks on one database stand for two
/// machines; each merges what the other saves into its main context through
/// the history and `LISTEN`/`NOTIFY`, refreshing only the objects it shows.
@Suite(.serialized) struct PostgreSQLStackTests {
    /// A stack set up on `url` with the defaults (history tracked, other writers merged).
    private func stack(on url: URL) async throws -> StackManager {
        PostgreSQLStore.register()
        let stack = StackManager()
        try await stack.setup(model: StoreTestModel.make(), storeURL: url)
        return stack
    }

    /// Saves a company through the stack's importer, as an import does.
    private func importCompany(_ stack: StackManager, symbol: String, employees: Int) async throws {
        let importer = stack.importerContext()
        try await importer.perform {
            let company = ManagedObject(entity: try #require(importer.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"]),
                                        insertInto: importer)
            try company.setValue(symbol, forKey: "symbol")
            try company.setValue(employees, forKey: "employees")
            try importer.save()
        }
    }

    @Test("a postgresql:// URL sets the stack up on the PostgreSQL store, with a writer and a main coordinator of its own")
    func setupWithAURL() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let stack = try await stack(on: url)
        #expect(stack.writerCoordinator !== stack.mainCoordinator)
        #expect(stack.writerCoordinator.persistentStores.first is PostgreSQLStore)
        #expect(stack.mainCoordinator.persistentStores.first is PostgreSQLStore)
        #expect(stack.followsPersistentHistory)
        try await importCompany(stack, symbol: "ACME", employees: 3)
        let count = try await eventually(stack, 1) { try $0.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(count == 1)
    }

    @Test("a reset drops the store's tables and starts over with an empty store on the same database")
    func resetStartsOver() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let stack = try await stack(on: url)
        try await importCompany(stack, symbol: "ACME", employees: 3)
        let before = stack.writerCoordinator.persistentStores.first?.identifier
        try await stack.resetPersistentStores()
        #expect(stack.writerCoordinator.persistentStores.first?.identifier != before, "a new store, with a new UUID")
        let count = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(count == 0)
        try await importCompany(stack, symbol: "ACME", employees: 4)
        let again = try await eventually(stack, 1) { try $0.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(again == 1)
    }

    @Test("an unregistered URL scheme is a clear setup error")
    func unknownScheme() async throws {
        let stack = StackManager()
        await #expect(throws: StackError.self) {
            try await stack.setup(model: StoreTestModel.make(), storeURL: URL(string: "mysql://db/app")!)
        }
    }

    @Test("a save on one machine refreshes the object the other shows; an object it does not show is not registered")
    func mergesAcrossMachines() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let a = try await stack(on: url)
        let b = try await stack(on: url)
        try await importCompany(b, symbol: "ACME", employees: 1)
        try await importCompany(b, symbol: "GLBX", employees: 5)
        let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'"))
        // A shows ACME (and only ACME).
        let holder = ObjectHolder()
        let seen = try await eventually(a, 1) { main in
            let found = try main.fetch(request)
            holder.object = found.first
            return try found.first.flatMap { try $0.value(forKey: "employees") as? Int } ?? -1
        }
        #expect(seen == 1)
        // B changes both companies in one save.
        let importer = b.importerContext()
        try await importer.perform {
            for company in try importer.fetch(FetchRequest<ManagedObject>(entityName: "Company")) {
                try company.setValue((try company.value(forKey: "employees") as? Int ?? 0) + 100, forKey: "employees")
            }
            try importer.save()
        }
        let refreshed = try await eventually(a, 101) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 }
        #expect(refreshed == 101, "A's main context refreshed the object it shows")
        let registered = try await a.mainContext.perform { () throws -> [String] in
            try a.mainContext.registeredObjects.compactMap { try $0.value(forKey: "symbol") as? String }.sorted()
        }
        #expect(registered == ["ACME"], "the merge registered no object A does not show")
    }
}

/// An object handed between main-queue blocks of one test.
private final class ObjectHolder: @unchecked Sendable {
    // @unchecked Sendable: written and read on the main context's queue only.
    var object: ManagedObject?
}
