import Foundation

// MARK: - Registering, inserting and deleting objects

extension ManagedObjectContext {
    /// The object registered with this ID, if any. Never performs I/O.
    public func registeredObject(for objectID: ObjectID) -> ManagedObject? {
        assertOnQueue()
        return registry[objectID]
    }

    /// The object with this ID: the registered one, or a new fault.
    ///
    /// Never performs I/O and never fails; whether the row exists is found out
    /// when the fault fires (see ``shouldDeleteInaccessibleFaults``).
    public func object(with objectID: ObjectID) -> ManagedObject {
        assertOnQueue()
        if let object = registry[objectID] { return object }
        return makeFault(for: inThisModel(objectID))
    }

    /// ``object(with:)`` for an ID the coordinator's store (or a parent
    /// context) has just returned, which is in this context's model already.
    func object(withFetched objectID: ObjectID) -> ManagedObject {
        registry[objectID] ?? makeFault(for: objectID)
    }

    /// The object with this ID, with its values loaded; throws if no such row exists.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/objectNotFound`` when neither the context nor its store has it.
    public func existingObject(with objectID: ObjectID) throws -> ManagedObject {
        assertOnQueue()
        if let object = registry[objectID] {
            if object.isFault {
                let node = try parentNode(for: objectID)
                fill(object, with: node)
                noteReadSucceeded(of: objectID)
            }
            if object.flags.contains(.inaccessible) { throw ObjectGraphError.objectNotFound(objectID) }
            return object
        }
        if objectID.isTemporaryID { throw ObjectGraphError.objectNotFound(objectID) }
        let localID = inThisModel(objectID)
        let node = try parentNode(for: localID)
        let object = makeFault(for: localID)
        fill(object, with: node)
        return object
    }

    /// The ID with its entity from this context's model. IDs of one row are
    /// equal across coordinators on one file; one that comes from a coordinator
    /// with another copy of the model is re-made here with this model's entity,
    /// so the store can map it.
    func inThisModel(_ objectID: ObjectID) -> ObjectID {
        guard let model = persistentStoreCoordinator?.managedObjectModel, objectID.entity.model !== model,
              let entity = model.entitiesByName[objectID.entityName], let store = objectID.store,
              let primaryKey = objectID.primaryKey else { return objectID }
        return ObjectID(entity: entity, store: store, primaryKey: primaryKey)
    }

    /// Registers a new object, to be saved with the next save.
    ///
    /// Calls ``ManagedObject/awakeFromInsert()`` the first time. Inserting an
    /// object that belongs to another context is a programmer error, as in Core Data.
    public func insert(_ object: ManagedObject) {
        assertOnQueue()
        if let owner = object.managedObjectContext, owner !== self {
            preconditionFailure("\(object) belongs to another context; an object lives in one context only")
        }
        if object.flags.contains(.deleted) {
            // Inserting a deleted object undoes the delete.
            object.flags.remove(.deleted)
            unsavedDeletes.remove(object)
            pendingChanges.deleted.remove(object.objectID)
            if object.flags.contains(.inserted) {
                // Inserted, deleted before any save, inserted again: pending as an insert once more.
                deletedInsertedObjectIDs.remove(object.objectID)
                unsavedInserts.insert(object)
                pendingChanges.noteInserted(object)
            }
            return
        }
        if object.flags.contains(.inserted) { return }
        let firstInsert = object.state == .new
        object.managedObjectContext = self
        if object.state == .new { object.materializeDefaults() }
        object.flags.insert(.inserted)
        registry[object.objectID] = object
        unsavedInserts.insert(object)
        pendingChanges.noteInserted(object)
        if firstInsert { object.awakeFromInsert() }
    }

    /// Marks an object for deletion at the next save and applies its
    /// relationships' delete rules: nullify and cascade now, deny at save.
    ///
    /// First every object the delete reaches through `.cascade` rules is found
    /// and told (``ManagedObject/prepareForDeletion()``) while the graph is still
    /// intact; then they are all marked deleted, and the objects that stay lose
    /// them from their inverse relationships (`.nullify`, and `.cascade` towards
    /// objects already deleted). `.noAction` leaves the other side pointing at
    /// the deleted object; `.deny` is checked when the context saves
    /// (``ManagedObject/validateForDelete()``).
    ///
    /// Deleting an object that was inserted and never saved removes it: the
    /// store never hears of it, but the context reports the deletion (in
    /// objects-did-change) and ``hasChanges`` stays true until the next save
    /// or rollback, as in Core Data.
    ///
    /// Everything the delete rules need is read before anything is marked. If
    /// a read fails, nothing is deleted (objects already told by
    /// ``ManagedObject/prepareForDeletion()`` stay), and the failure is posted and kept
    /// so that saves throw it until the object is refreshed or the context
    /// rolled back (see ``FaultFulfillmentError``).
    ///
    /// - Complexity: Iterative, whatever the depth of the cascade; the faults of
    ///   each level of it fire in one query.
    public func delete(_ object: ManagedObject) {
        assertOnQueue()
        guard object.managedObjectContext === self || object.managedObjectContext == nil else {
            preconditionFailure("\(object) belongs to another context")
        }
        let plan: DeletionPlan
        do {
            plan = try planDeletion(of: object)
        } catch {
            noteReadFailure(of: object.objectID, error, dropsChange: true)
            return
        }
        for doomed in plan.doomed { markDeleted(doomed) }
        for (inverse, deletedID, others) in plan.inverseUpdates {
            for other in others where !other.isDeleted {
                do {
                    try other.removeInverse(inverse, pointingAt: deletedID)
                } catch {
                    // The plan loaded what this reads: only a store failing
                    // in between gets here. The delete is half applied, so
                    // saves must stop until the context is rolled back.
                    noteReadFailure(of: deletedID, error, dropsChange: true)
                }
            }
        }
    }

