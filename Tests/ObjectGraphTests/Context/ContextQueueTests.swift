import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Running work on a context's queue: performAndWait, perform, async perform,
/// and main-queue contexts.
@Suite struct ContextQueueTests {
    @Test func performAndWaitReturnsTheBlocksValue() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A", "B"])
        let context = stack.newContext()
        let symbols = try context.performAndWait {
            try context.fetch(FetchRequest<Company>()).map(\.symbol).sorted()
        }
        #expect(symbols == ["A", "B"])
        #expect(context.performAndWait { context.isOnQueue })
        #expect(!context.isOnQueue)
    }

    @Test func performAndWaitRethrowsTheBlocksError() throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        #expect(throws: ObjectGraphError.unknownEntity("Nope")) {
            try context.performAndWait {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Nope"))
            }
        }
        // The queue is still usable afterwards.
        #expect(try context.performAndWait { try context.count(for: FetchRequest<Company>()) } == 0)
    }

    @Test func performAndWaitIsReentrantOnItsOwnQueue() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let depth = try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "NESTED"
            return try context.performAndWait {
                try context.performAndWait {
                    try context.save()
                    return 3
                }
            }
        }
        #expect(depth == 3)
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 1)
    }

    @Test func performAndWaitOfOneContextInsideAnothersWorks() throws {
        let stack = try TestStack(type: .sqlite)
        let writer = stack.newContext()
        let reader = stack.newContext()
        let count = try writer.performAndWait {
            Company(context: writer).symbol = "A"
            try writer.save()
            return try reader.performAndWait { try reader.count(for: FetchRequest<Company>()) }
        }
        #expect(count == 1)
    }

    @Test func asyncPerformReturnsTheValueAndRunsOnTheQueue() async throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let (id, onQueue) = try await context.perform {
            let company = Company(context: context)
            company.symbol = "ASYNC"
            try context.save()
            return (company.objectID, context.isOnQueue)
        }
        #expect(onQueue)
        #expect(!id.isTemporaryID)
        let symbol = try await context.perform { (try context.existingObject(with: id) as? Company)?.symbol }
        #expect(symbol == "ASYNC")
    }

    @Test func asyncPerformRethrows() async throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        await #expect(throws: ObjectGraphError.unknownEntity("Nope")) {
            try await context.perform { try context.count(for: FetchRequest<ManagedObject>(entityName: "Nope")) }
        }
    }

    @Test func performRunsTheBlockLaterOnTheQueue() async throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        let onQueue = await withCheckedContinuation { continuation in
            context.perform {
                continuation.resume(returning: context.isOnQueue)
            }
        }
        #expect(onQueue)
    }

    @Test func manyTasksCanUseOneContextThroughPerform() async throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    try await context.perform {
                        Company(context: context).symbol = "T\(index)"
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try await context.perform { try context.count(for: FetchRequest<Company>()) }
        #expect(count == 20)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'") == 20)
    }

    @MainActor
    @Test func aMainQueueContextWorksFromTheMainActor() async throws {
        let stack = try TestStack(type: .sqlite)
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        #expect(context.concurrencyType == .mainQueue)
        #expect(context.isOnQueue)

        // Directly, on the main actor.
        let company = Company(context: context)
        company.symbol = "MAIN"
        try context.save()
        #expect(!company.objectID.isTemporaryID)

        // Through the queue, from the main actor.
        let id = company.objectID
        let symbol = try await context.perform { (try context.existingObject(with: id) as? Company)?.symbol }
        #expect(symbol == "MAIN")
        #expect(context.performAndWait { context.isOnQueue })

        // From a background task, hopping onto the main queue.
        let count = try await Task.detached {
            try await context.perform { try context.count(for: FetchRequest<Company>()) }
        }.value
        #expect(count == 1)
    }
}
