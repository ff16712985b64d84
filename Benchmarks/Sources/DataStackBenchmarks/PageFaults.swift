import Foundation
import Synchronization

/// The page faults each timed phase of the import, fetch and fault tasks
/// took, per repetition: the kernel's minor faults of the process
/// (`getrusage`), each a fresh 4 KiB page of the heap.
///
/// On this VM a minor fault costs ~3.5 µs — 8,400 of them made a fetch of
/// 100,000 objects take 88 ms where the same fetch on reused memory took
/// 59 — so a phase's time depends on whether the allocator hands it pages
/// freed by an earlier phase or new ones. The counts beside the times say
/// which a run got (Benchmarks/README.md, the eleventh pass).
enum PageFaults {
    private static let log = Mutex<[(phase: String, faults: Int, time: Duration)]>([])

    /// The process's minor page faults so far.
    static var count: Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_minflt
    }

    /// `body`'s time, its page faults logged under `phase`.
    static func time<T>(_ phase: String, _ body: () async throws -> T) async rethrows -> (Duration, T) {
        let before = count
        let result = try await Benchmarks.time(body)
        let faults = count - before
        log.withLock { $0.append((phase, faults, result.0)) }
        return result
    }

    /// Forgets what was logged (the untimed warm-up's phases).
    static func reset() {
        log.withLock { $0.removeAll() }
    }

    /// A table of the logged phases, one column per repetition, in the order
    /// they first ran: each phase's page faults and its time.
    static func table() -> String? {
        let entries = log.withLock { $0 }
        guard !entries.isEmpty else { return nil }
        var order: [String] = []
        var counts: [String: [String]] = [:]
        for entry in entries {
            if counts[entry.phase] == nil { order.append(entry.phase) }
            counts[entry.phase, default: []].append("\(entry.faults) (\(Report.milliseconds(entry.time)))")
        }
        let repetitions = counts.values.map(\.count).max() ?? 0
        let headers = ["page faults while timed (minor, 4 KiB each), and the time"] + (1...repetitions).map { "repetition \($0)" }
        return Report.table(headers, order.map { phase in
            [phase] + (0..<repetitions).map { index in counts[phase].flatMap { index < $0.count ? $0[index] : nil } ?? "—" }
        })
    }
}