    /// What deleting an object does, found before anything changes.
    private struct DeletionPlan {
        /// The object and everything its `.cascade` rules reach, in order.
        var doomed: [ManagedObject] = []
        /// The objects that stay and lose a deleted object from `inverse`.
        var inverseUpdates: [(inverse: RelationshipDescription, deletedID: ObjectID, others: [ManagedObject])] = []
    }

    /// Reads every object a delete reaches and every relationship its rules
    /// change, throwing on the first read that fails.
    private func planDeletion(of object: ManagedObject) throws -> DeletionPlan {
        var plan = DeletionPlan()
        var doomedIDs = Set<ObjectID>()
        var level = [object]
        while !level.isEmpty {
            fireFaults(level)
            var next: [ManagedObject] = []
            for candidate in level where !candidate.flags.contains(.deleted) && doomedIDs.insert(candidate.objectID).inserted {
                try candidate.loadValues()
                if candidate.flags.contains(.deleted) { continue }   // its row was gone
                // Told while the graph is intact, before its relationships are read:
                // what it changes there is what the rules apply to.
                candidate.prepareForDeletion()
                plan.doomed.append(candidate)
                for case let relationship as RelationshipDescription in candidate.entity.slotProperties
                where relationship.deleteRule == .cascade {
                    next.append(contentsOf: try candidate.objectIDs(for: relationship).map { self.object(with: $0) })
                }
            }
            level = next
        }
        for deleted in plan.doomed {
            for case let relationship as RelationshipDescription in deleted.entity.slotProperties
            where relationship.deleteRule == .nullify || relationship.deleteRule == .cascade {
                guard let inverse = relationship.inverseRelationship else { continue }
                let others = try deleted.objectIDs(for: relationship).filter { !doomedIDs.contains($0) }.map { self.object(with: $0) }
                for other in others where !other.isDeleted {
                    try other.loadForInverseUpdate(inverse, followingMovedToOne: false)
                }
                if !others.isEmpty { plan.inverseUpdates.append((inverse, deleted.objectID, others)) }
            }
        }
        return plan
    }

    /// Marks one object deleted, without applying delete rules.
    func markDeleted(_ object: ManagedObject) {
        let id = object.objectID
        object.managedObjectContext = self
        object.flags.insert(.deleted)
        unsavedUpdates.remove(object)
        pendingChanges.forgetUpdated(id)
        if object.flags.contains(.inserted) {
            // Never saved: the store never hears of it, but observers do.
            unsavedInserts.remove(object)
            pendingChanges.forgetInserted(object)
            pendingChanges.deleted.insert(id)
            deletedInsertedObjectIDs.insert(id)
        } else {
            unsavedDeletes.insert(object)
            pendingChanges.deleted.insert(id)
        }
        registry[id] = object
    }

    /// Records that a registered object's values changed.
    package func objectDidChange(_ object: ManagedObject) {
        if object.flags.contains(.inserted) || object.flags.contains(.deleted) { return }
        let id = object.objectID
        if !object.flags.contains(.updated) {
            object.flags.insert(.updated)
            unsavedUpdates.insert(object)
        }
        pendingChanges.noteUpdated(id)
    }

    // MARK: - Registry maintenance

    /// Drops the objects that only the registry holds and that have no changes,
    /// unless ``retainsRegisteredObjects``; then the next sweep waits until the
    /// registry has doubled, so sweeping costs O(1) per registration.
    ///
    /// - Parameter always: sweep now, even below the threshold (before the
    ///   registry is reported or walked as a whole).
    func sweepRegistry(always: Bool = false) {
        if retainsRegisteredObjects || (!always && registry.count < sweepThreshold / 2) { return }
        registry.removeAll { isKnownUniquelyReferenced(&$0) && !$0.hasChanges }
        sweepThreshold = max(1024, registry.count * 2)
    }

    /// The registered object with this ID, unless only the registry holds it
    /// and it has no changes: then it is dropped instead, as a weakly held
    /// object would already be gone. For work that should touch only the
    /// objects someone still uses (merges, refreshes).
    func registeredObjectInUse(for id: ObjectID) -> ManagedObject? {
        let retainsAll = retainsRegisteredObjects
        return registry.object(for: id) { !retainsAll && isKnownUniquelyReferenced(&$0) && !$0.hasChanges }
    }

    /// A new fault for `objectID`, registered here.
    func makeFault(for objectID: ObjectID) -> ManagedObject {
        let object = newFault(for: objectID)
        // Every caller has just looked the ID up and found nothing registered.
        registry.insertUnregistered(object, for: objectID)
        if registry.count >= sweepThreshold { sweepRegistry() }
        return object
    }

    /// A new fault for `objectID` in this context, not registered yet: the
    /// caller registers it (``makeFault(for:)``, or a fetch's single probe,
    /// ``ObjectRegistry/object(for:orRegister:)``).
    func newFault(for objectID: consuming ObjectID) -> ManagedObject {
        let object = objectID.entity.managedObjectClass.init(entity: objectID.entity, insertInto: nil)
        object.objectID = consume objectID
        object.managedObjectContext = self
        object.state = .fault
        return object
    }
}
