import Foundation

/// What a replica knows of one object for merging: every field's, to-many
/// member's and deletion's winning version, folded from the hub's log, and
/// the replica's own changes the log does not hold back yet.
///
/// ```swift
/// var state: SyncObjectState? = try load(objectID)       // nil: never seen
/// if let effect = try merger.apply(pulled, to: &state) { try store.apply(effect) }
/// try save(state!.encoded())
/// ```
///
/// The state keeps two folds. ``confirmed`` is the hub's log folded in
/// sequence order, the same on every replica once each has pulled as far.
/// ``effective`` is ``confirmed`` with ``pending`` folded after it — the
/// replica's own changes come after everything pulled, as they will on the
/// hub — and is what the replica's store shows. Keeping the two apart is
/// what lets a change pulled later fold *before* a pending one, as it does
/// on every other replica: when the replica's own change comes back from
/// the hub it leaves ``pending`` and folds into ``confirmed``, and then
/// ``effective`` equals ``confirmed``, as everywhere.
///
/// Fields are kept after a delete, so that an edit that wins over it
/// (``SyncDeletePolicy/editWins``) brings back every value the state knows.
///
/// ## Topics
/// - ``SyncMerger``
/// - ``encoded()``
/// - ``init(encoded:)``
public struct SyncObjectState: Sendable, Hashable {
    /// The object's global ID.
    public var objectID: UUID
    /// The object's entity.
    public var entity: String
    /// The hub's log folded in sequence order.
    public internal(set) var confirmed: Fold
    /// The replica's own changes the hub has not sent back yet, in the order made.
    public internal(set) var pending: [PendingChange]
    /// ``confirmed`` with ``pending`` folded after it: what the replica's store shows.
    public internal(set) var effective: Fold
    /// The largest hub sequence folded into ``confirmed``, 0 for none: a
    /// pulled change at or below it was folded already, and is skipped.
    public internal(set) var lastSequence: Int64

    /// An empty state: nothing folded, nothing pending.
    public init(objectID: UUID, entity: String) {
        self.objectID = objectID
        self.entity = entity
        confirmed = Fold()
        pending = []
        effective = Fold()
        lastSequence = 0
    }

    /// The effective fields, by property name.
    public var fields: [String: FieldVersion] { effective.fields }
    /// The effective to-many members' versions, by relationship name.
    public var members: [String: [UUID: MemberVersion]] { effective.members }
    /// The delete in force, nil when the object is not deleted.
    public var deletion: SyncVersion? { effective.deletion }
    /// Whether the object exists, is deleted, or is not known yet.
    public var status: Status { effective.status }

    // MARK: - Versions

    /// An attribute's or to-one relationship's value, with the change that set it.
    public struct FieldVersion: Sendable, Hashable {
        public var value: SyncValue
        public var version: SyncVersion

        public init(value: SyncValue, version: SyncVersion) {
            self.value = value
            self.version = version
        }
    }

    /// Whether an object is in a to-many relationship, with the change that added or removed it.
    public struct MemberVersion: Sendable, Hashable {
        public var isPresent: Bool
        public var version: SyncVersion

        public init(isPresent: Bool, version: SyncVersion) {
            self.isPresent = isPresent
            self.version = version
        }
    }

    /// One of the replica's own changes, with its hub sequence once a push returned it.
    public struct PendingChange: Sendable, Hashable {
        public var change: SyncChange
        /// The hub's sequence for the change, nil until a push returned it.
        public var sequence: Int64?

        public init(change: SyncChange, sequence: Int64?) {
            self.change = change
            self.sequence = sequence
        }
    }

    /// Whether an object exists.
    public enum Status: UInt8, Sendable, Hashable {
        /// Nothing but a delete, or nothing at all, was folded.
        case unknown = 0
        case alive = 1
        case deleted = 2
    }

    // MARK: - Fold

    /// The winning versions after folding some changes in order.
    public struct Fold: Sendable, Hashable {
        /// Attributes' and to-one relationships' winning versions, by property name.
        public internal(set) var fields: [String: FieldVersion] = [:]
        /// Each to-many relationship's members' winning add or remove, by relationship name.
        public internal(set) var members: [String: [UUID: MemberVersion]] = [:]
        /// The delete in force, nil when the object is not deleted.
        public internal(set) var deletion: SyncVersion?
        /// Whether an insert or an update was folded (the object exists unless deleted).
        public internal(set) var isKnown = false
        /// The largest hub sequence of an insert or update of the object, by
        /// replica: a delete concurrent with one of them loses under
        /// ``SyncDeletePolicy/editWins``.
        public internal(set) var lastEdits: [UUID: Int64] = [:]

        public init() {}

        /// Whether the object exists, is deleted, or is not known yet.
        public var status: Status { deletion != nil ? .deleted : isKnown ? .alive : .unknown }

        /// The attributes' and to-one relationships' values.
        public var values: [String: SyncValue] { fields.mapValues(\.value) }

        /// The objects in each to-many relationship (relationships without any omitted).
        public var presentMembers: [String: Set<UUID>] {
            members.compactMapValues { versions in
                let present = Set(versions.filter(\.value.isPresent).keys)
                return present.isEmpty ? nil : present
            }
        }
    }
}
