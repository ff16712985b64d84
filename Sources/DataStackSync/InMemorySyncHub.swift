import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A hub in this process's memory: replicas in one process (tests, previews,
/// a demo) sync through it as through a PostgreSQL hub, with the same
/// contract — one order, idempotent pushes, purges only past every
/// replica's acknowledgement — and nothing kept when the process ends.
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
                                    oldestSequence: state.log.first?.sequence ?? state.nextSequence)
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
            if let oldest = state.log.first?.sequence, sequence + 1 < oldest {
                throw SyncError(.snapshotRequired, message: "changes after \(sequence) were purged from the hub; it holds \(oldest) on")
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
    public func purge() -> Int {
        state.withLock { state in
            guard let floor = state.acknowledged.values.min() else { return 0 }
            let before = state.log.count
            state.log.removeAll { $0.sequence <= floor }
            return before - state.log.count
        }
    }

    private static func checkReachable(_ state: State) throws(SyncError) {
        guard state.isReachable else { throw SyncError(.offline, message: "the in-memory hub is unreachable (isReachable is false)") }
    }
}
