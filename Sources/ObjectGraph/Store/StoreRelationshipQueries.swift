import Foundation

// Queries a context asks of its stores beyond the incremental-store contract:
// loading a relationship of many objects at once (prefetching), and finding the
// row that holds given values (uniqueness constraints). The built-in stores
// answer them; for a store that does not, the context falls back to
// one relationship load per object and to checking its own objects only.

/// A store that loads a to-many relationship of many objects in one query
/// (for ``FetchRequest/relationshipKeyPathsForPrefetching``).
package protocol RelationshipPrefetchingStore: PersistentStore {
    /// The destinations of `relationship` for each of `objectIDs` (in order for
    /// an ordered relationship), with the destinations' rows.
    ///
    /// - Complexity: One query per 500 owners.
    func prefetch(_ relationship: RelationshipDescription, forObjectsWith objectIDs: [ObjectID]) throws -> RelationshipPrefetch
}

/// What ``RelationshipPrefetchingStore/prefetch(_:forObjectsWith:)`` returns.
package struct RelationshipPrefetch: Sendable {
    /// The destinations of each owner; owners without any are left out.
    package var destinations: [ObjectID: [ObjectID]] = [:]
    /// The destinations' rows.
    package var nodes: [IncrementalStoreNode] = []

    package init(destinations: [ObjectID: [ObjectID]] = [:], nodes: [IncrementalStoreNode] = []) {
        self.destinations = destinations
        self.nodes = nodes
    }
}

/// A store that finds rows by the values of a uniqueness constraint.
package protocol UniquenessCheckingStore: PersistentStore {
    /// For each tuple of `values` (in the order of `keys`), the ID of a row of
    /// `entity` or of one of its subentities holding those values, or nil. A
    /// tuple holding nil matches nothing, as in a SQLite unique index.
    func objectIDs(of entity: EntityDescription, matching keys: [String], values: [[PropertyValue]]) throws -> [ObjectID?]
}
