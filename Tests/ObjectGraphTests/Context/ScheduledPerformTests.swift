import Foundation
import ObjectGraph
import Synchronization
import Testing

/// `perform(schedule:_:)`: an immediate task runs at once when its caller is
/// on the context's queue, an enqueued one after what the queue holds (Core
/// Data's `NSManagedObjectContext.ScheduledTaskType`).
@Suite struct ScheduledPerformTests {
    /// What ran, in order; appended to from blocks on the main queue.
    private final class Order: Sendable {
        private let steps = Mutex<[String]>([])
        func append(_ step: String) { steps.withLock { $0.append(step) } }
        var recorded: [String] { steps.withLock { $0 } }
    }

    @MainActor
    @Test func onTheMainActorAnImmediateTaskRunsAheadOfTheBlocksQueued() async throws {
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        let order = Order()
        DispatchQueue.main.async { order.append("queued before") }

        let symbol = try await context.perform {
            order.append("immediate")
            let company = Company(context: context)
            company.symbol = "NOW"
            try context.save()
            return company.symbol
        }
        #expect(symbol == "NOW")
        // Nothing suspended: the block queued before has not run yet.
        #expect(order.recorded == ["immediate"])

        await context.perform(schedule: .enqueued) { order.append("enqueued") }
        #expect(order.recorded == ["immediate", "queued before", "enqueued"])
    }

    @MainActor
    @Test func anImmediateTaskProcessesPendingChangesWhenItEnds() async throws {
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        let id = await context.perform {
            let company = Company(context: context)
            company.symbol = "PENDING"
            return company.objectID
        }
        let change = try #require(try changes.notifications.last.map(ObjectsDidChange.init))
        #expect(change.insertedObjectIDs == [id])
        #expect(context.hasChanges)
    }

    @MainActor
    @Test func anImmediateTaskRethrowsTheBodysError() async throws {
        struct Refused: Error, Equatable {}
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        await #expect(throws: Refused()) {
            try await context.perform { () throws(Refused) -> Int in throw Refused() }
        }
        // The context is still usable afterwards, at once.
        #expect(try await context.perform { try context.count(for: FetchRequest<Company>()) } == 0)
    }

    @Test func offTheQueueAnImmediateTaskIsQueuedBehindEarlierBlocks() async throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let order = Order()
        // From a synchronous function: in an async one, `perform` is the async overload.
        func performLater() { context.perform { order.append("first") } }
        performLater()
        let ranOnQueue = await context.perform {
            order.append("second")
            return context.isOnQueue
        }
        #expect(ranOnQueue)
        #expect(order.recorded == ["first", "second"])
    }

    @Test func aMainQueueContextCalledOffTheMainActorHopsOntoTheMainQueue() async throws {
        let stack = try TestStack()
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator)
        for schedule in [ManagedObjectContext.ScheduledTaskType.immediate, .enqueued] {
            let onMain = await context.perform(schedule: schedule) {
                dispatchPrecondition(condition: .onQueue(.main))
                return context.isOnQueue
            }
            #expect(onMain, "schedule \(schedule)")
        }
    }
}
