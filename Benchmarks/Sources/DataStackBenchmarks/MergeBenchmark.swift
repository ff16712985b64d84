import DataStack
import Foundation

/// Task 4: the main context merges one importer save of K updated objects
/// while it has a few objects registered; the cost must not grow with K.
enum MergeBenchmark {
    struct Result: Sendable {
        var saveSize: Int
        var registered: Int
        /// Best `StackDidMerge.duration` (the merge itself, on the main queue).
        var mergeDuration: Duration
        /// Best time from the importer's `save()` call to the stack's merge notification
        /// (it includes writing the K rows).
        var wallTime: Duration
        /// Best time of the importer's `save()` itself, for comparison.
        var saveTime: Duration
        /// How many objects the merge refreshed (should equal `registered`).
        var refreshed: Int
    }

    /// Holds the objects the main context shows, as a view would.
    // @unchecked Sendable: touched only on the main context's queue, inside perform blocks.
    private final class Shown: @unchecked Sendable {
        var objects: [ManagedObject] = []
    }

    static func run(saveSize: Int, registered: Int, repetitions: Int, chunkSize: Int) async throws -> Result {
        let directory = ScratchDirectory("merge")
        let (stack, watcher) = try await DataStackBench.open(directory.file("Merge.sqlite"))
        let chunks = try await DataStackBench.insert(TickerValues.rows(saveSize), chunkSize: chunkSize, into: stack)
        try await watcher.wait(for: chunks)

        // The main context shows `registered` loaded objects.
        let main = stack.mainContext
        let shown = Shown()
        let registeredCount = try await main.perform {
            var request = FetchRequest<BenchTicker>()
            request.fetchLimit = registered
            request.returnsObjectsAsFaults = false
            shown.objects = try main.fetch(request)
            return main.registeredObjectCount
        }
        guard registeredCount == registered else {
            throw BenchError("merge: main has \(registeredCount) objects registered, expected \(registered)")
        }

        var result = Result(saveSize: saveSize, registered: registered, mergeDuration: .seconds(1_000_000),
                            wallTime: .seconds(1_000_000), saveTime: .seconds(1_000_000), refreshed: 0)
        for repetition in 1...repetitions {
            // One importer save that updates all K objects.
            let importer = stack.importerContext()
            let expected = watcher.count + 1
            let (saveStart, saveEnd) = try await importer.perform {
                var request = FetchRequest<BenchTicker>()
                request.returnsObjectsAsFaults = false
                for ticker in try importer.fetch(request) { ticker.price += Double(repetition) }
                let start = ContinuousClock.now
                try importer.save()
                return (start, ContinuousClock.now)
            }
            let merge = try await watcher.wait(for: expected)[expected - 1]
            guard merge.saved.updated == saveSize else {
                throw BenchError("merge: the save updated \(merge.saved.updated) objects, expected \(saveSize)")
            }
            result.mergeDuration = min(result.mergeDuration, merge.duration)
            result.wallTime = min(result.wallTime, merge.received - saveStart)
            result.saveTime = min(result.saveTime, saveEnd - saveStart)
            result.refreshed = merge.refreshed
        }
        await main.perform { shown.objects = [] }
        return result
    }
}
