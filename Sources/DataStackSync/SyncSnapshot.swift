import Foundation

/// One object of a hub's snapshot: what the hub's log through the
/// snapshot's sequence says of it, as every replica that pulled that far
/// folded it — so a replica that needs changes the hub purged starts again
/// from it (``SyncEngine/publishSnapshot()``).
///
/// The snapshot holds only the *confirmed* fold (``SyncObjectState/confirmed``),
/// never the publisher's own pending changes: those reach the hub as changes.
///
/// ```swift
/// let page = try hub.snapshotPage(after: nil, limit: 500)   // nil: no snapshot
/// for object in page?.objects ?? [] { print(object.objectID, object.entity) }
/// ```
public struct SyncSnapshotObject: Sendable, Hashable {
    /// The object's global ID.
    public var objectID: UUID
    /// The object's entity.
    public var entity: String
    /// The object's state with nothing pending (``SyncObjectState/encoded()``),
    /// nil for an object known only as an alias (merged into ``survivor``).
    public var state: [UInt8]?
    /// The object this one was merged into (two replicas inserted one unique key), nil for none.
    public var survivor: UUID?
    /// The hub sequences of its inserts: the numbers chunks name it by (``SyncCodec``).
    public var numbers: [Int64]
    /// The unique keys it holds in the hub's order.
    public var keys: [String]

    public init(objectID: UUID, entity: String, state: [UInt8]?, survivor: UUID? = nil, numbers: [Int64] = [], keys: [String] = []) {
        self.objectID = objectID
        self.entity = entity
        self.state = state
        self.survivor = survivor
        self.numbers = numbers
        self.keys = keys
    }
}

/// A page of a hub's snapshot: objects in the hub's order of object IDs.
public struct SyncSnapshotPage: Sendable, Hashable {
    /// The last hub sequence the snapshot folds: a replica seeded from it pulls on after it.
    public var sequence: Int64
    /// The page's objects; fewer than asked for (or none) on the last page.
    public var objects: [SyncSnapshotObject]

    public init(sequence: Int64, objects: [SyncSnapshotObject]) {
        self.sequence = sequence
        self.objects = objects
    }
}

extension SyncHub {
    public func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        throw SyncError(.hubFailure, message: "this hub (\(Self.self)) keeps no snapshots: a snapshot cannot be published to it")
    }

    public func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool {
        throw SyncError(.hubFailure, message: "this hub (\(Self.self)) keeps no snapshots: a snapshot cannot be published to it")
    }

    public func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        throw SyncError(.hubFailure, message: "this hub (\(Self.self)) keeps no snapshots: a replica cannot re-seed from it")
    }
}

extension SyncObjectState {
    /// The state with only what the hub's log says: its confirmed fold, nothing pending.
    var confirmedOnly: SyncObjectState {
        var state = SyncObjectState(objectID: objectID, entity: entity)
        state.confirmed = confirmed
        state.effective = confirmed
        state.lastSequence = lastSequence
        return state
    }
}

extension SyncMerger {
    /// The state a re-seeded replica keeps: the snapshot's confirmed fold
    /// (none: the hub's log through the snapshot does not have the object),
    /// with the replica's own pending changes folded after it — all but
    /// those the snapshot holds already (a sequence at or below its own).
    func reseeded(_ current: SyncObjectState?, snapshot: SyncObjectState?, through sequence: Int64) -> SyncObjectState? {
        var state: SyncObjectState? = snapshot?.confirmedOnly
        for pending in current?.pending ?? [] where (pending.sequence ?? .max) > sequence {
            recordLocal(pending.change, in: &state)
            if let pushed = pending.sequence { acknowledgePushed(pending.change, sequence: pushed, in: &state) }
        }
        return state
    }
}
