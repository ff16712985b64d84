import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A hub in this process's memory: replicas in one process (tests, previews,
/// a demo) sync through it as through a PostgreSQL hub, with the same
/// contract — one order, idempotent pushes, purges only past every
/// replica's acknowledgement, and no further than its snapshot once it
/// holds one (``SyncEngine/publishSnapshot()``) — and nothing kept when the process ends.
///
/// It keeps the changes' values and sends no bytes, so it takes the
/// ``SyncHub`` defaults of the calls with a ``SyncCodec``: the codec is not used.
public final class InMemorySyncHub: SyncHub {
    private struct State {
        var modelVersion: String?
        var log: [SequencedChange] = []
        var nextSequence: Int64 = 1
        var sequenceOfChange: [ChangeKey: Int64] = [:]
        var acknowledged: [UUID: Int64] = [:]
        var lastPushedLocal: [UUID: Int64] = [:]
        var isReachable = true
        /// The first sequence not purged.
        var oldest: Int64 = 1
        /// The snapshot replicas re-seed from, by object ID.
        var snapshot: (sequence: Int64, objects: [UUID: SyncSnapshotObject])?
        /// Pages staged by publishers, by publisher, for one sequence each.
        var staged: [UUID: (sequence: Int64, objects: [UUID: SyncSnapshotObject])] = [:]
    }

    private struct ChangeKey: Hashable {
        var replica: UUID
        var localSequence: Int64
    }

    private let state = Locked(State())

    public init() {}

    /// Whether replicas can reach the hub; false makes every call throw `.offline`
    /// (a link cut, for tests and demos).
    public var isReachable: Bool {
        get { state.withLock { $0.isReachable } }
        set { state.withLock { $0.isReachable = newValue } }
    }

    public func register(replica: UUID, modelVersion: String) throws(SyncError) -> SyncRegistration {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            if let version = state.modelVersion, version != modelVersion {
                throw SyncError(.modelVersionMismatch, message: """
                    replica \(replica) has model version \(modelVersion), the hub \(version): migrate the replica before it syncs
                    """)
            }
            state.modelVersion = modelVersion
            let acknowledged = state.acknowledged[replica] ?? 0
            state.acknowledged[replica] = acknowledged
            return SyncRegistration(modelVersion: modelVersion, acknowledgedSequence: acknowledged,
                                    lastPushedLocalSequence: state.lastPushedLocal[replica] ?? 0,
                                    oldestSequence: state.oldest)
        }
    }

    public func push(_ changes: [SyncChange]) throws(SyncError) -> [Int64] {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            return changes.map { change in
                let key = ChangeKey(replica: change.replica, localSequence: change.localSequence)
                if let sequence = state.sequenceOfChange[key] { return sequence }
                let sequence = state.nextSequence
                state.nextSequence += 1
                state.log.append(SequencedChange(sequence: sequence, change: change))
                state.sequenceOfChange[key] = sequence
                state.lastPushedLocal[change.replica] = max(state.lastPushedLocal[change.replica] ?? 0, change.localSequence)
                return sequence
            }
        }
    }

    public func pull(after sequence: Int64, limit: Int) throws(SyncError) -> [SequencedChange] {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            if sequence + 1 < state.oldest {
                throw SyncError(.snapshotRequired, message: "changes after \(sequence) were purged from the hub; it holds \(state.oldest) on")
            }
            let start = state.log.firstIndex { $0.sequence > sequence } ?? state.log.endIndex
            return Array(state.log[start..<min(state.log.endIndex, start + max(limit, 0))])
        }
    }

    public func acknowledge(replica: UUID, through sequence: Int64) throws(SyncError) {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            state.acknowledged[replica] = max(state.acknowledged[replica] ?? 0, sequence)
        }
    }

    /// Removes the changes every registered replica has acknowledged; returns how many.
    ///
    /// With a snapshot, no further than the snapshot's sequence either, so
    /// that a replica that needs purged changes (a new one, or one whose
    /// registration was removed) re-seeds from it and pulls on; without one,
    /// as far as every replica acknowledged, and such a replica waits for a
    /// snapshot (``SyncEngine/publishSnapshot()``).
    public func purge() -> Int {
        state.withLock { state in
            guard var floor = state.acknowledged.values.min() else { return 0 }
            if let snapshot = state.snapshot { floor = min(floor, snapshot.sequence) }
            let before = state.log.count
            state.log.removeAll { $0.sequence <= floor }
            state.oldest = max(state.oldest, floor + 1)
            return before - state.log.count
        }
    }

    /// Forgets a replica (gone for good): the purge no longer waits for it.
    /// Should it come back, it registers again and, needing purged changes, re-seeds.
    public func removeReplica(_ replica: UUID) {
        state.withLock { _ = $0.acknowledged.removeValue(forKey: replica) }
    }

    // MARK: - Snapshots

    public func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws(SyncError) {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            if state.staged[publisher]?.sequence != sequence { state.staged[publisher] = (sequence, [:]) }
            for object in objects { state.staged[publisher]?.objects[object.objectID] = object }
        }
    }

    public func commitSnapshot(through sequence: Int64, publisher: UUID) throws(SyncError) -> Bool {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            let staged = state.staged.removeValue(forKey: publisher)
            guard sequence + 1 >= state.oldest else {
                throw SyncError(.staleSnapshot, message: """
                    a snapshot through sequence \(sequence) was refused: the hub purged the changes through \(state.oldest - 1)
                    """)
            }
            guard let staged, staged.sequence == sequence else {
                throw SyncError(.hubFailure, message: "no pages of a snapshot through \(sequence) were staged by replica \(publisher)")
            }
            guard sequence > state.snapshot?.sequence ?? -1 else { return false }
            state.snapshot = staged
            return true
        }
    }

    public func snapshotPage(after objectID: UUID?, limit: Int) throws(SyncError) -> SyncSnapshotPage? {
        try state.withLock { state throws(SyncError) in
            try Self.checkReachable(state)
            guard let snapshot = state.snapshot else { return nil }
            // The hub's order of object IDs: their bytes, as PostgreSQL orders a uuid.
            let after = objectID?.uuidString ?? ""
            let page = snapshot.objects.values.filter { $0.objectID.uuidString > after }
                .sorted { $0.objectID.uuidString < $1.objectID.uuidString }.prefix(max(limit, 0))
            return SyncSnapshotPage(sequence: snapshot.sequence, objects: Array(page))
        }
    }

    private static func checkReachable(_ state: State) throws(SyncError) {
        guard state.isReachable else { throw SyncError(.offline, message: "the in-memory hub is unreachable (isReachable is false)") }
    }
}
