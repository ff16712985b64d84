@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Persistent history: the updated rows' changes, grouped

extension SQLiteStore {
    /// The updated objects of a save changed the same way: one entity, one
    /// `ZCOLUMNS` value, and its rows by primary key (ascending).
    struct HistoryUpdateGroup {
        var entity: EntityDescription
        var columns: [UInt8]
        var rows: [(key: Int64, id: ObjectID)]
    }

    /// The `ACHANGE` rows a save's updated objects need, grouped by entity
    /// and changed columns, each group's rows sorted by primary key, so that
    /// the recorder can write a run of consecutive keys with one statement
    /// (``recordChangeRuns(_:as:columns:firstKey:transaction:connection:)``),
    /// as it writes inserts.
    ///
    /// Why: a statement per updated row costs SQLite a fresh seek in
    /// `ACHANGE` and its indexes each time — an upsert of rows stored in one
    /// block, whose updates all change the same columns, paid as much for
    /// their history as for the rows themselves. The changed slots of each
    /// object are those the per-row recording took: the context's snapshot
    /// changes when they name the node's version, else the row read before
    /// the save; `writtenSlots` always count.
    ///
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` for an object whose
    ///   entity has no history layout or that has no permanent ID: a save's
    ///   history must be whole.
    func historyUpdateGroups(of request: SaveChangesRequest, before: [ObjectID: IncrementalStoreNode], writtenSlots: Set<Int>,
                             permanentIDs: [ObjectID: ObjectID], layout: HistoryLayout) throws -> [HistoryUpdateGroup] {
        struct GroupKey: Hashable {
            var entity: ObjectIdentifier
            var columns: [UInt8]
        }
        var groups: [HistoryUpdateGroup] = []
        var positions: [GroupKey: Int] = [:]
        // The group of the last row, and the snapshot changes it was found by: a save's
        // updates come mostly in runs changed the same way, which need no mask built.
        var current = -1
        var currentMask: SlotMask?
        var lastEntity: (description: EntityDescription, layout: HistoryLayout.EntityLayout)?
        for (position, node) in request.updatedObjects.enumerated() {
            let id = node.objectID
            if lastEntity?.description !== id.entity {
                lastEntity = layout.entities[ObjectIdentifier(id.entity)].map { (id.entity, $0) }
            }
            guard let entity = lastEntity?.layout, let primaryKey = id.primaryKey else {
                throw PersistentStoreError(.ioFailure, url: url, message: """
                    the history cannot record \(id): no history layout for entity \(id.entity.name), or no permanent ID
                    """)
            }
            let mask = request.snapshotChanges(ofUpdatedAt: position)
            if current >= 0, let mask, mask == currentMask, groups[current].entity === id.entity {
                groups[current].rows.append((primaryKey, id))
                continue
            }
            currentMask = mask
            let changed: [Int]
            if let snapshotChanges = mask {
                // Slots without a bit set none (columnsMask); `written` slots always count.
                changed = writtenSlots.isEmpty ? snapshotChanges.slots : snapshotChanges.slots + writtenSlots.filter { !snapshotChanges.contains($0) }
            } else {
                changed = entity.changedSlots(of: node, before: before[id], written: writtenSlots) { permanentIDs[$0] ?? $0 }
            }
            let columns = entity.columnsMask(slots: changed)
            if current < 0 || groups[current].entity !== id.entity || groups[current].columns != columns {
                let key = GroupKey(entity: ObjectIdentifier(id.entity), columns: columns)
                if let found = positions[key] {
                    current = found
                } else {
                    current = groups.count
                    positions[key] = current
                    groups.append(HistoryUpdateGroup(entity: id.entity, columns: columns, rows: []))
                }
            }
            groups[current].rows.append((primaryKey, id))
        }
        for index in groups.indices where !groups[index].rows.isSorted(by: { $0.key < $1.key }) {
            groups[index].rows.sort { $0.key < $1.key }
        }
        return groups
    }
}

extension Collection {
    /// Whether the elements are in `areInIncreasingOrder`'s order already.
    fileprivate func isSorted(by areInIncreasingOrder: (Element, Element) -> Bool) -> Bool {
        zip(self, dropFirst()).allSatisfy { !areInIncreasingOrder($1, $0) }
    }
}
