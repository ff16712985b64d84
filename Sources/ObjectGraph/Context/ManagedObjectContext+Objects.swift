import Foundation

// MARK: - Registering, inserting and deleting objects

extension ManagedObjectContext {
    /// The object registered with this ID, if any. Never performs I/O.
    public func registeredObject(for objectID: ObjectID) -> ManagedObject? {
        assertOnQueue()
        return registry[objectID]?.object
    }

    /// The object with this ID: the registered one, or a new fault.
    ///
    /// Never performs I/O and never fails; whether the row exists is found out
    /// when the fault fires (see ``shouldDeleteInaccessibleFaults``).
    public func object(with objectID: ObjectID) -> ManagedObject {
        assertOnQueue()
        if let object = registry[objectID]?.object { return object }
        let object = makeFault(for: objectID)
        return object
    }

    /// The object with this ID, with its values loaded; throws if no such row exists.
    ///
    /// - Throws: ``ObjectGraphError/objectNotFound(_:)`` when neither the context nor its store has it.
    public func existingObject(with objectID: ObjectID) throws -> ManagedObject {
        assertOnQueue()
        if let object = registry[objectID]?.object {
            if object.isFault {
                let node = try parentNode(for: objectID)
                fill(object, with: node)
            }
            if object.flags.contains(.inaccessible) { throw ObjectGraphError.objectNotFound(objectID) }
            return object
        }
        if objectID.isTemporaryID { throw ObjectGraphError.objectNotFound(objectID) }
        let node = try parentNode(for: objectID)
        let object = makeFault(for: objectID)
        fill(object, with: node)
        return object
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
            deletedObjectsByID[object.objectID] = nil
            pendingChanges.deleted.remove(object.objectID)
            if !object.flags.contains(.inserted) { return }
        }
        if object.flags.contains(.inserted) { return }
        let firstInsert = object.state == .new
        object.managedObjectContext = self
        if object.state == .new { object.materializeDefaults() }
        object.flags.insert([.inserted, .pendingChange])
        registry[object.objectID] = Registration(object, strong: true)
        insertedObjectsByID[object.objectID] = object
        pendingChanges.inserted.insert(object.objectID)
        if firstInsert { object.awakeFromInsert() }
    }

    /// Marks an object for deletion at the next save and applies its
    /// relationships' delete rules: nullify and cascade now, deny at save.
    ///
    /// Deleting an object that was inserted and never saved simply removes it.
    public func delete(_ object: ManagedObject) {
        assertOnQueue()
        guard object.managedObjectContext === self || object.managedObjectContext == nil else {
            preconditionFailure("\(object) belongs to another context")
        }
        var work = [object]
        while let next = work.popLast() {
            guard !next.flags.contains(.deleted) else { continue }
            next.fireFault()
            next.prepareForDeletion()
            markDeleted(next)
            for case let relationship as RelationshipDescription in next.entity.slotProperties {
                switch relationship.deleteRule {
                case .cascade:
                    let related = next.relatedIDs(relationship).map { self.object(with: $0) }
                    for destination in related {
                        if let inverse = relationship.inverseRelationship {
                            destination.removeInverse(inverse, pointingAt: next.objectID)
                        }
                    }
                    work.append(contentsOf: related)
                case .nullify:
                    guard let inverse = relationship.inverseRelationship else { continue }
                    for id in next.relatedIDs(relationship) {
                        self.object(with: id).removeInverse(inverse, pointingAt: next.objectID)
                    }
                case .deny, .noAction:
                    continue
                }
            }
        }
    }

    private func markDeleted(_ object: ManagedObject) {
        let id = object.objectID
        object.managedObjectContext = self
        object.flags.insert([.deleted, .pendingChange])
        updatedObjectsByID[id] = nil
        pendingChanges.updated.remove(id)
        if object.flags.contains(.inserted) {
            // Never saved: the store never hears of it.
            insertedObjectsByID[id] = nil
            pendingChanges.inserted.remove(id)
        } else {
            deletedObjectsByID[id] = object
            pendingChanges.deleted.insert(id)
        }
        registry[id] = Registration(object, strong: true)
    }

    /// Records that a registered object's values changed.
    package func objectDidChange(_ object: ManagedObject) {
        object.flags.insert(.pendingChange)
        if object.flags.contains(.inserted) || object.flags.contains(.deleted) { return }
        let id = object.objectID
        if !object.flags.contains(.updated) {
            object.flags.insert(.updated)
            updatedObjectsByID[id] = object
            registry[id] = Registration(object, strong: true)
        }
        pendingChanges.updated.insert(id)
    }

    // MARK: - Registry maintenance

    /// Registers an object created by this context (a fault or a fetched object).
    func register(_ object: ManagedObject) {
        registry[object.objectID] = Registration(object, strong: retainsRegisteredObjects)
        if registry.count >= sweepThreshold { sweepRegistry() }
    }

    /// Removes the entries of objects that no longer exist.
    func sweepRegistry() {
        if registry.count < sweepThreshold / 2 { return }
        registry = registry.filter { $0.value.object != nil }
        sweepThreshold = max(1024, registry.count * 2)
    }

    /// Turns strong references to unchanged objects on or off.
    func retainAllRegisteredObjects(_ retain: Bool) {
        performAndWait {
            for (id, registration) in registry {
                guard let object = registration.object else { continue }
                registry[id] = Registration(object, strong: retain || object.hasChanges)
            }
        }
    }

    /// Makes an unchanged object weakly held again after its changes are saved or discarded.
    func releaseIfUnchanged(_ object: ManagedObject) {
        registry[object.objectID] = Registration(object, strong: retainsRegisteredObjects || object.hasChanges)
    }

    /// A new fault for `objectID`, registered here.
    func makeFault(for objectID: ObjectID) -> ManagedObject {
        let object = objectID.entity.managedObjectClass.init(entity: objectID.entity, insertInto: nil)
        object.objectID = objectID
        object.managedObjectContext = self
        object.state = .fault
        register(object)
        return object
    }
}
