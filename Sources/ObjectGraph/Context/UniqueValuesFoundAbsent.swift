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
    /// The key's values (slot values) that no row held: a set built only
    /// when a check reads it (a check that takes ``holders`` does not).
    package var values: Set<PropertyValue> { valueSet ?? Set(valueList) }
    private let valueSet: Set<PropertyValue>?
    private let valueList: [PropertyValue]
    /// The objects the fetch found or made, each with the key's value it
    /// found or gave it, every value once (empty when the fetcher cannot say
    /// so): inserted ones hold the ``values`` no row held, existing ones the
    /// values of their rows. When every object the save writes under the
    /// constraint is one of them, still holding its value, the check has
    /// nothing to group: their values are distinct, and none is looked up.
    package let holders: [(object: ManagedObject, value: PropertyValue)]

    package init(entity: EntityDescription, key: String, values: Set<PropertyValue>) {
        self.entity = entity
        self.key = key
        valueSet = values
        valueList = []
        holders = []
    }

    /// Values no row held as a list, every value once, and the objects that
    /// hold the key's values (see ``holders``).
    package init(entity: EntityDescription, key: String, absent: [PropertyValue],
                 holders: [(object: ManagedObject, value: PropertyValue)]) {
        self.entity = entity
        self.key = key
        valueSet = nil
        valueList = absent
        self.holders = holders
    }

    /// The same values, without the holders: a check that cannot take them looks at every object.
    var withoutHolders: UniqueValuesFoundAbsent {
        UniqueValuesFoundAbsent(entity: entity, key: key, values: values)
    }
}

/// A store whose save refuses a row holding the values of a uniqueness
/// constraint that another row holds (a unique index per constraint), and
/// reports it as ``ObjectGraphError/uniquenessConflict(_:)`` to the save's
/// ``SaveConflictResolver``: a context may then skip its own lookup of values
/// it knows to be absent (``UniqueValuesFoundAbsent``).
package protocol DuplicateRefusingStore: UniquenessCheckingStore {}
