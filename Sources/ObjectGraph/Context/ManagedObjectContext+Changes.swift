@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Pending changes, rollback, reset and refresh

extension ManagedObjectContext {
    /// Reports the changes made since the last call: posts
    /// `objectsDidChangeNotification` if registered objects changed.
    ///
    /// `perform(_:)` calls it when its block ends; `save()` calls it first.
    public func processPendingChanges() {
        assertOnQueue()
        guard !pendingChanges.isEmpty else { return }
        var change = ObjectsDidChange()
        change.inserted = DeferredObjectIDSet(distinct: pendingChanges.takeInsertedIDs())
        change.updatedObjectIDs = pendingChanges.updated
        change.deletedObjectIDs = pendingChanges.deleted
        pendingChanges.removeAll()
        // Objects inserted and then deleted or merged leave nothing to report.
        if !change.isEmpty { post(.objectsDidChange(change)) }
    }

    /// Discards every unsaved change: inserted objects leave the context,
    /// deleted ones are restored, updated ones return to their last saved
    /// values. Nothing is read from the store.
    public func rollback() {
        assertOnQueue()
        var change = ObjectsDidChange()
        for object in unsavedInserts.objects {
            let id = object.objectID
            registry[id] = nil
            object.flags.formIntersection(.changeLists)
            object.managedObjectContext = nil
            change.invalidatedObjectIDs.insert(id)
        }
        for object in unsavedUpdates.objects + unsavedDeletes.objects {
            if object.flags.contains(.inaccessible) { continue }
            if var snapshot = object.snapshot { object.takeFetchedValues(&snapshot) }
            object.flags.subtract([.updated, .deleted])
            change.refreshedObjectIDs.insert(object.objectID)
        }
        unsavedInserts.removeAll()
        unsavedUpdates.remove { !$0.flags.contains(.inaccessible) }
        unsavedDeletes.remove { !$0.flags.contains(.inaccessible) }
        deletedInsertedObjectIDs = []
        uniqueValuesFoundAbsent = nil
        // Changes that could not be applied are discarded with the rest.
        readFailures = [:]
        pendingChanges.removeAll()
        if !change.isEmpty { post(.objectsDidChange(change)) }
    }

    /// Forgets every object: the context returns to its empty state and its
    /// objects must not be used again. Posts `objectsDidChangeNotification`
    /// with ``ObjectsDidChange/invalidatedAll``; observers of the objects
    /// (Observation) hear of every property they read. A context pinned to a
    /// query generation moves on: its next read pins it to the data as it is
    /// then (``setQueryGenerationFrom(_:)``).
    public func reset() {
        assertOnQueue()
        for object in registry.objects {
            // Its values are no longer to be used: observers hear of every property.
            if object.isObserved { object.tellObserversAllSlotsMayHaveChanged() }
            object.managedObjectContext = nil
            object.flags.formIntersection(.changeLists)
        }
        registry = ObjectRegistry()
        sweepThreshold = 1024
        unsavedInserts.removeAll()
        unsavedUpdates.removeAll()
        unsavedDeletes.removeAll()
        deletedInsertedObjectIDs = []
        readFailures = [:]
        faultBatches = [:]
        permanentIDsByTemporaryID = [:]
        uniqueValuesFoundAbsent = nil
        pendingChanges.removeAll()
        advanceQueryGeneration()
        var change = ObjectsDidChange()
        change.invalidatedAll = true
        post(.objectsDidChange(change))
    }

    /// Reloads an object's values (Core Data: `refresh(_:mergeChanges:)`).
    ///
    /// - Parameter mergeChanges: with false, unsaved changes are discarded and
    ///   the object turns into a fault. With true, the object takes the store's
    ///   current values and keeps its own unsaved changes on top; an object
    ///   without changes simply turns into a fault.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        assertOnQueue()
        guard object.managedObjectContext === self, !object.flags.contains(.inserted) else { return }
        let id = object.objectID
        if mergeChanges && object.hasChanges && object.state == .loaded {
            let node: IncrementalStoreNode
            do {
                node = try parentNode(for: id)
            } catch ObjectGraphError.Code.objectNotFound {
                // The row is gone: the object keeps its changes, and its save finds out.
                return
            } catch {
                // Not refreshed: the object keeps the values it has, and the failure is reported.
                noteReadFailure(of: id, error)
                return
            }
            merge(node, into: object)
            noteReadSucceeded(of: id)
            return
        }
        // Turning into a fault discards what a failed read left undone.
        readFailures[id] = nil
        if object.state == .fault { return }
        unsavedUpdates.remove(object)
        pendingChanges.forgetUpdated(id)
        if object.flags.contains(.deleted) {
            unsavedDeletes.remove(object)
            pendingChanges.deleted.remove(id)
        }
        object.flags.subtract([.updated, .deleted])
        turnIntoFaultTellingObservers(object)
        faultBatches[id] = nil
    }

    /// Turns a refreshed object into a fault. One that Observation watches is
    /// first compared with its current row, read now (one query), so that its
    /// observers hear of exactly the properties whose values the refresh
    /// changes — the store's newer values and the dropped changes — while it
    /// still turns into a fault, as any refreshed object does.
    private func turnIntoFaultTellingObservers(_ object: ManagedObject) {
        guard object.isObserved, object.state == .loaded else { return object.turnIntoFault() }
        let node: IncrementalStoreNode
        do {
            node = try parentNode(for: object.objectID)
        } catch {
            // No row to compare with (gone, or unreadable): observers hear of
            // the dropped changes only; the next read meets the failure.
            return object.turnIntoFault()
        }
        object.tellingObservers(ofRow: node.values) { object.turnIntoFaultToldAlready() }
    }

    /// Refreshes every registered object, keeping unsaved changes.
    public func refreshAllObjects() {
        assertOnQueue()
        sweepRegistry(always: true)
        for object in Array(registry.objects) { refresh(object, mergeChanges: true) }
    }

    /// Gives the objects permanent IDs now, before they are saved.
    ///
    /// Objects that already have permanent IDs are left alone. The objects stay
    /// inserted until the next save. For a child context the IDs come from the
    /// root's store, and the parents learn them too.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        assertOnQueue()
        let temporary = objects.filter { $0.objectID.isTemporaryID }
        guard !temporary.isEmpty else { return }
        guard let coordinator = persistentStoreCoordinator else {
            throw ObjectGraphError.noStore(entity: temporary[0].entity.name)
        }
        let permanent = try coordinator.obtainPermanentIDs(for: temporary.map(\.objectID))
        var mapping: [ObjectID: ObjectID] = [:]
        for (object, newID) in zip(temporary, permanent) {
            mapping[object.objectID] = newID
        }
        applyPermanentIDs(mapping)
        var ancestor = parent
        while let context = ancestor {
            context.performAndWait { context.applyPermanentIDs(mapping) }
            ancestor = context.parent
        }
    }

    /// Re-keys registered objects and relationship values from temporary to permanent IDs.
    func applyPermanentIDs(_ mapping: [ObjectID: ObjectID]) {
        for (temporaryID, permanentID) in mapping {
            permanentIDsByTemporaryID[temporaryID] = permanentID
            guard let object = registry.removeValue(forKey: temporaryID) else { continue }
            object.objectID = permanentID
            registry[permanentID] = object
        }
        for object in unsavedInserts.objects + unsavedUpdates.objects where object.entity.hasRelationships {
            object.slots = ContiguousArray(object.slots.map { $0.remappingIDs(mapping) })
        }
    }
}
