import DataStack
import DataStackSync
import Foundation

/// Task `sync-import`: the import task's DataStack import with a sync engine
/// attached and running, against the same import without one (issue #39's
/// target: the local save path unchanged, the import within 5 %).
///
/// Both import N tickers into a new stack through `performImport`, the same
/// chunks, each merged into the main context, the time running until the last
/// merge arrived. The synced stack has a ``SyncEngine`` on an
/// ``InMemorySyncHub``, registered and started before the import: it wakes
/// after every save, reads the store's history and writes its ledger (in the
/// same SQLite file) and pushes while the import goes on, as in an app. Its
/// work left after the import — the time until a `syncNow()` returns, with
/// everything pushed — is reported apart. The order of the two alternates
/// between repetitions; the best of each is reported.
enum SyncImportBenchmark {
    struct Result {
        var rows: Int
        var plain: Duration
        var synced: Duration
        /// After the synced import: until the engine had pushed every change.
        var caughtUp: Duration
    }

    static func run(rows count: Int, chunkSize: Int, repetitions: Int) async throws -> Result {
        let rows = TickerValues.rows(count)
        // An untimed pass of each warms every path up first.
        _ = try await importPlain(Array(rows.prefix(1_000)), chunkSize: chunkSize)
        _ = try await importSynced(Array(rows.prefix(1_000)), chunkSize: chunkSize)
        var plain: Duration?, synced: Duration?, caughtUp: Duration?
        for repetition in 0..<repetitions {
            func runPlain() async throws { plain = min(plain ?? .seconds(1e9), try await importPlain(rows, chunkSize: chunkSize)) }
            func runSynced() async throws {
                let (time, after) = try await importSynced(rows, chunkSize: chunkSize)
                synced = min(synced ?? .seconds(1e9), time)
                caughtUp = min(caughtUp ?? .seconds(1e9), after)
            }
            if repetition % 2 == 0 {
                try await runPlain()
                try await runSynced()
            } else {
                try await runSynced()
                try await runPlain()
            }
        }
        guard let plain, let synced, let caughtUp else { throw BenchError("sync-import: no repetition ran") }
        return Result(rows: count, plain: plain, synced: synced, caughtUp: caughtUp)
    }

    private static func importPlain(_ rows: [TickerValues], chunkSize: Int) async throws -> Duration {
        let directory = ScratchDirectory("sync-import-plain")
        let (stack, watcher) = try await DataStackBench.open(directory.file("plain.sqlite"))
        let (duration, chunks) = try await Benchmarks.time { try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack) }
        try await watcher.wait(for: chunks)
        return duration
    }

    /// The import with an engine running; returns its time and the engine's catch-up after it.
    private static func importSynced(_ rows: [TickerValues], chunkSize: Int) async throws -> (Duration, Duration) {
        let directory = ScratchDirectory("sync-import-synced")
        let (stack, watcher) = try await DataStackBench.open(directory.file("synced.sqlite"))
        let hub = InMemorySyncHub()
        let engine = try SyncEngine(stack: stack, options: SyncOptions(hub: hub))
        defer { engine.stop() }
        // Registered, and the (empty) store exported, before the clock runs.
        try await onThread { try engine.syncNow() }
        engine.start()
        let (duration, chunks) = try await Benchmarks.time { try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack) }
        try await watcher.wait(for: chunks)
        let (caughtUp, _) = try await Benchmarks.time { try await onThread { try engine.syncNow() } }
        let pushed = try hub.pull(after: 0, limit: rows.count + 1).count
        guard pushed == rows.count else { throw BenchError("sync-import: the hub holds \(pushed) changes after an import of \(rows.count)") }
        return (duration, caughtUp)
    }

    /// Runs blocking work (an engine's `syncNow()`) on a thread of its own, so
    /// the main queue, where the stack's merges arrive, keeps running.
    private static func onThread(_ body: @escaping @Sendable () throws -> Void) async throws {
        let result: Swift.Result<Void, any Error> = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Swift.Result { try body() }) }
        }
        try result.get()
    }

    static func report(_ result: Result, repetitions: Int) -> String {
        let ratio = result.synced.seconds / max(result.plain.seconds, 1e-9)
        return Report.table(
            ["sync-import: import of N through the stack (best of \(repetitions))", "no engine", "engine started (InMemorySyncHub)",
             "× (target ≤ 1.05×)", "engine's catch-up after the import"],
            [[String(result.rows), Report.milliseconds(result.plain), Report.milliseconds(result.synced),
              String(format: "%.3f×", ratio) + (ratio <= 1.05 ? " met" : " missed"), Report.milliseconds(result.caughtUp)]])
    }
}
