@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Merging other contexts' saves

extension ManagedObjectContext {
    /// Merges another context's save (Core Data: `mergeChanges(fromContextDidSave:)`).
    ///
    /// Refreshes the updated objects this context has registered, as
    /// ``refresh(_:mergeChanges:)`` with `true` does — objects with unsaved
    /// changes are reloaded now (in one query), keeping those changes on top;
    /// unchanged ones turn into faults that fire together, in one query, when
    /// one of them is next used; faults stay faults — and removes the deleted
    /// ones. Inserted objects are reported by ID and not materialized. Nothing else is touched, and the
    /// coordinator's cached rows for the saved objects are dropped first, so no
    /// read after the merge returns an older row — nor does the query
    /// generation of a pinned context, which moves on to the data as it is at
    /// its next read (``setQueryGenerationFrom(_:)``). Posts
    /// `objectsDidChangeNotification` with what it refreshed and removed.
    ///
    /// - Complexity: O(min(*r*, *k*)) lookups, plus one query for the touched
    ///   objects that have unsaved changes; *r* = objects registered here,
    ///   *k* = objects in the save. No store access at all when none has changes.
    @discardableResult
    public func mergeChanges(fromContextDidSave save: ContextDidSave) -> ObjectsDidChange {
        assertOnQueue()
        // The refreshed objects read the save's rows, not a generation from before it.
        advanceQueryGeneration()
        persistentStoreCoordinator?.objectsDidChange(updated: save.updatedObjectIDs, deleted: save.deletedObjectIDs)
        var change = ObjectsDidChange()
        change.inserted = save.inserted
        change.mergedSave = save

        let updated = registeredObjects(among: save.updatedObjectIDs)
        let deleted = registeredObjects(among: save.deletedObjectIDs)

        // As `refresh(_:mergeChanges: true)`: objects with unsaved changes take
        // the new row now, under their changes; unchanged ones turn into faults
        // that fire together, in one query, when one of them is next used.
        var edited: [ManagedObject] = []
        var refaulted: [ObjectID] = []
        // Unchanged objects that Observation watches: compared with their new
        // rows (read in the edited objects' query) before they turn into faults.
        var observed: [ManagedObject] = []
        for object in updated {
            change.refreshedObjectIDs.insert(object.objectID)
            guard !object.isFault else {
                // Its old values are gone and it is not loaded to compare.
                object.tellObserversAllSlotsMayHaveChanged()
                continue
            }
            change.updatedObjectIDs.insert(object.objectID)
            if object.flags.contains(.inserted) { continue }
            if object.hasChanges {
                edited.append(object)
            } else if object.isObserved {
                observed.append(object)
                refaulted.append(object.objectID)
            } else {
                object.turnIntoFault()
                refaulted.append(object.objectID)
            }
        }
        if refaulted.count > 1 {
            let batch = FaultBatch(objectIDs: refaulted)
            for id in refaulted { faultBatches[id] = batch }
        }
        if !edited.isEmpty || !observed.isEmpty {
            do {
                var nodesByID: [ObjectID: IncrementalStoreNode] = [:]
                for node in try parentNodes(for: (edited + observed).map(\.objectID)) { nodesByID[node.objectID] = node }
                for object in observed {
                    if let node = nodesByID[object.objectID] {
                        object.tellingObservers(ofRow: node.values) { object.turnIntoFaultToldAlready() }
                    } else {
                        object.turnIntoFault()
                    }
                }
                for object in edited {
                    if let node = nodesByID[object.objectID] { merge(node, into: object) }
                }
            } catch {
                // The observed objects turn into faults as the others do; with
                // no row to compare with, their observers hear of every property.
                for object in observed where !object.isFault {
                    object.tellObserversAllSlotsMayHaveChanged()
                    object.turnIntoFault()
                }
                // Not refreshed, and reported: they keep their values and their
                // snapshot, so their next save meets the newer row as a conflict
                // that the merge policy resolves. Nothing is lost or made up.
                for object in edited {
                    post(.faultFulfillmentFailed(FaultFulfillmentError(objectID: object.objectID, underlying: error)))
                }
            }
        }
        for object in deleted {
            let id = object.objectID
            registry[id] = nil
            unsavedInserts.remove(object)
            unsavedUpdates.remove(object)
            unsavedDeletes.remove(object)
            faultBatches[id] = nil
            object.flags = [.deleted]
            object.managedObjectContext = nil
            change.deletedObjectIDs.insert(id)
        }
        // Posted even when nothing registered was touched: the merged save may matter to lists.
        post(.objectsDidChange(change))
        return change
    }

    /// The registered objects in use among `ids`, walking whichever of the two is smaller.
    private func registeredObjects(among ids: Set<ObjectID>) -> [ManagedObject] {
        if ids.isEmpty || registry.isEmpty { return [] }
        let candidates = registry.count < ids.count ? registry.ids.filter(ids.contains) : Array(ids)
        return candidates.compactMap(registeredObjectInUse(for:))
    }

    /// Gives an object a newer row, keeping its unsaved changes on top
    /// (a merge, and `refresh(_:mergeChanges: true)`).
    func merge(_ node: IncrementalStoreNode, into object: ManagedObject) {
        var values = node.values
        if object.hasChanges, let base = object.snapshot {
            for index in values.indices where object.slots[index] != base[index] {
                values[index] = object.slots[index]
            }
            object.slots = values
            object.snapshot = node.values
        } else {
            // No changes to keep: the row is both, as after a fetch.
            object.takeFetchedValues(&values)
        }
        object.snapshotVersion = node.version
        object.awakeFromFetch()
    }

    // MARK: - Automatic merging

    /// Starts or stops merging saves of the parent context, or of other contexts
    /// on the same coordinator, as they happen.
    func updateAutomaticMerging() {
        automaticMergeObserver.withLock { observer in
            if let existing = observer {
                NotificationCenter.default.removeObserver(existing.token)
                observer = nil
            }
            guard automaticallyMergesChangesFromParent else { return }
            let token = NotificationCenter.default.addObserver(forName: Self.didSaveNotification, object: nil, queue: nil) { [weak self] notification in
                guard let self, let source = notification.object as? ManagedObjectContext, source !== self,
                      let save = try? ContextDidSave(notification) else { return }
                let fromParent = self.parent != nil && source === self.parent
                let fromSibling = self.parent == nil && source.parent == nil
                    && source.persistentStoreCoordinator === self.persistentStoreCoordinator
                guard fromParent || fromSibling else { return }
                self.perform { self.mergeChanges(fromContextDidSave: save) }
            }
            observer = ObserverToken(token: token)
        }
    }
}

/// A NotificationCenter registration.
// @unchecked Sendable: the token is an opaque handle that is only passed back to NotificationCenter.
struct ObserverToken: @unchecked Sendable {
    let token: any NSObjectProtocol
}
