import DataStack
import Foundation

/// Task `upsert` (issue #17): N rows imported into a store that holds the
/// first half of them already, each existing row updated and each new one
/// inserted — raw SQLite's `INSERT … ON CONFLICT (symbol) DO UPDATE` against
/// DataStack's `performImport(_:upserting:by:key:_:)` with `symbol` unique,
/// and against one `BatchInsertRequest` of dictionaries (built before the
/// clock starts, as raw's values are) on an importer context, whose merge
/// policy (object trump) makes it an upsert.
enum UpsertBenchmark {
    struct Result: Sendable {
        var rows: Int
        var raw: Duration
        var dataStack: Duration
        /// History tracked, as with the stack's defaults (raw SQLite writes none).
        var batchInsert: Duration
        var batchInsertUntracked: Duration
    }

    static func run(rows count: Int, chunkSize: Int, repetitions: Int) async throws -> Result {
        let stored = TickerValues.rows(count / 2)
        let incoming = TickerValues.rows(count).map { values -> TickerValues in
            var changed = values
            changed.price += 1
            return changed
        }
        let expectedSum = incoming.reduce(0) { $0 + $1.price }
        var raw = Duration.seconds(1_000_000), dataStack = raw, batchInsert = raw, batchInsertUntracked = raw
        for _ in 0..<repetitions {
            let directory = ScratchDirectory("upsert")
            let db = try RawSQLite(path: directory.file("raw.sqlite").path)
            try db.makeSymbolUnique()
            try db.insert(stored, chunkSize: chunkSize)
            let start = ContinuousClock.now
            try rawUpsert(incoming, chunkSize: chunkSize, into: db)
            raw = min(raw, ContinuousClock.now - start)
            try check("raw SQLite", try db.countAndPriceSum(), count: count, sum: expectedSum)

            let (stack, watcher) = try await DataStackBench.open(directory.file("DataStack.sqlite"), model: BenchModel.make(uniqueSymbols: true))
            let first = try await seed(stored, chunkSize: chunkSize, into: stack)
            try await watcher.wait(for: first)
            let begin = ContinuousClock.now
            let progress = try await stack.performImport(incoming, chunkSize: chunkSize, upserting: BenchTicker.self, by: "symbol",
                                                         key: \.symbol) { values, ticker, _ in ticker.assign(values) }
            dataStack = min(dataStack, ContinuousClock.now - begin)
            try await watcher.wait(for: first + progress.savedChunks)
            let context = stack.importerContext()
            let read = try await context.perform {
                let tickers = try context.fetch(FetchRequest<BenchTicker>())
                return (tickers.count, tickers.reduce(0) { $0 + $1.price })
            }
            try check("DataStack", read, count: count, sum: expectedSum)

            batchInsert = min(batchInsert, try await Self.batchInsert(incoming, over: stored, at: directory.file("Batch.sqlite"),
                                                                      options: .stackDefaults, chunkSize: chunkSize, sum: expectedSum))
            var untracked = StoreOptions.stackDefaults
            untracked.persistentHistoryTracking = false
            batchInsertUntracked = min(batchInsertUntracked, try await Self.batchInsert(
                incoming, over: stored, at: directory.file("BatchUntracked.sqlite"), options: untracked, chunkSize: chunkSize, sum: expectedSum))
        }
        return Result(rows: count, raw: raw, dataStack: dataStack, batchInsert: batchInsert, batchInsertUntracked: batchInsertUntracked)
    }

    /// Raw SQLite's upsert, a function of its own so that callgrind can count
    /// it alone (`Scripts/instruction-counts.sh --upsert`): the seeding calls
    /// `insert` directly.
    @inline(never)
    static func rawUpsert(_ incoming: [TickerValues], chunkSize: Int, into db: RawSQLite) throws {
        try db.insert(incoming, chunkSize: chunkSize, upserting: true)
    }

    /// Stores `rows` before the clock starts, a save per chunk on one importer
    /// context — not through `performImport`, so that callgrind's count of the
    /// import loop's chunks (`saveChunk`) is the measured upsert's alone.
    /// Returns the number of saves.
    private static func seed(_ rows: [TickerValues], chunkSize: Int, into stack: StackManager) async throws -> Int {
        let context = stack.importerContext()
        return try await context.perform {
            var saves = 0
            for start in stride(from: 0, to: rows.count, by: chunkSize) {
                for values in rows[start..<min(start + chunkSize, rows.count)] { BenchTicker(context: context).assign(values) }
                try context.save()
                context.reset()
                saves += 1
            }
            return saves
        }
    }

    /// One `BatchInsertRequest` of `incoming` on an importer context of a stack
    /// over a store holding `stored`, timed; its rows checked afterwards.
    private static func batchInsert(_ incoming: [TickerValues], over stored: [TickerValues], at url: URL, options: StoreOptions,
                                    chunkSize: Int, sum: Double) async throws -> Duration {
        let (stack, watcher) = try await DataStackBench.open(url, model: BenchModel.make(uniqueSymbols: true), options: options)
        let saved = try await seed(stored, chunkSize: chunkSize, into: stack)
        try await watcher.wait(for: saved)
        let importer = stack.importerContext()
        let (duration, result) = try await importer.perform {
            let request = BatchInsertRequest(entityName: BenchModel.entityName, objects: incoming.map { values in
                ["symbol": values.symbol, "name": values.name, "price": values.price, "volume": values.volume, "time": values.time]
            })
            let start = ContinuousClock.now
            let result = try importer.execute(request)
            return (ContinuousClock.now - start, result)
        }
        guard result == .statusOnly else { throw BenchError("upsert: the batch insert returned \(result)") }
        let read = try await importer.perform {
            let tickers = try importer.fetch(FetchRequest<BenchTicker>())
            return (tickers.count, tickers.reduce(0) { $0 + $1.price })
        }
        try check("DataStack batch insert", read, count: incoming.count, sum: sum)
        return duration
    }

    private static func check(_ contender: String, _ read: (Int, Double), count: Int, sum: Double) throws {
        guard read.0 == count, abs(read.1 - sum) <= 1e-9 * sum else {
            throw BenchError("upsert: \(contender) holds \(read.0) rows summing to \(read.1), expected \(count) summing to \(sum)")
        }
    }
}
