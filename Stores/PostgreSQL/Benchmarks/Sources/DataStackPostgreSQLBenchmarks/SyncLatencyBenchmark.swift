import DataStack
import DataStackSync
import Foundation
import Synchronization

/// Task `sync-latency`: how soon a save on replica A shows in replica B's main
/// context, both engines running in the background (issue #39's target: a
/// median of at most 250 ms).
///
/// Both replicas hold the watched asset; B's main context holds it too (it
/// refreshes only what it has registered). A sets its `price` to 1, 2, … with
/// one save each, reading the clock just before each `save()`; on each of B's
/// ``StackManager/didMergeNotification`` (posted on the main queue once the
/// merge is done) the benchmark reads the price in B's main context and notes
/// the time it first shows each value. A waits for B to show a value (at most
/// 10 s) before the next save.
///
/// Two ways B learns of A's push: the PostgreSQL hub's `LISTEN`/`NOTIFY`
/// wake-up, saves 20 ms apart; and the wake-up hidden (a 1 s pull interval
/// alone), each save a random 0–1 s after the last was seen, so saves do not
/// fall in step with B's polls.
enum SyncLatencyBenchmark {
    struct Result {
        var label: String
        var saves: Int
        /// seen − saved of every save B showed, sorted.
        var samples: [Duration]

        func percentile(_ fraction: Double) -> Duration {
            guard !samples.isEmpty else { return .zero }
            return samples[min(samples.count - 1, max(0, Int((Double(samples.count) * fraction).rounded(.up)) - 1))]
        }
    }

    /// What B's main context shows, touched only on the main queue (its queue).
    // @unchecked Sendable: `asset` and `last` are read and written only inside the main context's perform blocks.
    private final class Watched: @unchecked Sendable {
        var asset: ManagedObject?
        var last = 0.0
    }

    /// When B first showed each value; filled on the main queue, read by the saving thread.
    private final class Sightings: Sendable {
        let seen = Mutex<[Int: ContinuousClock.Instant]>([:])
        let signal = DispatchSemaphore(value: 0)
    }

    static func run(server: BenchServer, saves: Int, wakeUp: Bool) async throws -> Result {
        let hubURL = try server.makeDatabase()
        let a = try await SyncReplica(hubURL: hubURL, label: "latency-a", notifies: wakeUp)
        defer { a.close() }
        let b = try await SyncReplica(hubURL: hubURL, label: "latency-b", notifies: wakeUp)
        defer { b.close() }
        try a.insert([("WATCH", 0)])
        try await onThread("sync-latency setup") {
            for replica in [a, b] { try replica.engine.syncNow() }
        }
        guard let watchedID = try a.objectIDs()["WATCH"] else { throw BenchError("sync-latency: the watched asset is missing on A") }

        let main = b.stack.mainContext
        let watched = Watched()
        try await main.perform {
            let request = FetchRequest<ManagedObject>(entityName: SyncModel.entityName,
                                                      predicate: try FetchPredicate(format: "symbol == %@", "WATCH"))
            watched.asset = try main.fetch(request).first
            watched.last = (try watched.asset?.value(forKey: "price") as? Double) ?? -1
        }
        guard await main.perform({ watched.asset != nil }) else { throw BenchError("sync-latency: the watched asset is missing on B") }
        let sightings = Sightings()
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: b.stack,
                                                              queue: nil) { _ in
            // Posted on the main queue, where performAndWait runs the block in place.
            main.performAndWait {
                guard let price = try? watched.asset?.value(forKey: "price") as? Double, price != watched.last else { return }
                let now = ContinuousClock.now
                watched.last = price
                sightings.seen.withLock { seen in
                    if seen[Int(price)] == nil { seen[Int(price)] = now }
                }
                sightings.signal.signal()
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        a.engine.start()
        b.engine.start()

        let samples = try await onThread("sync-latency saves") { () throws -> [Duration] in
            // The first save, not counted, waits out both engines' first cycles.
            var samples: [Duration] = []
            for value in 0...saves {
                if wakeUp {
                    Thread.sleep(forTimeInterval: 0.02)
                } else {
                    Thread.sleep(forTimeInterval: Double.random(in: 0..<1))
                }
                let context = a.stack.importerContext()
                let saved = try context.performAndWait { () throws -> ContinuousClock.Instant in
                    try context.object(with: watchedID).setValue(Double(value + 1), forKey: "price")
                    let now = ContinuousClock.now
                    try context.save()
                    return now
                }
                let deadline = DispatchTime.now() + 10
                var shown = sightings.seen.withLock { $0[value + 1] }
                while shown == nil, sightings.signal.wait(timeout: deadline) == .success {
                    shown = sightings.seen.withLock { $0[value + 1] }
                }
                if value > 0, let shown { samples.append(shown - saved) }
            }
            return samples
        }
        return Result(label: wakeUp ? "LISTEN/NOTIFY wake-up, saves 20 ms apart" : "wake-up hidden, 1 s pull interval, saves 0–1 s apart",
                      saves: saves, samples: samples.sorted())
    }

    static func report(_ results: [Result]) -> String {
        Report.table(["sync-latency: save on A → B's main context (2 engines, PostgreSQL hub)", "saves", "seen", "median", "p99", "max",
                      "target median ≤ 250 ms"],
                     results.map { result in
                         let median = result.percentile(0.5)
                         return [result.label, String(result.saves), String(result.samples.count), Report.milliseconds(median),
                                 Report.milliseconds(result.percentile(0.99)), Report.milliseconds(result.samples.last ?? .zero),
                                 result.samples.isEmpty ? "—" : median <= .milliseconds(250) ? "met" : "missed"]
                     })
    }
}
