import Foundation

// Relationships hold object IDs in their slots; these helpers turn them into
// objects of the same context and keep both sides of a relationship in step.
extension ManagedObject {
    /// The objects a relationship slot refers to, as objects (faults if not yet loaded) of this context.
    package func relatedObjects(_ value: PropertyValue, for relationship: RelationshipDescription) -> [ManagedObject] {
        guard let context = managedObjectContext else { return [] }
        return relationshipIDs(value, for: relationship).map { context.object(with: $0) }
    }

    /// The IDs a relationship slot holds, loading an unloaded to-many from the parent store.
    package func relationshipIDs(_ value: PropertyValue, for relationship: RelationshipDescription) -> [ObjectID] {
        switch value {
        case .object(let id): return [id]
        case .objects(let ids): return ids
        default:
            guard relationship.isToMany else { return [] }
            let ids = managedObjectContext?.loadRelationship(relationship, of: self) ?? []
            // Loading is not a change: the snapshot learns the value too.
            slots[relationship.index] = .objects(ids)
            if snapshot?[relationship.index].isNull == true { snapshot?[relationship.index] = .objects(ids) }
            return ids
        }
    }

    /// The IDs currently related through `relationship`.
    package func relatedIDs(_ relationship: RelationshipDescription) -> [ObjectID] {
        relationshipIDs(slotValue(at: relationship.index), for: relationship)
    }

    /// Whether a relationship's value is not loaded yet (Core Data:
    /// `hasFault(forRelationshipNamed:)`): the object is a fault, or the
    /// to-many was never read. Never fires anything.
    ///
    /// A to-many that is a fault costs one query to load, whatever its size; its
    /// destinations come back as faults.
    ///
    /// - Throws: ``ObjectGraphError/unknownKey(_:entity:)`` when the entity has no such relationship.
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
    package func setRelationship(_ relationship: RelationshipDescription, toObjects objects: [ManagedObject]) throws {
        let old = relatedIDs(relationship)
        let new = objects.map(\.objectID)
        let oldSet = Set(old)
        let newSet = Set(new)
        writeSlot(relationship.isToMany ? .objects(Self.unique(new)) : new.first.map(PropertyValue.object) ?? .null,
                  at: relationship.index)
        guard let inverse = relationship.inverseRelationship, let context = managedObjectContext else { return }
        for id in old where !newSet.contains(id) {
            context.object(with: id).removeInverse(inverse, pointingAt: objectID)
        }
        for object in objects where !oldSet.contains(object.objectID) {
            object.addInverse(inverse, pointingAt: self)
        }
    }

    /// Makes this object's side of `inverse` include `source`.
    private func addInverse(_ inverse: RelationshipDescription, pointingAt source: ManagedObject) {
        if inverse.isToMany {
            if isUnloadedToManyWithToOneInverse(inverse) {
                // The store derives this side from the other side's foreign key, and a later
                // load overlays the context's pending changes: no need to load it now.
                writeSlot(.null, at: inverse.index)
                return
            }
            var ids = relatedIDs(inverse)
            if !ids.contains(source.objectID) { ids.append(source.objectID) }
            writeSlot(.objects(ids), at: inverse.index)
        } else {
            // A to-one inverse moves: the object it pointed at loses this object.
            if case .object(let previous) = slotValue(at: inverse.index), previous != source.objectID,
               let forward = inverse.inverseRelationship, let context = managedObjectContext {
                context.object(with: previous).removeInverse(forward, pointingAt: objectID)
            }
            writeSlot(.object(source.objectID), at: inverse.index)
        }
    }

    /// Makes this object's side of `inverse` drop `source`.
    package func removeInverse(_ inverse: RelationshipDescription, pointingAt source: ObjectID) {
        if inverse.isToMany {
            if isUnloadedToManyWithToOneInverse(inverse) {
                writeSlot(.null, at: inverse.index)
                return
            }
            let ids = relatedIDs(inverse)
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
