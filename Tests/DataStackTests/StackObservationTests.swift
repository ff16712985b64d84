import Foundation
import Observation
import Synchronization
import Testing
import DataStack

/// Tells whether code runs on the main queue: by a mark set on it (on Linux the
/// main queue's blocks need not run on the thread `Thread.isMainThread` names).
enum MainQueueMark {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()
    static var isOnMainQueue: Bool { DispatchQueue.getSpecific(key: key) ?? false }
}

/// Counts the `onChange` calls of the trackings it starts, and whether each came on the main queue.
final class StackObservationCounter: Sendable {
    private let calls = Mutex<[Bool]>([])

    var count: Int { calls.withLock { $0.count } }
    var allOnMainQueue: Bool { calls.withLock { $0.allSatisfy { $0 } } }

    func track<T>(_ read: () -> T) -> T {
        withObservationTracking(read) { [self] in
            calls.withLock { $0.append(MainQueueMark.isOnMainQueue) }
        }
    }
}

/// The stack's promise, observed (issue #38): the main context's objects are
/// `Observable`, and a merge of an importer's save calls, on the main queue and
/// once per merge, exactly the observers of the observed properties it changed.
@Suite struct StackObservationTests {
    @Test func importOfTenThousandRowsCallsExactlyTheObserversOfTheObservedObjectsItChanged() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 20)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        await main.perform { main.isObservable = true }
        let observed = Array(ids.prefix(10))
        let prices = observed.map { _ in StackObservationCounter() }
        let symbols = observed.map { _ in StackObservationCounter() }
        let everything = StackObservationCounter()   // five reads of the first ticker, one tracking
        let holder = ObjectHolder()
        try await main.perform {
            let tickers = try observed.map { try main.existingObject(with: $0) as! Ticker }
            for (index, ticker) in tickers.enumerated() {
                _ = prices[index].track { ticker.price }
                _ = symbols[index].track { ticker.symbol }
            }
            _ = everything.track { (tickers[0].symbol, tickers[0].price, tickers[0].name, tickers[0].price, tickers[0].symbol) }
            // A fault the main context holds and nobody reads.
            holder.objects = tickers + [main.object(with: ids[15])]
        }

        // One importer save of 10,000 rows: new prices (and a name) for the
        // first five observed tickers, 9,995 new tickers.
        let importer = stack.importerContext()
        try await importer.perform {
            for (index, id) in observed.prefix(5).enumerated() {
                let ticker = try importer.existingObject(with: id) as! Ticker
                ticker.price += 100
                if index == 0 { ticker.name = "First" }
            }
            for index in 0..<9_995 {
                let ticker = Ticker(context: importer)
                ticker.symbol = "N\(index)"
                ticker.price = Double(index)
            }
            try importer.save()
        }
        let merge = try #require(await recorder.wait(for: 2).last)
        #expect(merge.save.insertedObjectIDs.count == 9_995)
        #expect(merge.refreshedObjectIDs == Set(observed.prefix(5)))

        #expect(prices.prefix(5).map(\.count) == [1, 1, 1, 1, 1])
        #expect(prices.prefix(5).allSatisfy { $0.allOnMainQueue }, "merges run on the main queue")
        #expect(prices.suffix(5).map(\.count) == [0, 0, 0, 0, 0], "unchanged objects' observers are not called")
        #expect(symbols.map(\.count) == Array(repeating: 0, count: 10), "unchanged properties' observers are not called")
        #expect(everything.count == 1, "two of the properties it read changed, in one merge: one call")
        #expect(everything.allOnMainQueue)
        let (fault, newPrice) = try await main.perform {
            (holder.objects[10].isFault, (try main.existingObject(with: observed[0]) as! Ticker).price)
        }
        #expect(fault, "a registered fault stays a fault")
        #expect(newPrice == 100)
    }

    @Test func aFetchedResultsControllerOnTheMainContextIsObservedThroughMerges() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        _ = try await importTickers(stack, count: 3)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        await main.perform { main.isObservable = true }
        let counter = StackObservationCounter()
        let list = try await main.perform {
            var request = FetchRequest<Ticker>()
            request.sortDescriptors = [FetchSort(key: "symbol", ascending: true)]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: main)
            try controller.performFetch()
            #expect(counter.track { controller.fetchedObjects?.count } == 3)
            return ControllerBox(controller)
        }
        _ = try await importTickers(stack, count: 2, prefix: "U")
        await recorder.wait(for: 2)
        // The controller took the merge in it, on the main queue, before the stack's notification.
        let count = await main.perform { list.controller.fetchedObjects?.count }
        #expect(count == 5)
        #expect(counter.count == 1)
        #expect(counter.allOnMainQueue)
    }
}
