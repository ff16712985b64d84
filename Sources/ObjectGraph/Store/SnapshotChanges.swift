/// Slots of an entity, as a set of bits: one word for the first 64 slots
/// (every entity of most models), more only past them.
package struct SlotMask: Hashable, Sendable {
    private var low: UInt64 = 0
    private var high: [UInt64] = []

    package init() {}

    package mutating func insert(_ slot: Int) {
        if slot < 64 {
            low |= 1 << UInt64(slot)
            return
        }
        let word = slot / 64 - 1
        while high.count <= word { high.append(0) }
        high[word] |= 1 << UInt64(slot % 64)
    }

    package func contains(_ slot: Int) -> Bool {
        if slot < 64 { return slot >= 0 && low & (1 << UInt64(slot)) != 0 }
        let word = slot / 64 - 1
        return word < high.count && high[word] & (1 << UInt64(slot % 64)) != 0
    }

    /// The slots in the mask, in ascending order.
    package var slots: [Int] {
        var result: [Int] = []
        for (offset, word) in ([low] + high).enumerated() where word != 0 {
            for bit in 0..<64 where word & (1 << UInt64(bit)) != 0 { result.append(offset * 64 + bit) }
        }
        return result
    }
}

/// What an updated object changed since the context's snapshot of its row, as
/// a context's save hands it to its store beside the object's node
/// (``SaveChangesRequest/updatedSnapshotChanges``).
///
/// When the row's version (`Z_OPT`) is still `version`, the row holds the
/// snapshot's values, so the slots outside `slots` hold in the row what the
/// node holds: a store may write only `slots` and record them as the
/// history's changed columns without reading the row again. When the version
/// differs, the save meets a version conflict and the request is resolved and
/// made again, with the snapshot the resolution read.
package struct SnapshotChanges: Sendable {
    /// The object, as the node names it.
    package let objectID: ObjectID
    /// The row version of the snapshot the slots were compared with: the node's version.
    package let version: Int64
    /// The slots whose values differ from the snapshot's.
    package let slots: SlotMask

    package init(objectID: ObjectID, version: Int64, slots: SlotMask) {
        self.objectID = objectID
        self.version = version
        self.slots = slots
    }
}

extension SaveChangesRequest {
    /// The changed slots of the updated object at `position` of
    /// ``updatedObjects``, when the context gave them for that object at
    /// the node's version; nil: the store reads the row to know.
    package func snapshotChanges(ofUpdatedAt position: Int) -> SlotMask? {
        guard position < updatedSnapshotChanges.count else { return nil }
        let changes = updatedSnapshotChanges[position]
        let node = updatedObjects[position]
        guard changes.objectID == node.objectID, changes.version == node.version else { return nil }
        return changes.slots
    }
}
