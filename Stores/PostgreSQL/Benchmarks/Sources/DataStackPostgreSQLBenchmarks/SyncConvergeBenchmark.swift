import DataStack
import DataStackSync
import Foundation

/// Task `sync-converge`: how long two replicas that each made N edits offline
/// take to converge once they are linked back to the hub (issue #39's target:
/// 2 × 10,000 edits in at most 10 s).
///
/// Replica A inserts a base set of N/2 assets and both sync, so both hold it.
/// Then, engines not running (offline), each replica makes N edits in saves of
/// 1,000: N/2 inserts of assets of its own, and N/2 updates of the base set —
/// A sets every base asset's `price`; B sets the `price` of the first half
/// (the same objects and attribute as A: the merge keeps one) and the `name`
/// of the second half (the same objects as A, another attribute: both are
/// kept). The time runs from the first `syncNow()` after that to the end of the
/// last round (A then B) that moved anything; one more round, which must be
/// quiet, confirms it, and the two replicas' dumps must be equal.
enum SyncConvergeBenchmark {
    struct Result {
        var edits: Int
        var base: Int
        /// Local saves of the offline edits, both replicas.
        var offlineEdits: Duration
        /// From link-back to the end of the last round that pushed or pulled a change.
        var converged: Duration
        /// ``converged`` plus the confirming quiet round.
        var confirmed: Duration
        var rounds: Int
        var pushedChanges: Int
        var pulledChanges: Int
        var pushedBytes: Int
        var objects: Int
        /// Each `syncNow()` of the link-back, in order: "A 2.1 s" …
        var calls: [String]
        /// Of ``confirmed``: time inside the hub's push and pull, both replicas.
        var pushTime: Duration
        var pullTime: Duration
    }

    static func run(server: BenchServer, edits: Int) async throws -> Result {
        let hubURL = try server.makeDatabase()
        let a = try await SyncReplica(hubURL: hubURL, label: "converge-a")
        defer { a.close() }
        let b = try await SyncReplica(hubURL: hubURL, label: "converge-b")
        defer { b.close() }
        return try await onThread("sync-converge") { try measure(a, b, edits: edits) }
    }

    private static func measure(_ a: SyncReplica, _ b: SyncReplica, edits: Int) throws -> Result {
        let base = edits / 2
        let inserts = edits - base
        try a.insert((0..<base).map { ("S\($0)", $0) })
        for replica in [a, b, a] { try replica.engine.syncNow() }
        guard try a.dump() == b.dump() else { throw BenchError("sync-converge: the replicas differ after sharing the base set") }

        // Offline: the engines are not running; every save stays local.
        let offlineStart = ContinuousClock.now
        try a.insert((0..<inserts).map { ("A\($0)", base + $0) })
        try a.update("price", (0..<base).map { ("S\($0)", Double($0) + 1_000.5) })
        try b.insert((0..<inserts).map { ("B\($0)", base + inserts + $0) })
        try b.update("price", (0..<(base / 2)).map { ("S\($0)", Double($0) + 2_000.25) })
        try b.update("name", ((base / 2)..<base).map { ("S\($0)", "Renamed by B \($0)") })
        let offlineEdits = ContinuousClock.now - offlineStart

        // Link back: rounds of A then B until a round moves nothing.
        a.hub.reset()
        b.hub.reset()
        let start = ContinuousClock.now
        var lastProgress = start
        var rounds = 0
        var calls: [String] = []
        while true {
            let before = (a.hub.counts, b.hub.counts)
            for (name, replica) in [("A", a), ("B", b)] {
                let callStart = ContinuousClock.now
                try replica.engine.syncNow()
                calls.append("\(name) \(Report.milliseconds(ContinuousClock.now - callStart))")
            }
            rounds += 1
            let after = (a.hub.counts, b.hub.counts)
            let moved = after.0.pushedChanges - before.0.pushedChanges + after.1.pushedChanges - before.1.pushedChanges
                + after.0.pulledChanges - before.0.pulledChanges + after.1.pulledChanges - before.1.pulledChanges
            if moved == 0 { break }
            lastProgress = ContinuousClock.now
            guard rounds < 20 else { throw BenchError("sync-converge: still moving changes after 20 rounds") }
        }
        let confirmed = ContinuousClock.now - start

        let dumpA = try a.dump()
        let dumpB = try b.dump()
        guard dumpA == dumpB else {
            let differing = zip(dumpA, dumpB).first { $0 != $1 }
            throw BenchError("sync-converge: the replicas did not converge: \(dumpA.count) and \(dumpB.count) assets; first difference: "
                             + "\(differing.map { "\($0.0) ≠ \($0.1)" } ?? "in the count")")
        }
        let expected = base + 2 * inserts
        guard dumpA.count == expected else { throw BenchError("sync-converge: \(dumpA.count) assets, expected \(expected)") }
        // Both of the concurrent edits of different attributes survive.
        guard dumpA.contains(where: { $0.contains("name=Renamed by B \(base - 1) ") && $0.contains("price=\(Double(base - 1) + 1_000.5) ") })
                || base < 2 else {
            throw BenchError("sync-converge: asset S\(base - 1) lost one of its two concurrent edits")
        }
        let counts = (a.hub.counts, b.hub.counts)
        return Result(edits: edits, base: base, offlineEdits: offlineEdits, converged: lastProgress - start, confirmed: confirmed,
                      rounds: rounds, pushedChanges: counts.0.pushedChanges + counts.1.pushedChanges,
                      pulledChanges: counts.0.pulledChanges + counts.1.pulledChanges,
                      pushedBytes: counts.0.pushedBytes + counts.1.pushedBytes, objects: dumpA.count, calls: calls,
                      pushTime: counts.0.pushTime + counts.1.pushTime, pullTime: counts.0.pullTime + counts.1.pullTime)
    }

    static func report(_ result: Result) -> String {
        let seconds = result.converged.seconds
        return Report.table(
            ["sync-converge: 2 replicas × N offline edits, PostgreSQL hub", "N per replica", "offline saves (both)",
             "link-back → converged", "+ quiet round", "rounds", "changes pushed", "changes pulled", "bytes pushed", "target ≤ 10 s"],
            [["syncNow() A then B until quiet; dumps equal (\(result.objects) assets)", String(result.edits),
              Report.milliseconds(result.offlineEdits), Report.milliseconds(result.converged), Report.milliseconds(result.confirmed),
              String(result.rounds), String(result.pushedChanges), String(result.pulledChanges), String(result.pushedBytes),
              seconds <= 10 ? "met" : String(format: "missed (%.1f×)", seconds / 10)]])
            + "\nEach syncNow() of the link-back: " + result.calls.joined(separator: ", ")
            + "\nOf which in the hub's push: \(Report.milliseconds(result.pushTime)), pull: \(Report.milliseconds(result.pullTime)) "
            + "(the rest: scanning local history, the ledger, applying pulled changes)"
    }
}
