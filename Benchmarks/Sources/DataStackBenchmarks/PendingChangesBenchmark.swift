import DataStack
import Foundation

/// Task `pending` (issue #18's cliffs): a context over N stored tickers holds
/// 1,000 inserted and 1,000 updated objects unsaved; a fetch sorted by price
/// with a limit of 20, and a count, each timed against the same request in a
/// context without pending changes (target: ≤ 3×).
enum PendingChangesBenchmark {
    struct Result: Sendable {
        var stored: Int
        var fetchClean: Duration
        var fetchPending: Duration
        var countClean: Duration
        var countPending: Duration
    }

    /// The best `limit` by price (all with 0).
    private static func topRequest(limit: Int = 20) throws -> FetchRequest<BenchTicker> {
        var request = FetchRequest<BenchTicker>(entityName: BenchModel.entityName, predicate: try FetchPredicate(format: "volume >= 0"))
        request.sortDescriptors = [FetchSort(key: "price", ascending: false), FetchSort(key: "symbol")]
        request.fetchLimit = limit
        return request
    }

    static func run(stored count: Int, chunkSize: Int, repetitions: Int) async throws -> Result {
        let directory = ScratchDirectory("pending")
        let url = directory.file("Pending.sqlite")
        do {
            let (stack, watcher) = try await DataStackBench.open(url)
            try await watcher.wait(for: try await DataStackBench.insert(TickerValues.rows(count), chunkSize: chunkSize, into: stack))
        }
        let request = try topRequest()
        let everything = try topRequest(limit: 0)
        var result = Result(stored: count, fetchClean: .seconds(1_000_000), fetchPending: .seconds(1_000_000),
                            countClean: .seconds(1_000_000), countPending: .seconds(1_000_000))
        for _ in 0..<repetitions {
            // A fresh stack each time, so no contender finds the other's rows cached.
            let (clean, _) = try await DataStackBench.open(url)
            let plain = clean.importerContext()
            let (fetchClean, countClean, cleanTop) = try await plain.perform {
                let start = ContinuousClock.now
                let top = try plain.fetch(request).map(\.symbol)
                let fetched = ContinuousClock.now
                _ = try plain.count(for: everything)
                return (fetched - start, ContinuousClock.now - fetched, top)
            }
            let (dirty, _) = try await DataStackBench.open(url)
            let context = dirty.importerContext()
            let (fetchPending, countPending, pendingTop, counted) = try await context.perform {
                for values in TickerValues.rows(1_000) {
                    let ticker = BenchTicker(context: context)
                    ticker.assign(values)
                    ticker.symbol = "NEW-" + values.symbol
                    ticker.price = -1   // never among the best
                }
                var some = FetchRequest<BenchTicker>(entityName: BenchModel.entityName)
                some.fetchLimit = 1_000
                for ticker in try context.fetch(some) { ticker.volume += 1 }   // still matching, same order
                let start = ContinuousClock.now
                let top = try context.fetch(request).map(\.symbol)
                let fetched = ContinuousClock.now
                let counted = try context.count(for: everything)
                return (fetched - start, ContinuousClock.now - fetched, top, counted)
            }
            guard pendingTop == cleanTop, counted == count + 1_000 else {
                throw BenchError("pending: the fetch with pending changes gave \(pendingTop.prefix(3))…, \(counted) counted; expected \(cleanTop.prefix(3))…, \(count + 1_000)")
            }
            result.fetchClean = min(result.fetchClean, fetchClean)
            result.fetchPending = min(result.fetchPending, fetchPending)
            result.countClean = min(result.countClean, countClean)
            result.countPending = min(result.countPending, countPending)
        }
        return result
    }
}
