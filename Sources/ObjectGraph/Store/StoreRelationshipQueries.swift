import Foundation

// Queries a context asks of its stores beyond the incremental-store contract:
// loading a relationship of many objects at once (prefetching), and finding the
// row that holds given values (uniqueness constraints). The built-in stores and
// the PostgreSQL store answer them, and a store of one's own may: for a store
// that does not, the context falls back to one relationship load per object,
// and to checking its own objects only — so a duplicate of a stored row is
// found by the store's own index at save, if it has one, and never merged.

/// A store that loads a to-many relationship of many objects in one query
/// (for ``FetchRequest/relationshipKeyPathsForPrefetching``).
public protocol RelationshipPrefetchingStore: PersistentStore {
    /// The destinations of `relationship` for each of `objectIDs` (in order for
    /// an ordered relationship), with the destinations' rows.
    ///
    /// - Complexity: One query per 500 owners.
    func prefetch(_ relationship: RelationshipDescription, forObjectsWith objectIDs: [ObjectID]) throws -> RelationshipPrefetch
}

/// What ``RelationshipPrefetchingStore/prefetch(_:forObjectsWith:)`` returns.
public struct RelationshipPrefetch: Sendable {
    /// The destinations of each owner; owners without any are left out.
    public var destinations: [ObjectID: [ObjectID]] = [:]
    /// The destinations' rows.
    public var nodes: [IncrementalStoreNode] = []

    public init(destinations: [ObjectID: [ObjectID]] = [:], nodes: [IncrementalStoreNode] = []) {
        self.destinations = destinations
        self.nodes = nodes
    }
}

/// A store that finds rows by the values of a uniqueness constraint.
public protocol UniquenessCheckingStore: PersistentStore {
    /// For each tuple of `values` (in the order of `keys`), the ID of a row of
    /// `entity` or of one of its subentities holding those values, or nil. A
    /// tuple holding nil matches nothing, as in a SQLite unique index.
    func objectIDs(of entity: EntityDescription, matching keys: [String], values: [[PropertyValue]]) throws -> [ObjectID?]
}
