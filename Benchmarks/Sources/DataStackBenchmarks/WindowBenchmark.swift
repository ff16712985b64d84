import DataStack
import Foundation

/// Task `window` (issue #18's cliffs): a fetched results controller on the
/// main context shows the 10 highest-priced tickers while N are imported in
/// chunks; the time its updates take on the main queue is the merges' total
/// `StackDidMerge.duration` (the controller follows each merge inside it)
/// less the same import's without the controller.
enum WindowBenchmark {
    struct Result: Sendable {
        var rows: Int
        var merges: Int
        var withoutList: Duration
        var withList: Duration
        var listChanges: Int
    }

    /// Counts the changes the controller delivers; touched only on the main context's queue.
    private final class Counter: FetchedResultsControllerDelegate, @unchecked Sendable {
        typealias Result = BenchTicker
        var changes = 0
        func controller(_ controller: FetchedResultsController<BenchTicker>, didChangeContentWith change: FetchedResultsChange) {
            changes += 1
        }
    }

    /// Holds the controller and its delegate for the run; touched only on the main context's queue.
    private final class Panel: @unchecked Sendable {
        var controller: FetchedResultsController<BenchTicker>?
        let counter = Counter()
    }

    static func run(rows count: Int, chunkSize: Int) async throws -> Result {
        let rows = TickerValues.rows(count)
        var totals: [Bool: (Duration, Int, Int)] = [:]
        for withList in [false, true] {
            let directory = ScratchDirectory("window")
            let (stack, watcher) = try await DataStackBench.open(directory.file("Window.sqlite"))
            let main = stack.mainContext
            let panel = Panel()
            if withList {
                try await main.perform {
                    var request = FetchRequest<BenchTicker>()
                    request.sortDescriptors = [FetchSort(key: "price", ascending: false), FetchSort(key: "symbol")]
                    request.fetchLimit = 10
                    let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: main)
                    controller.delegate = panel.counter
                    try controller.performFetch()
                    panel.controller = controller
                }
            }
            let chunks = try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack)
            let merges = try await watcher.wait(for: chunks)
            let total = merges.reduce(Duration.zero) { $0 + $1.duration }
            let (shown, changes) = await main.perform { (panel.controller?.fetchedObjects?.count ?? 0, panel.counter.changes) }
            if withList {
                guard shown == min(10, count), changes > 0 else {
                    throw BenchError("window: the list shows \(shown) tickers after \(changes) changes")
                }
            }
            await main.perform { panel.controller = nil }
            totals[withList] = (total, changes, merges.count)
        }
        return Result(rows: count, merges: totals[true]?.2 ?? 0, withoutList: totals[false]?.0 ?? .zero,
                      withList: totals[true]?.0 ?? .zero, listChanges: totals[true]?.1 ?? 0)
    }
}
