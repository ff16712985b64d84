import DataStack
import Foundation
import Synchronization

/// Task `history`: what persistent history and remote-change watching (on in
/// `StoreOptions.stackDefaults`) cost, and how soon a save in one process
/// reaches the main context of a stack in another.
enum HistoryBenchmark {
    static let childFlag = "--history-writer"

    struct ImportCost: Sendable {
        var rows: Int
        /// Best import time with the stack's defaults (history tracked, commits watched).
        var tracked: Duration
        /// Best import time with history tracked but no commits watched (nobody follows it).
        var trackedOnly: Duration
        /// Best import time with both turned off.
        var untracked: Duration
    }

    struct Latency: Sendable {
        var saves: Int
        /// From the other process's `save()` returning to this stack's
        /// `didMergeNotification` for it, sorted.
        var samples: [Duration]

        func percentile(_ fraction: Double) -> Duration {
            samples[min(samples.count - 1, Int((Double(samples.count) * fraction).rounded(.up)) - 1)]
        }
    }

    struct IdleCost: Sendable {
        var seconds: Double
        /// CPU time of the process while a stack with the defaults sat idle.
        var watching: Duration
        /// The same with the store's watching and tracking off.
        var notWatching: Duration
    }

    static var trackedOnlyOptions: StoreOptions {
        var options = StoreOptions.stackDefaults
        options.remoteChangeNotifications = false
        return options
    }

    static var untrackedOptions: StoreOptions {
        var options = StoreOptions.stackDefaults
        options.persistentHistoryTracking = false
        options.remoteChangeNotifications = false
        return options
    }

    // MARK: - Import cost

    /// Imports the same rows with the defaults, with history alone and with
    /// neither, in turn, best of `repetitions`.
    static func importCost(rows count: Int, chunkSize: Int, repetitions: Int) async throws -> ImportCost {
        let rows = TickerValues.rows(count)
        func importOnce(_ options: StoreOptions, _ rows: [TickerValues]) async throws -> Duration {
            let directory = ScratchDirectory("history-import")
            let (stack, watcher) = try await DataStackBench.open(directory.file("History.sqlite"), options: options)
            let start = ContinuousClock.now
            let chunks = try await DataStackBench.insert(rows, chunkSize: chunkSize, into: stack)
            let duration = ContinuousClock.now - start
            try await watcher.wait(for: chunks)
            return duration
        }
        // Untimed first use of each path.
        for options in [StoreOptions.stackDefaults, trackedOnlyOptions, untrackedOptions] {
            _ = try await importOnce(options, Array(rows.prefix(1_000)))
        }
        var tracked = Duration.seconds(1_000_000), trackedOnly = tracked, untracked = tracked
        for _ in 0..<repetitions {
            tracked = min(tracked, try await importOnce(.stackDefaults, rows))
            trackedOnly = min(trackedOnly, try await importOnce(trackedOnlyOptions, rows))
            untracked = min(untracked, try await importOnce(untrackedOptions, rows))
        }
        return ImportCost(rows: count, tracked: tracked, trackedOnly: trackedOnly, untracked: untracked)
    }

    // MARK: - Latency across processes

    /// A stack shows 10 objects while a child process saves `saves` times,
    /// `interval` apart, into the same file; each save's latency is the time
    /// from the child's `save()` returning to the stack's merge notification
    /// (both read `CLOCK_MONOTONIC`, which all processes share).
    static func latency(saves: Int, interval: Duration) async throws -> Latency {
        let directory = ScratchDirectory("history-latency")
        let url = directory.file("Shared.sqlite")
        let (stack, _) = try await DataStackBench.open(url)
        _ = try await DataStackBench.insert(TickerValues.rows(10), chunkSize: 10, into: stack)
        let shown = Shown()
        try await stack.mainContext.perform { shown.objects = try stack.mainContext.fetch(FetchRequest<BenchTicker>()) }
        defer { withExtendedLifetime(shown) {} }

        let arrivals = Mutex<[UInt64]>([])
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { note in
            let now = monotonicNanoseconds()
            guard let merge = try? StackDidMerge(note), case .otherProcess = merge.source else { return }
            arrivals.withLock { $0.append(now) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let milliseconds = Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)
        let (status, output) = try await ChildProcess.run([childFlag, url.path, String(saves), String(milliseconds)])
        guard status == 0 else { throw BenchError("history: the writer process exited with \(status): \(output)") }
        let saved = output.split(separator: "\n").compactMap { line -> UInt64? in
            let fields = line.split(separator: " ")
            return fields.count == 3 && fields[0] == "saved" ? UInt64(fields[2]) : nil
        }
        guard saved.count == saves else { throw BenchError("history: the writer reported \(saved.count) saves of \(saves)") }
        let deadline = ContinuousClock.now + .seconds(30)
        while arrivals.withLock({ $0.count }) < saves {
            guard ContinuousClock.now < deadline else {
                throw BenchError("history: \(arrivals.withLock { $0.count }) of \(saves) saves merged after 30 s")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let merged = arrivals.withLock { $0 }
        let samples = zip(saved, merged).map { Duration.nanoseconds(Int64($1) - Int64($0)) }.sorted()
        return Latency(saves: saves, samples: samples)
    }

    /// The objects the main context shows, as a view would hold them.
    // @unchecked Sendable: set and read only inside the main context's perform blocks.
    private final class Shown: @unchecked Sendable {
        var objects: [BenchTicker] = []
    }

    /// The writer process: a stack of its own on the store, `saves` importer
    /// saves, each changing the price of the 10 tickers the other process
    /// shows and inserting one; a line `saved I NANOSECONDS` after each returned.
    static func child(_ arguments: [String]) async throws {
        guard arguments.count == 3, let saves = Int(arguments[1]), let milliseconds = Int(arguments[2]) else {
            throw BenchError("usage: \(childFlag) STORE SAVES MILLISECONDS")
        }
        let (stack, _) = try await DataStackBench.open(URL(fileURLWithPath: arguments[0]))
        let rows = TickerValues.rows(saves)
        for index in 0..<saves {
            try await Task.sleep(for: .milliseconds(milliseconds))
            let importer = stack.importerContext()
            try await importer.perform {
                var shown = FetchRequest<BenchTicker>()
                shown.fetchLimit = 10
                for ticker in try importer.fetch(shown) { ticker.price += 1 }
                BenchTicker(context: importer).assign(rows[index])
                try importer.save()
            }
            FileHandle.standardOutput.write(Data("saved \(index) \(monotonicNanoseconds())\n".utf8))
        }
    }

    // MARK: - Idle cost

    /// CPU time the process uses while a stack sits idle for `seconds`, with
    /// the defaults and with watching off.
    static func idleCost(seconds: Double) async throws -> IdleCost {
        func measure(_ options: StoreOptions) async throws -> Duration {
            let directory = ScratchDirectory("history-idle")
            let (stack, _) = try await DataStackBench.open(directory.file("Idle.sqlite"), options: options)
            try await Task.sleep(for: .milliseconds(300))   // setup's own work settles
            let start = cpuTime()
            try await Task.sleep(for: .seconds(seconds))
            let used = cpuTime() - start
            withExtendedLifetime(stack) {}
            return used
        }
        return IdleCost(seconds: seconds, watching: try await measure(.stackDefaults), notWatching: try await measure(untrackedOptions))
    }

    // MARK: - Clocks

    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// User and system CPU time of this process so far.
    static func cpuTime() -> Duration {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return .seconds(Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec))
            + .microseconds(Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec))
    }
}
