import DataStack
import DataStackPostgreSQL
import Foundation
import Testing

/// A batch on one machine reaches another machine's main context as a save
/// does: through its history transaction and `NOTIFY`, merged into the
/// objects that context shows.
@Suite(.serialized) struct PostgreSQLBatchMergeTests {
    private func stack(on url: URL) async throws -> StackManager {
        PostgreSQLStore.register()
        let stack = StackManager()
        try await stack.setup(model: StoreTestModel.make(), storeURL: url)
        return stack
    }

    /// Reads `read` on the main context now and after each merge the stack
    /// reports, until it gives `expected` or ten seconds pass; returns the last value read.
    private func afterMerges<T: Equatable & Sendable>(_ stack: StackManager, _ expected: T,
                                                      _ read: @escaping @Sendable (ManagedObjectContext) throws -> T) async throws -> T {
        let main = stack.mainContext
        let (merges, continuation) = AsyncStream.makeStream(of: Void.self)
        // Subscribed before the first read, so that no merge falls between them.
        let token = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { _ in
            continuation.yield()
        }
        defer { NotificationCenter.default.removeObserver(token) }
        let deadline = Task {
            // Cancelled when the value came: then the stream is no longer read.
            try? await Task.sleep(for: .seconds(10))
            continuation.finish()
        }
        defer { deadline.cancel() }
        var value = try await main.perform { try read(main) }
        if value == expected { return value }
        for await _ in merges {
            value = try await main.perform { try read(main) }
            if value == expected { break }
        }
        return value
    }

    @Test("another machine's batch update and batch delete are merged into the objects the main context shows")
    func batchesMergeAcrossMachines() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let viewer = try await stack(on: url)
        let importer = try await stack(on: url)
        let context = importer.importerContext()
        try await context.perform {
            for (symbol, employees) in [("ACME", 1), ("GLBX", 5)] {
                let company = ManagedObject(entity: try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"]),
                                            insertInto: context)
                try company.setValue(symbol, forKey: "symbol")
                try company.setValue(employees, forKey: "employees")
            }
            try context.save()
        }
        let holder = Holder()
        let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'"))
        let shown = try await afterMerges(viewer, 1) { main in
            holder.object = try main.fetch(request).first
            return try holder.object?.value(forKey: "employees") as? Int ?? -1
        }
        #expect(shown == 1)

        try await context.perform {
            _ = try context.execute(BatchUpdateRequest(entityName: "Company", propertiesToUpdate: ["employees": .keyPath("employees") + 100]))
        }
        let updated = try await afterMerges(viewer, 101) { _ in try holder.object?.value(forKey: "employees") as? Int ?? -1 }
        #expect(updated == 101, "the viewer refreshed the object it shows")

        try await context.perform {
            _ = try context.execute(BatchDeleteRequest(fetchRequest: request))
        }
        let deleted = try await afterMerges(viewer, 0) { main in try main.count(for: request) }
        #expect(deleted == 0)
        let gone = await viewer.mainContext.perform { holder.object.map { $0.isDeleted || $0.managedObjectContext == nil } ?? false }
        #expect(gone, "the shown object left the viewer's context")
    }
}

/// An object handed between main-queue blocks of one test.
private final class Holder: @unchecked Sendable {
    // @unchecked Sendable: written and read on the main context's queue only.
    var object: ManagedObject?
}
