import Foundation
import Testing
import ObjectGraph

/// Main-queue contexts run on `DispatchQueue.main`, found by queue identity (SPEC §3.10).
@Suite struct MainQueueContextTests {
    @MainActor
    @Test func onTheMainActorAMainQueueContextIsUsedDirectly() throws {
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        #expect(context.isOnQueue)
        let company = Company(context: context)
        company.symbol = "MAIN"
        try context.save()
        #expect(try context.count(for: FetchRequest<Company>()) == 1)
    }

    @Test func fromAnotherQueueWorkIsHoppedOntoTheMainQueue() async throws {
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        #expect(!context.isOnQueue)
        let count = try await context.perform {
            dispatchPrecondition(condition: .onQueue(.main))
            let company = Company(context: context)
            company.symbol = "HOP"
            try context.save()
            return try context.count(for: FetchRequest<Company>())
        }
        #expect(count == 1)
        let again = try await Task.detached { try context.performAndWait { try context.count(for: FetchRequest<Company>()) } }.value
        #expect(again == 1)
    }

    @Test func performAndWaitIsReentrantOnAPrivateQueue() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let value = context.performAndWait { context.performAndWait { context.performAndWait { 3 } } }
        #expect(value == 3)
        #expect(!context.isOnQueue)
        #expect(context.performAndWait { context.isOnQueue })
    }

    @Test func performAndWaitRethrows() throws {
        struct Oops: Error {}
        let context = try TestStack().newContext()
        #expect(throws: Oops.self) { try context.performAndWait { throw Oops() } }
    }
}
