import Foundation

// Relationships hold object IDs in their slots; these helpers turn them into
// objects of the same context and keep both sides of a relationship in step.
extension ManagedObject {
    /// The objects a relationship slot refers to, as objects (faults if not yet loaded) of this context.
    ///
    /// - Throws: ``FaultFulfillmentError`` when an unloaded to-many cannot be read.
    package func relatedObjects(_ value: PropertyValue, for relationship: RelationshipDescription) throws -> [ManagedObject] {
        guard let context = managedObjectContext else { return [] }
        return try objectIDs(in: value, for: relationship).map { context.object(with: $0) }
    }

    /// ``relatedObjects(_:for:)`` for the typed accessors, which cannot throw:
    /// a to-many that cannot be read reads as empty for this access only. It
    /// stays unloaded, and the context has recorded and posted the failure.
    package func relatedObjectsForTypedAccess(at index: Int, for relationship: RelationshipDescription) -> [ManagedObject] {
        do {
            return try relatedObjects(slotValue(at: index), for: relationship)
        } catch {
            return []
        }
    }

    /// The IDs a relationship slot holds, loading an unloaded to-many from the parent store.
    ///
    /// - Throws: ``FaultFulfillmentError`` when the to-many cannot be read; the
    ///   slot then stays unloaded, never an empty list.
    package func objectIDs(in value: PropertyValue, for relationship: RelationshipDescription) throws -> [ObjectID] {
        switch value {
        case .object(let id): return [id]
        case .objects(let ids): return ids
        default:
            guard relationship.isToMany else { return [] }
            guard let context = managedObjectContext else { return [] }
            let ids = try context.loadRelationship(relationship, of: self)
            // Loading is not a change: the snapshot learns the value too.
            slots[relationship.index] = .objects(ids)
            if snapshot?[relationship.index].isNull == true { snapshot?[relationship.index] = .objects(ids) }
            return ids
        }
    }

    /// The IDs currently related through `relationship`.
    ///
    /// - Throws: ``FaultFulfillmentError`` when the object or the to-many cannot be read.
    package func objectIDs(for relationship: RelationshipDescription) throws -> [ObjectID] {
        try loadValues()
        return try objectIDs(in: slots[relationship.index], for: relationship)
    }

    /// The IDs of the objects a relationship holds (Core Data:
    /// `objectIDs(forRelationshipNamed:)`), without making an object for any
    /// of them: what an exporter, a sync engine or a diagnostic tool needs to
    /// write references, where the objects themselves would only cost memory.
    ///
    /// An ordered to-many gives its IDs in order; an unordered one in no
    /// particular order; a to-one gives zero or one ID. A to-many that is a
    /// fault is loaded (one query, whatever its size), as reading it would.
    ///
    /// - Throws: ``ObjectGraphError/unknownKey(_:entity:)`` when the entity has
    ///   no relationship of that name; ``FaultFulfillmentError`` when the object
    ///   or the to-many cannot be read from the store.
    public func objectIDs(forRelationshipNamed name: String) throws -> [ObjectID] {
        guard let relationship = try entity.property(forKey: name) as? RelationshipDescription else {
            throw ObjectGraphError.unknownKey(name, entity: entity.name)
        }
        return try objectIDs(for: relationship)
    }

    /// Whether a relationship's value is not loaded yet (Core Data:
    /// `hasFault(forRelationshipNamed:)`): the object is a fault, or the
    /// to-many was never read. Never fires anything.
    ///
    /// A to-many that is a fault costs one query to load, whatever its size; its
    /// destinations come back as faults.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` when the entity has no such relationship.
    public func hasFault(forRelationshipNamed name: String) throws -> Bool {
        guard let relationship = try entity.property(forKey: name) as? RelationshipDescription else {
            throw ObjectGraphError.unknownKey(name, entity: entity.name)
        }
        assertOnContextQueue()
        switch state {
        case .new: return false
        case .fault: return true
        case .loaded: return relationship.isToMany && slots[relationship.index].isNull
        }
    }

    /// Replaces what a relationship holds and updates the inverse side of every
    /// object that joins or leaves it.
    ///
    /// Everything that must be read is read before anything is written: when a
    /// read fails, it throws ``FaultFulfillmentError`` with nothing changed.
    /// Objects of another context throw ``ObjectGraphError/Code-swift.struct/differentContexts``.
    package func setRelationship(_ relationship: RelationshipDescription, toObjects objects: [ManagedObject]) throws {
        try checkSameContext(objects, for: relationship)
        let old = try objectIDs(for: relationship)
        let new = objects.map(\.objectID)
        let oldSet = Set(old)
        let newSet = Set(new)
        let inverse = relationship.inverseRelationship
        if let inverse, let context = managedObjectContext {
            for id in old where !newSet.contains(id) {
                try context.object(with: id).loadForInverseUpdate(inverse, followingMovedToOne: false)
            }
            for object in objects where !oldSet.contains(object.objectID) {
                try object.loadForInverseUpdate(inverse, followingMovedToOne: true)
            }
        }
        writeSlot(relationship.isToMany ? .objects(Self.unique(new)) : new.first.map(PropertyValue.object) ?? .null,
                  at: relationship.index)
        guard let inverse, let context = managedObjectContext else { return }
        for id in old where !newSet.contains(id) {
            try context.object(with: id).removeInverse(inverse, pointingAt: objectID)
        }
        for object in objects where !oldSet.contains(object.objectID) {
            try object.addInverse(inverse, pointingAt: self)
        }
    }

