import Foundation

/// What a replica's store must change after a pulled change was merged:
/// exactly the difference between what the store showed and what it must
/// show now, nothing for a change that lost.
///
/// ```swift
/// if let effect = try merger.apply(pulled, to: &state) {
///     switch effect.kind {
///     case .insert, .revive: insert(effect.objectID, effect.values, effect.added)
///     case .update: update(effect.objectID, effect.values, effect.added, effect.removed)
///     case .delete: delete(effect.objectID)
///     }
/// }
/// ```
///
/// ## Topics
/// - ``Kind``
public struct SyncEffect: Sendable, Hashable {
    /// What happens to the object.
    public enum Kind: UInt8, Sendable, Hashable {
        /// A new object: ``values`` are all its known values, ``added`` all its members.
        case insert
        /// Some of the object's values or members changed.
        case update
        /// The object is deleted.
        case delete
        /// A deleted object comes back (``SyncDeletePolicy/editWins``): like an
        /// insert, with every value and member the state knows.
        case revive
    }

    /// The object's global ID.
    public var objectID: UUID
    /// The object's entity.
    public var entity: String
    public var kind: Kind
    /// Attributes and to-one relationships to set (all known ones for an insert or revive).
    public var values: [String: SyncValue]
    /// Objects to add to each to-many relationship.
    public var added: [String: Set<UUID>]
    /// Objects to remove from each to-many relationship (always empty for an insert, revive or delete).
    public var removed: [String: Set<UUID>]

    public init(objectID: UUID, entity: String, kind: Kind, values: [String: SyncValue] = [:],
                added: [String: Set<UUID>] = [:], removed: [String: Set<UUID>] = [:]) {
        self.objectID = objectID
        self.entity = entity
        self.kind = kind
        self.values = values
        self.added = added
        self.removed = removed
    }
}
