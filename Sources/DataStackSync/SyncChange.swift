import Foundation

/// One replica's change to one object, as the hub keeps it: an insert, an
/// update of some of its properties, or a delete.
///
/// A change names its object by a global ID, carries only what changed —
/// attribute and to-one values, and a to-many's adds and removes, never whole
/// sets — and the bookkeeping that makes merges converge: its hybrid
/// timestamp, the replica's own number for it (so a chunk pushed twice is
/// kept once), and the hub sequence the replica had pulled when it was made
/// (so a merge tells a change that saw another from one made concurrently).
public struct SyncChange: Sendable, Hashable {
    public enum Kind: UInt8, Sendable, Hashable {
        case insert = 0
        case update = 1
        case delete = 2
    }

    /// The object's global ID.
    public var objectID: UUID
    /// The object's entity name.
    public var entity: String
    public var kind: Kind
    /// Attributes and to-one relationships set by the change (all of them, for an insert).
    public var values: [String: SyncValue]
    /// Objects added to a to-many relationship, by relationship name.
    public var added: [String: Set<UUID>]
    /// Objects removed from a to-many relationship, by relationship name.
    public var removed: [String: Set<UUID>]
    public var timestamp: HybridTimestamp
    /// The replica's own number for the change, increasing; with `timestamp.replica` it names the change.
    public var localSequence: Int64
    /// The last hub sequence the replica had pulled and applied when it made the change.
    public var baseSequence: Int64

    public init(objectID: UUID, entity: String, kind: Kind, values: [String: SyncValue] = [:],
                added: [String: Set<UUID>] = [:], removed: [String: Set<UUID>] = [:],
                timestamp: HybridTimestamp, localSequence: Int64, baseSequence: Int64) {
        self.objectID = objectID
        self.entity = entity
        self.kind = kind
        self.values = values
        self.added = added
        self.removed = removed
        self.timestamp = timestamp
        self.localSequence = localSequence
        self.baseSequence = baseSequence
    }

    /// The replica that made the change.
    public var replica: UUID { timestamp.replica }
}

/// A change as the hub ordered it: every replica applies the hub's changes in
/// `sequence` order, so every replica folds the same history.
public struct SequencedChange: Sendable, Hashable {
    /// The hub's number for the change, from 1, increasing, without reuse.
    public var sequence: Int64
    public var change: SyncChange

    public init(sequence: Int64, change: SyncChange) {
        self.sequence = sequence
        self.change = change
    }
}
