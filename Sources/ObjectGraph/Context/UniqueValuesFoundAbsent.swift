/// Values of a one-key uniqueness constraint that a fetch of the
/// constraint's entity (its subentities included) just found in no row — an
/// upsert's lookup of its chunk's keys — so that the next save's check
/// (ManagedObjectContext+Uniqueness.swift) does not ask the store for them
/// again, one point lookup per inserted key.
///
/// Taken only when the store refuses a duplicate itself
/// (``DuplicateRefusingStore``): a row another writer saves with one of the
/// values after the fetch then reaches the store's unique index, the index
/// refuses the save's row, and the save's resolver checks the constraint
/// again inside the write transaction — with the store's lookup — and
/// settles the duplicates as the check would have (the merge policy's
/// collapse, or under ``MergePolicy/error`` the conflict with the row that
/// holds the values). Only the check before the save skips; the resolver's never does.
package struct UniqueValuesFoundAbsent {
    /// The entity declaring the constraint, which the fetch was of.
    package let entity: EntityDescription
    /// The constraint's one key.
    package let key: String
    /// The key's values (slot values) that no row held.
    package let values: Set<PropertyValue>

    package init(entity: EntityDescription, key: String, values: Set<PropertyValue>) {
        self.entity = entity
        self.key = key
        self.values = values
    }
}

/// A store whose save refuses a row holding the values of a uniqueness
/// constraint that another row holds (a unique index per constraint), and
/// reports it as ``ObjectGraphError/uniquenessConflict(_:)`` to the save's
/// ``SaveConflictResolver``: a context may then skip its own lookup of values
/// it knows to be absent (``UniqueValuesFoundAbsent``).
package protocol DuplicateRefusingStore: UniquenessCheckingStore {}
