import DataStack
import DataStackSync
import Foundation

/// Task `sync-import`: the import task's DataStack import with a sync engine
/// attached, against the same import without one (issue #39's target: the
/// local save path unchanged, the import within 5 %).
///
/// Three imports of N tickers into a new stack through `performImport`, the
/// same chunks, each merged into the main context, the time running until the
/// last merge arrived: with no engine; with a ``SyncEngine`` on an
/// ``InMemorySyncHub`` made and registered but not started (the save path
/// itself: what an engine changes in a save); and with the engine started,
/// which wakes after every save, reads the store's history, writes its ledger
/// (in the same SQLite file) and pushes while the import goes on, as in an
/// app. The process's CPU time over the import says how much of the
/// difference is the engine's work on the other core rather than the saves'
/// own. The engine's work left after the import — until a `syncNow()`
/// returns with everything pushed — is reported apart. The order turns
/// between repetitions; the best of each is reported.
enum SyncImportBenchmark {
    /// One way of importing, its best repetition.
    struct Variant {
        var label: String
        /// From the first chunk to the last merge into main.
        var time: Duration
        /// The process's CPU time (user + system, every thread) over the same span.
        var cpu: Duration
        /// The longest span between two merges into main (from the start, for the first):
        /// a chunk's save that waited shows here.
        var longestChunk: Duration
        /// Changes the engine had pushed when the import ended (nil: no engine running).
        var pushedDuringImport: Int?
        /// After the import: until a `syncNow()` returned with every change pushed (nil: no engine running).
        var caughtUp: Duration?
    }

    struct Result {
        var rows: Int
        var plain: Variant
        /// An engine made and registered, not started: the save path itself.
        var attached: Variant
        /// An engine started: the save path and the engine's work beside it.
        var started: Variant
    }

    private enum Mode: CaseIterable { case plain, attached, started }

    static func run(rows count: Int, chunkSize: Int, repetitions: Int) async throws -> Result {
        let rows = TickerValues.rows(count)
        // An untimed pass of each warms every path up first.
        for mode in Mode.allCases { _ = try await importRows(Array(rows.prefix(1_000)), chunkSize: chunkSize, mode: mode) }
        var best: [Mode: Variant] = [:]
        for repetition in 0..<repetitions {
            // The order turns with each repetition, so none always follows another's writes.
            let modes = Mode.allCases
            for index in modes.indices {
                let mode = modes[(index + repetition) % modes.count]
                let variant = try await importRows(rows, chunkSize: chunkSize, mode: mode)
                if best[mode].map({ variant.time < $0.time }) ?? true { best[mode] = variant }
            }
        }
        guard let plain = best[.plain], let attached = best[.attached], let started = best[.started] else {
            throw BenchError("sync-import: no repetition ran")
        }
        return Result(rows: count, plain: plain, attached: attached, started: started)
    }

    private static func importRows(_ rows: [TickerValues], chunkSize: Int, mode: Mode) async throws -> Variant {
        let directory = ScratchDirectory("sync-import")
        let (stack, watcher) = try await DataStackBench.open(directory.file("store.sqlite"))
        let hub = InMemorySyncHub()
        let engine = mode == .plain ? nil : try SyncEngine(stack: stack, options: SyncOptions(hub: hub))
        defer { engine?.stop() }
        if let engine {
            // Registered, and the (empty) store exported, before the clock runs.
            try await onThread { try engine.syncNow() }
            if mode == .started { engine.start() }
        }
        let cpuBefore = HistoryBenchmark.cpuTime()
        let start = ContinuousClock.now
        let (time, chunks) = try await Benchmarks.time { try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack) }
        try await watcher.wait(for: chunks)
        let cpu = HistoryBenchmark.cpuTime() - cpuBefore
        let arrivals = [start] + watcher.merges.map(\.received)
        let longestChunk = zip(arrivals.dropFirst(), arrivals).map { $0 - $1 }.max() ?? .zero
        switch mode {
        case .plain:
            return Variant(label: "no engine", time: time, cpu: cpu, longestChunk: longestChunk)
        case .attached:
            return Variant(label: "engine made and registered, not started", time: time, cpu: cpu, longestChunk: longestChunk)
        case .started:
            guard let engine else { throw BenchError("sync-import: no engine") }
            let pushedDuringImport = try hub.pull(after: 0, limit: rows.count + 1).count
            let (caughtUp, _) = try await Benchmarks.time { try await onThread { try engine.syncNow() } }
            let pushed = try hub.pull(after: 0, limit: rows.count + 1).count
            guard pushed == rows.count else { throw BenchError("sync-import: the hub holds \(pushed) changes after an import of \(rows.count)") }
            return Variant(label: "engine started (InMemorySyncHub)", time: time, cpu: cpu, longestChunk: longestChunk, pushedDuringImport: pushedDuringImport,
                           caughtUp: caughtUp)
        }
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
        Report.table(
            ["sync-import: import of \(result.rows) through the stack (best of \(repetitions))", "time", "× no engine (target ≤ 1.05×)",
             "CPU, all threads", "longest chunk", "changes pushed by the import's end", "engine's catch-up after it"],
            [result.plain, result.attached, result.started].map { variant in
                let ratio = variant.time.seconds / max(result.plain.time.seconds, 1e-9)
                return [variant.label, Report.milliseconds(variant.time),
                        String(format: "%.3f×", ratio) + (variant.label == result.plain.label ? "" : ratio <= 1.05 ? " met" : " missed"),
                        Report.milliseconds(variant.cpu), Report.milliseconds(variant.longestChunk), variant.pushedDuringImport.map(String.init) ?? "—",
                        variant.caughtUp.map(Report.milliseconds) ?? "—"]
            })
    }
}
