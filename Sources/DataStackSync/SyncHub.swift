import Foundation

/// Where replicas meet: a log of changes in one order that every replica
/// pushes to and pulls from (``PostgreSQLSyncHub`` in the PostgreSQL package
/// is the one DataStack ships).
///
/// A hub never merges: it orders. Every replica folds the same ordered log
/// with the same policies, so every replica reaches the same state.
///
/// A hub that wraps another (to connect late, count, or cut links) must
/// forward every requirement: the codec and snapshot calls have defaults —
/// for hubs that keep values or keep no snapshots — that would otherwise
/// answer for the inner hub, without its codec or its snapshot.
///
/// Calls block (a sync engine makes them on its own queue) and throw
/// ``SyncError`` — `.offline` when the hub cannot be reached, so the engine
/// retries later and nothing is lost.
public protocol SyncHub: Sendable {
    /// Registers a replica (again, after a restart), checking its model: a
    /// replica whose model version differs from the hub's is refused with
    /// `.modelVersionMismatch` naming both. The first replica sets the hub's version.
    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration

    /// Appends changes to the log in the order given and returns their hub
    /// sequences, in that order. Idempotent: a change the hub holds already
    /// (same replica and local sequence) is not appended again, and its first
    /// sequence is returned.
    func push(_ changes: [SyncChange]) throws -> [Int64]

    /// The log's changes after `sequence`, in order, at most `limit` of them.
    /// Throws `.snapshotRequired` when changes after `sequence` were purged.
    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange]

    /// ``push(_:)``, with the bytes a hub stores and sends made by `codec`
    /// (``SyncCodec``: the pusher's model and the objects' numbers it knows).
    ///
    /// A hub that sends bytes encodes the changes it appends as chunks of
    /// `codec` — it may split a push into several, and encodes only changes
    /// it does not hold yet — and answers every change's sequence, as
    /// ``push(_:)`` does. The default calls ``push(_:)``: a hub that keeps
    /// values (``InMemorySyncHub``) needs no codec.
    func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64]

    /// ``pull(after:limit:)``, reading the hub's chunks with `codec`, which
    /// knows the puller's model and the objects' numbers it learned. The
    /// default calls ``pull(after:limit:)``.
    func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange]

    /// Records that a replica has applied the log through `sequence`: the hub
    /// purges only changes every registered replica has applied.
    func acknowledge(replica: UUID, through sequence: Int64) throws

    /// Whether ``waitForChanges(after:timeout:)`` waits for another replica's
    /// push (PostgreSQL's `LISTEN`), so an engine pulls as soon as there is
    /// something to pull rather than at its next interval. The default is false.
    var notifiesChanges: Bool { get }

    /// Returns true once the log has a change after `sequence`, false when
    /// `timeout` passed without one. The default only looks, without waiting.
    func waitForChanges(after sequence: Int64, timeout: Duration) throws -> Bool

    // MARK: Snapshots (SyncSnapshot.swift)

    /// Stages a page of the snapshot `publisher` makes of the log through
    /// `sequence`; a page staged again (same objects) replaces its earlier
    /// copy. Staged pages count for nothing until ``commitSnapshot(through:publisher:)``.
    /// The default throws `.hubFailure`: the hub keeps no snapshots.
    func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws

    /// Makes the pages `publisher` staged for `sequence` the hub's snapshot,
    /// in one step, when `sequence` is greater than the snapshot's the hub
    /// holds; returns false (and drops the pages) when it is not.
    /// Throws `.staleSnapshot` when the hub purged changes after `sequence`:
    /// a replica could not go on from it. The default throws `.hubFailure`.
    func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool

    /// The hub's snapshot, the objects after `objectID` (nil: from the
    /// first) in the hub's order of object IDs, at most `limit`; nil when the
    /// hub holds no snapshot. The default throws `.hubFailure`.
    func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage?
}

extension SyncHub {
    public var notifiesChanges: Bool { false }

    public func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        try push(changes)
    }

    public func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        try pull(after: sequence, limit: limit)
    }

    public func waitForChanges(after sequence: Int64, timeout: Duration) throws -> Bool {
        try !pull(after: sequence, limit: 1).isEmpty
    }
}

/// What the hub answered a replica that registered.
public struct SyncRegistration: Sendable, Hashable {
    /// The hub's model version (the replica's, once registered).
    public var modelVersion: String
    /// The last sequence this replica acknowledged, 0 for a new replica.
    public var acknowledgedSequence: Int64
    /// The last local sequence of this replica the hub holds, 0 for none:
    /// after a crash, the replica's changes up to it need not be pushed again.
    public var lastPushedLocalSequence: Int64
    /// The first sequence the hub still holds, 1 if nothing was purged.
    public var oldestSequence: Int64

    public init(modelVersion: String, acknowledgedSequence: Int64, lastPushedLocalSequence: Int64, oldestSequence: Int64) {
        self.modelVersion = modelVersion
        self.acknowledgedSequence = acknowledgedSequence
        self.lastPushedLocalSequence = lastPushedLocalSequence
        self.oldestSequence = oldestSequence
    }
}
