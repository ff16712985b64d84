import Foundation

/// Two concurrent values of one property of one object — neither replica had
/// seen the other's change — handed to a ``SyncResolver``.
///
/// ```swift
/// let resolvers: [String: SyncResolver] = ["maxStock": { conflict in
///     guard case .integer(let a) = conflict.current, case .integer(let b) = conflict.incoming else { return conflict.incoming }
///     return .integer(max(a, b))
/// }]
/// ```
///
/// ``current`` is the value of the change earlier in the hub's order,
/// ``incoming`` the later one's; every replica sees the same pair in the same
/// order. For a to-many relationship the values are `.bool(true)` (the member
/// is in the relationship) and `.bool(false)` (removed), and a result of
/// `.bool(true)` keeps the member in, anything else leaves it out.
///
/// ## Topics
/// - ``SyncResolver``
public struct SyncConflict: Sendable, Hashable {
    /// The object's entity.
    public var entity: String
    /// The property in conflict.
    public var property: String
    /// The object's global ID.
    public var objectID: UUID
    /// The value of the change earlier in the hub's order.
    public var current: SyncValue
    /// The value of the change later in the hub's order.
    public var incoming: SyncValue

    public init(entity: String, property: String, objectID: UUID, current: SyncValue, incoming: SyncValue) {
        self.entity = entity
        self.property = property
        self.objectID = objectID
        self.current = current
        self.incoming = incoming
    }
}

/// Settles a ``SyncConflict`` for a property whose policy is
/// ``SyncMergePolicy/resolver(_:)``: returns the value the property gets.
///
/// It must be a deterministic function of the conflict alone — the same
/// answer on every replica, every time — or replicas diverge: no clock, no
/// randomness, no state. The result takes the incoming change's version.
public typealias SyncResolver = @Sendable (SyncConflict) -> SyncValue
