/// Where each member of a loaded to-many sits in its slot's list of IDs, so
/// that adding or removing one member costs O(1), not a scan of the list.
///
/// A to-many slot keeps its public form, ``PropertyValue/objects(_:)`` with a
/// plain `[ObjectID]` in order. Changes of one member at a time come through
/// the inverse: `update.company = company` adds `update` to `company.updates`,
/// and building a to-many of n members that way did n scans and n copies of
/// the list. The object keeps this index beside its slots instead (see
/// ``ManagedObject/withToManyMembers(at:_:)``): built with one pass the first
/// time a member of the slot is added or removed, kept in step by those
/// changes, and forgotten whenever the slot is written any other way, so it
/// can never describe a list it was not built from.
///
/// Removing a member of an unordered to-many moves the last member into its
/// place: O(1). An ordered to-many keeps its order, so removing shifts the
/// members after it, and their positions here: O(members after it), in place.
package struct ToManyMemberIndex {
    private var positions: [ObjectID: Int]

    /// The index of `ids`; nil if an ID appears twice (only
    /// `setPrimitiveValue(_:forKey:)` can store that), which the callers
    /// then handle with a scan of the list.
    package init?(_ ids: [ObjectID]) {
        var positions: [ObjectID: Int] = [:]
        positions.reserveCapacity(ids.count)
        for (position, id) in ids.enumerated() where positions.updateValue(position, forKey: id) != nil { return nil }
        self.positions = positions
    }

    /// Appends `id` to `ids` (the list this index describes) unless it is a member.
    ///
    /// - Returns: whether it was appended.
    package mutating func append(_ id: ObjectID, to ids: inout [ObjectID]) -> Bool {
        guard positions[id] == nil else { return false }
        positions[id] = ids.count
        ids.append(id)
        return true
    }

    /// Removes `id` from `ids` (the list this index describes) if it is a member.
    ///
    /// - Parameter keepingOrder: shift the members after it (an ordered
    ///   to-many), rather than move the last one into its place.
    /// - Returns: how many members moved, or nil if `id` was not a member.
    package mutating func remove(_ id: ObjectID, from ids: inout [ObjectID], keepingOrder: Bool) -> Int? {
        guard let position = positions.removeValue(forKey: id) else { return nil }
        let last = ids.count - 1
        if keepingOrder {
            ids.remove(at: position)
            for shifted in position..<last { positions[ids[shifted]] = shifted }
            return last - position
        }
        if position != last {
            ids[position] = ids[last]
            positions[ids[position]] = position
        }
        ids.removeLast()
        return position == last ? 0 : 1
    }
}
