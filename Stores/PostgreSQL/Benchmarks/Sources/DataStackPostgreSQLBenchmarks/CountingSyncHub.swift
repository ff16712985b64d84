import DataStackSync
import Foundation
import Synchronization

/// A hub in front of another that counts what crosses it — the changes pushed
/// and their chunks' bytes, the changes pulled — so the benchmark measures
/// traffic without touching the engine. With `notifies` false it hides the
/// inner hub's wake-up, so an engine falls back to its pull interval.
final class CountingSyncHub: SyncHub {
    struct Counts: Sendable {
        var pushes = 0
        var pushedChanges = 0
        /// The bytes of the chunks the hub stores for what was pushed
        /// (`SyncCodec.encode(_:firstSequence:)` with the engine's codec and
        /// the push's first sequence: what the PostgreSQL hub encodes).
        var pushedBytes = 0
        /// The sum of `change.encoded().count` over every pushed change (the
        /// per-change encoding, for comparison).
        var pushedChangeBytes = 0
        var pulledChanges = 0
        /// Time spent in the inner hub's `push` and `pull` (the round trips and the hub's own work).
        var pushTime = Duration.zero
        var pullTime = Duration.zero
    }

    let base: any SyncHub
    let notifies: Bool
    /// Whether pushed changes are kept (``pushed``), for the bytes task's breakdown.
    let keepsChanges: Bool
    private let state = Mutex<(counts: Counts, pushed: [SyncChange])>((Counts(), []))

    init(_ base: any SyncHub, notifies: Bool = true, keepsChanges: Bool = false) {
        self.base = base
        self.notifies = notifies
        self.keepsChanges = keepsChanges
    }

    var counts: Counts { state.withLock { $0.counts } }
    var pushed: [SyncChange] { state.withLock { $0.pushed } }

    func reset() { state.withLock { $0 = (Counts(), []) } }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration {
        try base.register(replica: replica, modelVersion: modelVersion)
    }

    func push(_ changes: [SyncChange]) throws -> [Int64] {
        try push(changes, encodedBy: .modelFree)
    }

    func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        let changeBytes = changes.reduce(0) { $0 + $1.encoded().count }
        let start = ContinuousClock.now
        let sequences = try base.push(changes, encodedBy: codec)
        let elapsed = ContinuousClock.now - start
        // The chunk the hub encoded: the same changes, codec and first sequence, before the
        // engine records the push's numbers (a push of new changes of one replica is one chunk).
        let bytes = changes.isEmpty ? 0 : try codec.encode(changes, firstSequence: sequences.first).count
        let keeps = keepsChanges
        state.withLock {
            $0.counts.pushTime += elapsed
            $0.counts.pushes += 1
            $0.counts.pushedChanges += changes.count
            $0.counts.pushedBytes += bytes
            $0.counts.pushedChangeBytes += changeBytes
            if keeps { $0.pushed += changes }
        }
        return sequences
    }

    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try pull(after: sequence, limit: limit, decodedBy: .modelFree)
    }

    func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        let start = ContinuousClock.now
        let changes = try base.pull(after: sequence, limit: limit, decodedBy: codec)
        let elapsed = ContinuousClock.now - start
        state.withLock {
            $0.counts.pulledChanges += changes.count
            $0.counts.pullTime += elapsed
        }
        return changes
    }

    func acknowledge(replica: UUID, through sequence: Int64) throws {
        try base.acknowledge(replica: replica, through: sequence)
    }

    func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        try base.putSnapshotPage(objects, through: sequence, publisher: publisher)
    }

    func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool {
        try base.commitSnapshot(through: sequence, publisher: publisher)
    }

    func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        try base.snapshotPage(after: objectID, limit: limit)
    }

    var notifiesChanges: Bool { notifies && base.notifiesChanges }

    func waitForChanges(after sequence: Int64, timeout: Duration) throws -> Bool {
        try base.waitForChanges(after: sequence, timeout: timeout)
    }
}