    /// Throws ``ObjectGraphError/Code-swift.struct/differentContexts`` unless every
    /// object lives in this object's context.
    package func checkSameContext(_ objects: [ManagedObject], for relationship: RelationshipDescription) throws {
        for object in objects where object.managedObjectContext !== managedObjectContext || managedObjectContext == nil {
            throw ObjectGraphError.differentContexts(key: relationship.name, entity: entity.name)
        }
    }

    /// ``setRelationship(_:toObjects:)`` for typed ``Managed`` setters, which
    /// cannot throw. Relating objects of two contexts is a programmer error
    /// and traps, as Core Data raises there. A read that fails drops the
    /// change, and the context keeps the failure so that no save goes ahead
    /// without it (see ``FaultFulfillmentError``).
    package func setRelationshipThroughTypedProperty(_ relationship: RelationshipDescription, to objects: [ManagedObject]) {
        do {
            try setRelationship(relationship, toObjects: objects)
        } catch let error as FaultFulfillmentError {
            managedObjectContext?.noteReadFailure(of: objectID, relationship: relationship, error, dropsChange: true)
        } catch let error as ObjectGraphError {
            preconditionFailure(error.description)   // it names the entity and the relationship
        } catch {
            preconditionFailure("\(type(of: self)).\(relationship.name): \(error)")
        }
    }

    /// Reads what ``addInverse(_:pointingAt:)`` or ``removeInverse(_:pointingAt:)``
    /// will read on this object, so that they find everything loaded and
    /// cannot fail halfway through a change.
    ///
    /// - Parameter followingMovedToOne: also load the object a to-one inverse
    ///   points at now, which loses this object when the inverse moves.
    package func loadForInverseUpdate(_ inverse: RelationshipDescription, followingMovedToOne: Bool) throws {
        try loadValues()
        if inverse.isToMany {
            if !isUnloadedToManyWithToOneInverse(inverse) { _ = try objectIDs(for: inverse) }
        } else if followingMovedToOne, case .object(let previous) = slots[inverse.index],
                  let forward = inverse.inverseRelationship, let context = managedObjectContext {
            try context.object(with: previous).loadForInverseUpdate(forward, followingMovedToOne: false)
        }
    }

    /// Makes this object's side of `inverse` include `source`.
    private func addInverse(_ inverse: RelationshipDescription, pointingAt source: ManagedObject) throws {
        if inverse.isToMany {
            if isUnloadedToManyWithToOneInverse(inverse) {
                // The store derives this side from the other side's foreign key, and a later
                // load overlays the context's pending changes: no need to load it now.
                writeSlot(.null, at: inverse.index)
                return
            }
            // Loaded first; then one member joins in place (see `ToManyMemberIndex`).
            // The loaded list is not kept here: a second reference to it would make
            // the in-place change copy it.
            _ = try objectIDs(for: inverse)
            if let appended = withToManyMembers(at: inverse.index, { ids, members in members.append(source.objectID, to: &ids) }) {
                countToManyMemberWork(1)
                if appended { noteSlotChanged() }
                return
            }
            var ids = try objectIDs(for: inverse)
            countToManyMemberWork(ids.count)
            if !ids.contains(source.objectID) { ids.append(source.objectID) }
            writeSlot(.objects(ids), at: inverse.index)
        } else {
            // A to-one inverse moves: the object it pointed at loses this object.
            if case .object(let previous) = slotValue(at: inverse.index), previous != source.objectID,
               let forward = inverse.inverseRelationship, let context = managedObjectContext {
                try context.object(with: previous).removeInverse(forward, pointingAt: objectID)
            }
            writeSlot(.object(source.objectID), at: inverse.index)
        }
    }

    /// Makes this object's side of `inverse` drop `source`.
    package func removeInverse(_ inverse: RelationshipDescription, pointingAt source: ObjectID) throws {
        if inverse.isToMany {
            if isUnloadedToManyWithToOneInverse(inverse) {
                writeSlot(.null, at: inverse.index)
                return
            }
            _ = try objectIDs(for: inverse)   // loaded first, not kept (see addInverse)
            let keepingOrder = inverse.isOrdered
            if let moved = withToManyMembers(at: inverse.index, { ids, members in
                members.remove(source, from: &ids, keepingOrder: keepingOrder)
            }) {
                countToManyMemberWork(1 + (moved ?? 0))
                if moved != nil { noteSlotChanged() }
                return
            }
            let ids = try objectIDs(for: inverse)
            countToManyMemberWork(ids.count)
            guard ids.contains(source) else { return }
            writeSlot(.objects(ids.filter { $0 != source }), at: inverse.index)
        } else if case .object(source) = slotValue(at: inverse.index) {
            writeSlot(.null, at: inverse.index)
        }
    }

    /// Whether `relationship` is an unordered to-many kept by its to-one
    /// inverse's foreign key, and not loaded into this object yet. An ordered
    /// one is always loaded: the owner's list is what orders it at save.
    private func isUnloadedToManyWithToOneInverse(_ relationship: RelationshipDescription) -> Bool {
        guard relationship.isToMany, !relationship.isOrdered, relationship.inverseRelationship?.isToMany == false,
              !flags.contains(.inserted) else { return false }
        if state != .loaded { fireFault() }
        return slots[relationship.index].isNull
    }

    private static func unique(_ ids: [ObjectID]) -> [ObjectID] {
        var seen = Set<ObjectID>()
        return ids.filter { seen.insert($0).inserted }
    }
}
