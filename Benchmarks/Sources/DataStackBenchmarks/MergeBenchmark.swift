import DataStack
import Foundation
import Synchronization

/// Task 4: the main context merges one importer save of K updated objects
/// while it has a few objects registered; the cost must not grow with K.
/// The same for a batch update of the K rows run by an importer context,
/// which reaches the main context as its save would (issue #17).
enum MergeBenchmark {
    /// How the importer changes the K rows.
    enum Change: String, Sendable {
        /// Objects fetched, changed and saved.
        case save
        /// One `BatchUpdateRequest`, no objects.
        case batchUpdate = "batch update"
    }

    struct Result: Sendable {
        var change: Change
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
        /// Best time of the same merge once the save has settled (see `steadyMerge`).
        var steadyMerge: Duration = .zero
        /// Best time, after the merge, to read one attribute of each shown
        /// object: the merge turned them into faults, and this loads them
        /// again (one query for all of them).
        var firstRead: Duration
    }

    /// Holds the objects the main context shows, as a view would.
    // @unchecked Sendable: touched only on the main context's queue, inside perform blocks.
    private final class Shown: @unchecked Sendable {
        var objects: [ManagedObject] = []
    }

    /// The best time of `mergeChanges(fromContextDidSave:)` of the importer's
    /// last save into the main context, called again and again once the save
    /// has settled, the shown objects loaded before each call.
    private static func steadyMerge(of lastSave: LastSave, into main: ManagedObjectContext, shown: Shown,
                                    repetitions: Int) async throws -> Duration {
        guard let save = lastSave.save.withLock({ $0 }) else { throw BenchError("merge: no did-save notification seen") }
        return try await main.perform {
            var best = Duration.seconds(1_000_000)
            for _ in 0..<repetitions {
                var checksum = 0.0
                for case let ticker as BenchTicker in shown.objects { checksum += ticker.price }
                guard checksum > 0 else { throw BenchError("merge: the shown objects read back no prices") }
                let start = ContinuousClock.now
                let change = main.mergeChanges(fromContextDidSave: save)
                best = min(best, ContinuousClock.now - start)
                guard change.refreshedObjectIDs.count == shown.objects.count else {
                    throw BenchError("merge: refreshed \(change.refreshedObjectIDs.count) objects, expected \(shown.objects.count)")
                }
            }
            return best
        }
    }

    /// The importer's last save, as its did-save notification carried it.
    private final class LastSave: Sendable {
        let save = Mutex<ContextDidSave?>(nil)
    }

    static func run(saveSize: Int, registered: Int, change: Change = .save, repetitions: Int, chunkSize: Int) async throws -> Result {
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

        let lastSave = LastSave()
        var result = Result(change: change, saveSize: saveSize, registered: registered, mergeDuration: .seconds(1_000_000),
                            wallTime: .seconds(1_000_000), saveTime: .seconds(1_000_000), refreshed: 0,
                            firstRead: .seconds(1_000_000))
        for repetition in 1...repetitions {
            // One importer save, or batch update, that changes all K objects.
            let importer = stack.importerContext()
            let expected = watcher.count + 1
            let (saveStart, saveEnd) = try await importer.perform {
                if change == .save {
                    var request = FetchRequest<BenchTicker>()
                    request.returnsObjectsAsFaults = false
                    for ticker in try importer.fetch(request) { ticker.price += Double(repetition) }
                }
                let observer = NotificationCenter.default.addObserver(
                    forName: ManagedObjectContext.didSaveNotification, object: importer, queue: nil) { notification in
                    lastSave.save.withLock { $0 = try? ContextDidSave(notification) }
                }
                defer { NotificationCenter.default.removeObserver(observer) }
                let start = ContinuousClock.now
                switch change {
                case .save:
                    try importer.save()
                case .batchUpdate:
                    try importer.execute(BatchUpdateRequest(entityName: BenchModel.entityName,
                                                            propertiesToUpdate: ["price": .keyPath("price") + .constant(.double(Double(repetition)))]))
                }
                return (start, ContinuousClock.now)
            }
            let merge = try await watcher.wait(for: expected)[expected - 1]
            guard merge.saved.updated == saveSize else {
                throw BenchError("merge: the save updated \(merge.saved.updated) objects, expected \(saveSize)")
            }
            let firstRead = try await main.perform {
                let start = ContinuousClock.now
                var checksum = 0.0
                for case let ticker as BenchTicker in shown.objects { checksum += ticker.price }
                guard checksum > 0 else { throw BenchError("merge: the shown objects read back no prices") }
                return ContinuousClock.now - start
            }
            result.firstRead = min(result.firstRead, firstRead)
            result.mergeDuration = min(result.mergeDuration, merge.duration)
            result.wallTime = min(result.wallTime, merge.received - saveStart)
            result.saveTime = min(result.saveTime, saveEnd - saveStart)
            result.refreshed = merge.refreshed
        }
        result.steadyMerge = try await steadyMerge(of: lastSave, into: main, shown: shown, repetitions: 10 * repetitions)
        await main.perform { shown.objects = [] }
        return result
    }
}
