import Foundation

// MARK: - Resolving optimistic-locking conflicts

extension ManagedObjectContext {
    /// Resolves version conflicts as ``mergePolicy`` says, against the rows
    /// `currentRow` gives (nil: the row is gone).
    ///
    /// Each conflicting object is brought to the store's current version; its
    /// values become what the policy chooses. Returns the objects that no longer
    /// take part in the save (rolled back, or whose row is gone).
    private func resolve(_ conflicts: [MergeConflict], currentRow: (ObjectID) -> IncrementalStoreNode?) throws -> Set<ObjectID> {
        var dropped = Set<ObjectID>()
        for conflict in conflicts {
            guard let object = registry[conflict.objectID] else { continue }
            guard let stored = currentRow(conflict.objectID) else {
                // The row is gone: there is nothing left to update or delete.
                dropped.insert(conflict.objectID)
                unsavedUpdates.remove(object)
                unsavedDeletes.remove(object)
                object.flags.subtract([.updated])
                object.flags.insert([.deleted, .inaccessible])
                continue
            }
            let mine = object.slots
            let base = object.snapshot ?? stored.values
            let properties = object.entity.slotProperties
            // A to-many the store did not load (nil) says nothing about a change.
            func storeKnows(_ index: Int) -> Bool {
                !(stored.values[index].isNull && (properties[index] as? RelationshipDescription)?.isToMany == true)
            }
            switch mergePolicy {
            case .error:
                throw ObjectGraphError.mergeConflict(conflicts)
            case .overwrite:
                break
            case .rollback:
                object.slots = stored.values
                object.flags.subtract([.updated, .deleted])
                unsavedUpdates.remove(object)
                unsavedDeletes.remove(object)
                dropped.insert(conflict.objectID)
            case .mergeByPropertyObjectTrump:
                // Start from the store's row; re-apply every property this context changed.
                var merged = stored.values
                for index in merged.indices where mine[index] != base[index] || !storeKnows(index) {
                    merged[index] = mine[index]
                }
                object.slots = merged
            case .mergeByPropertyStoreTrump:
                // Keep this context's values, except where the store changed the property.
                var merged = mine
                for index in merged.indices where storeKnows(index) && stored.values[index] != base[index] {
                    merged[index] = stored.values[index]
                }
                object.slots = merged
            }
            object.snapshot = stored.values
            object.snapshotVersion = stored.version
        }
        return dropped
    }
}

// MARK: - Resolving inside the store's transaction

/// A root context's merge policy and uniqueness constraints as a store applies
/// them, inside its write transaction, to the conflicts it meets (the
/// ``SaveConflictResolver`` contract): this is how Core Data applies a merge
/// policy, within the save, so a busy row cannot starve a save under a trump
/// policy. Made for one save; it holds the objects that save writes, as
/// resolution changes them.
final class ContextConflictResolver: SaveConflictResolver, @unchecked Sendable {
    // @unchecked Sendable: used on the saving context's queue only — a store
    // calls `resolve` from inside the `execute(_:in:)` the context's save runs
    // there (checked by `assertOnQueue()`), and the save reads `saved` after.
    private unowned let context: ManagedObjectContext
    /// The objects the save writes: less those a policy dropped, with the
    /// duplicates collapsed while resolving.
    private(set) var saved: ManagedObjectContext.SavedObjects

    init(context: ManagedObjectContext, saving saved: ManagedObjectContext.SavedObjects) {
        self.context = context
        self.saved = saved
    }

    func resolve(_ conflicts: SaveConflicts) throws -> SaveChangesRequest {
        context.assertOnQueue()
        try context.resolve(conflicts, saving: &saved)
        return context.saveRequest(for: saved)
    }
}

extension ManagedObjectContext {
    /// Resolves a store's conflicts with ``mergePolicy``: version conflicts
    /// against the rows the store holds now (no other writer can move them
    /// meanwhile), uniqueness conflicts by checking the constraints again —
    /// against rows that stay put for as long as the store's transaction —
    /// and collapsing the duplicates.
    ///
    /// - Throws: the conflicts under ``MergePolicy/error``, where they are the save's error.
    fileprivate func resolve(_ conflicts: SaveConflicts, saving saved: inout SavedObjects) throws {
        guard mergePolicy != .error else {
            if !conflicts.versionConflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts.versionConflicts) }
            // As the check before the save reports it, with the row holding the values: the
            // store's unique index names only the refused row.
            let found = try uniquenessConflictsNow()
            throw ObjectGraphError.uniquenessConflict(found.isEmpty ? conflicts.uniquenessConflicts : found)
        }
        if !conflicts.versionConflicts.isEmpty {
            let dropped = try resolve(conflicts.versionConflicts) { conflicts.currentRows[$0] }
            saved.updated.removeAll { dropped.contains($0.objectID) }
            saved.deleted.removeAll { dropped.contains($0.objectID) }
        }
        if !conflicts.uniquenessConflicts.isEmpty {
            let collapsed = try resolveUniquenessConflicts()
            // The change sets are the save: collapsing moved objects between them.
            saved = SavedObjects(inserted: unsavedInserts.objects,
                                 updated: unsavedUpdates.objects,
                                 deleted: unsavedDeletes.objects,
                                 collapsed: saved.collapsed.merging(collapsed) { $1 })
        }
    }
}
