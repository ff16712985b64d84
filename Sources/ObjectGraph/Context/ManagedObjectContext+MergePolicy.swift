import Foundation

// MARK: - Resolving optimistic-locking conflicts

extension ManagedObjectContext {
    /// Resolves conflicts as ``mergePolicy`` says, so that the save can be retried.
    ///
    /// Each conflicting object is brought to the store's current version; its
    /// values become what the policy chooses. Returns the objects that no longer
    /// take part in the save (rolled back, or whose row is gone).
    func resolve(_ conflicts: [MergeConflict], with coordinator: PersistentStoreCoordinator) throws -> Set<ObjectID> {
        coordinator.rowCache.removeRows(of: Set(conflicts.map(\.objectID)))
        return try resolve(conflicts) { id in
            do {
                return try coordinator.node(for: id, stalenessInterval: 0, in: self)
            } catch ObjectGraphError.Code.objectNotFound {
                return nil
            }
        }
    }

    /// Resolves conflicts against rows read by `currentRow` (nil: the row is
    /// gone; an error it throws ends the resolution, and the save, with it).
    func resolve(_ conflicts: [MergeConflict], currentRow: (ObjectID) throws -> IncrementalStoreNode?) throws -> Set<ObjectID> {
        var dropped = Set<ObjectID>()
        for conflict in conflicts {
            guard let object = registry[conflict.objectID] else { continue }
            guard let stored = try currentRow(conflict.objectID) else {
                // The row is gone: there is nothing left to update or delete.
                dropped.insert(conflict.objectID)
                updatedObjectsByID[conflict.objectID] = nil
                deletedObjectsByID[conflict.objectID] = nil
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
                updatedObjectsByID[conflict.objectID] = nil
                deletedObjectsByID[conflict.objectID] = nil
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

extension ManagedObjectContext {
    /// Called by a store from inside its write transaction when a save meets
    /// version conflicts: resolves them with ``mergePolicy`` against the rows
    /// the store holds now (no other writer can move them meanwhile) and returns
    /// the request to write instead, or nil to let the conflict be thrown.
    ///
    /// This is how Core Data applies a merge policy: within the save, so a busy
    /// row cannot starve a save under a trump policy.
    package func resolveConflictsDuringSave(_ conflicts: [MergeConflict],
                                            currentRows: [ObjectID: IncrementalStoreNode]) throws -> SaveChangesRequest? {
        assertOnQueue()
        guard mergePolicy != .error, var saved = savingObjects else { return nil }
        let dropped = try resolve(conflicts) { currentRows[$0] }
        saved.updated.removeAll { dropped.contains($0.objectID) }
        saved.deleted.removeAll { dropped.contains($0.objectID) }
        savingObjects = saved
        return saveRequest(for: saved)
    }
}
