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
