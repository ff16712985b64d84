import DataStack
import Foundation
import Synchronization

/// Task `readers` (issue #18, "readers while an importer writes"): over N
/// stored tickers, the main context and two private contexts on the stack's
/// main coordinator each fetch in a loop — the 100 highest-priced tickers,
/// loaded, every attribute read — for a fixed wall time, first with the store
/// idle, then while an importer (`performImport`, on the writer coordinator)
/// writes more rows; the window then ends when the import does, if sooner.
/// Each is measured with the store's default reader pool and with
/// ``StoreOptions/maximumReaderCount`` 1 (every read waits for the one
/// before, as with one reader connection).
enum ReadersBenchmark {
    struct Row: Sendable {
        var readers: Int
        var importing: Bool
        var window: Duration
        /// Fetches done by the main context and the two private ones.
        var reads: [Int]
        /// How long the whole import took (with an import; it may outlast the window).
        var importTime: Duration

        var readsPerSecond: [Double] { reads.map { Double($0) / max(window.seconds, 1e-9) } }
    }

    /// Set once the import finished, so the readers stop.
    private final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// The 100 highest-priced tickers, loaded.
    private static func request() -> FetchRequest<BenchTicker> {
        var request = FetchRequest<BenchTicker>(entityName: BenchModel.entityName)
        request.sortDescriptors = [FetchSort(key: "price", ascending: false), FetchSort(key: "symbol")]
        request.fetchLimit = 100
        request.returnsObjectsAsFaults = false
        return request
    }

    static func run(stored count: Int, importing importCount: Int, window: Duration, chunkSize: Int) async throws -> [Row] {
        var rows: [Row] = []
        for readers in [StoreOptions().maximumReaderCount, 1] {
            let directory = ScratchDirectory("readers")
            var options = StoreOptions.stackDefaults
            options.maximumReaderCount = readers
            let (stack, watcher) = try await DataStackBench.open(directory.file("Readers.sqlite"), options: options)
            try await watcher.wait(for: try await DataStackBench.insert(TickerValues.rows(count), chunkSize: chunkSize, into: stack))
            let contexts = [stack.mainContext,
                            ManagedObjectContext(concurrencyType: .privateQueue, coordinator: stack.mainCoordinator),
                            ManagedObjectContext(concurrencyType: .privateQueue, coordinator: stack.mainCoordinator)]
            let expected = min(100, count)
            // Once each, so every context has its connection open before the clock starts.
            for context in contexts { _ = try await fetchLoop(in: context, until: .now, stop: Flag(), expected: expected) }

            let idle = try await measure(contexts, for: window, stop: Flag(), expected: expected)
            rows.append(Row(readers: readers, importing: false, window: idle.window, reads: idle.reads, importTime: .zero))

            let done = Flag()
            let importStart = ContinuousClock.now
            let importer = Task {
                defer { done.set() }
                let values = TickerValues.rows(importCount).map { values -> TickerValues in
                    var values = values
                    values.symbol = "NEW-" + values.symbol
                    return values
                }
                let progress = try await stack.performImport(values, chunkSize: chunkSize) { values, context in
                    BenchTicker(context: context).assign(values)
                }
                return (progress.savedChunks, ContinuousClock.now - importStart)
            }
            let busy = try await measure(contexts, for: window, stop: done, expected: expected)
            let (chunks, importTime) = try await importer.value
            try await watcher.wait(for: chunks)
            rows.append(Row(readers: readers, importing: true, window: busy.window, reads: busy.reads, importTime: importTime))
        }
        return rows
    }

    /// Runs the three loops at once until `window` passed or `stop` is set; the time taken and each one's fetches.
    private static func measure(_ contexts: [ManagedObjectContext], for window: Duration, stop: Flag,
                                expected: Int) async throws -> (window: Duration, reads: [Int]) {
        let start = ContinuousClock.now
        let deadline = start + window
        let reads = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for (index, context) in contexts.enumerated() {
                group.addTask { (index, try await fetchLoop(in: context, until: deadline, stop: stop, expected: expected)) }
            }
            var reads = Array(repeating: 0, count: contexts.count)
            for try await (index, count) in group { reads[index] = count }
            return reads
        }
        return (ContinuousClock.now - start, reads)
    }

    /// Fetches on the context's queue until the deadline or `stop` (at least once); the number of fetches.
    private static func fetchLoop(in context: ManagedObjectContext, until deadline: ContinuousClock.Instant, stop: Flag,
                                  expected: Int) async throws -> Int {
        let request = request()
        return try await context.perform {
            var fetches = 0
            var checksum = Checksum()
            repeat {
                let tickers = try context.fetch(request)
                guard tickers.count == expected else {
                    throw BenchError("readers: a fetch gave \(tickers.count) tickers, expected \(expected)")
                }
                for ticker in tickers {
                    checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
                }
                fetches += 1
            } while ContinuousClock.now < deadline && !stop.isSet
            context.reset()   // the next loop fetches from the store, not from registered objects only
            return fetches
        }
    }
}
