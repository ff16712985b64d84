import Foundation

// MARK: - Saving

extension ManagedObjectContext {
    /// Saves the context's changes to its parent store: the coordinator's
    /// stores for a root context, the parent context for a child.
    ///
    /// Everything is validated before anything is written, and a save writes
    /// all of its changes or none: when it throws, the context keeps its changes
    /// and the store is as it was. A save without changes does nothing.
    ///
    /// A root save gives inserted objects permanent IDs; a child's save leaves
    /// them temporary until the root saves.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/validationFailed`` listing every broken
    ///   rule, ``ObjectGraphError/Code-swift.struct/mergeConflict`` under the `.error` policy,
    ///   ``ObjectGraphError/Code-swift.struct/readOnly`` (for a context that saves on to the
    ///   store, also when a parent is read-only: checked before anything is
    ///   pushed), ``FaultFulfillmentError`` when a read of an object the save
    ///   involves failed (see that type), or the store's error.
    public func save() throws {
        try save(continuingToStore: savesToPersistentStore)
    }

    /// Saves, then, if asked, saves each parent in turn up to the store.
    private func save(continuingToStore: Bool) throws {
        assertOnQueue()
        try checkReadFailuresBeforeSaving()
        if continuingToStore { try checkAncestorsAcceptSaves() }
        if continuingToStore, !hasChanges, let parent {
            try parent.performAndWait { try parent.save(continuingToStore: true) }
            return
        }
        guard hasChanges else { return }
        if isReadOnly { throw ObjectGraphError.readOnly("context \(name ?? "unnamed")") }
        processPendingChanges()
        post(.willSave)
        callWillSave()
        try validateChanges()
        // Uniqueness constraints: thrown, or duplicates collapsed (ManagedObjectContext+Uniqueness.swift).
        // Values a fetch found absent serve this save's check only, and only before it writes.
        let absent = uniqueValuesFoundAbsent
        uniqueValuesFoundAbsent = nil
        // A pinned context checks and writes against the latest data, not its generation.
        isSaving = true
        defer { isSaving = false }
        let merged = parent == nil ? try resolveUniquenessConflicts(skippingLookupOf: absent) : [:]

        var saved = SavedObjects(inserted: unsavedInserts.objects,
                                 updated: unsavedUpdates.objects,
                                 deleted: unsavedDeletes.objects)
        var stored = SaveResult(permanentIDs: [:])
        if let parent {
            try push(saved, into: parent)
        } else {
            guard let coordinator = persistentStoreCoordinator else {
                throw ObjectGraphError.noStore(entity: saved.inserted.first?.entity.name ?? "?")
            }
            stored = try save(&saved, to: coordinator)
            // Its own changes are in the store now: a pinned context reads on from there.
            advanceQueryGeneration()
        }
        let didSave = finishSave(saved, stored: stored)
        for (duplicate, survivor) in merged.merging(saved.collapsed, uniquingKeysWith: { $1 }) {
            // Children that know a collapsed duplicate by its ID find the survivor.
            permanentIDsByTemporaryID[duplicate] = survivor.objectID
        }
        post(.didSave(didSave))
        if continuingToStore, let parent {
            // The changes now sit in the parent; carry them up to the store.
            try parent.performAndWait { try parent.save(continuingToStore: true) }
        }
    }

    /// A save that goes on to the store must not push changes into a parent
    /// that will refuse to save them: they would be stuck there.
    private func checkAncestorsAcceptSaves() throws {
        var ancestor = parent
        while let context = ancestor {
            if context.isReadOnly { throw ObjectGraphError.readOnly("context \(context.name ?? "unnamed") (a parent of \(name ?? "unnamed"))") }
            ancestor = context.parent
        }
    }

    struct SavedObjects {
        var inserted: [ManagedObject]
        var updated: [ManagedObject]
        var deleted: [ManagedObject]
        /// Duplicates collapsed into their survivors during the store's write
        /// transaction (``ContextConflictResolver``).
        var collapsed: [ObjectID: ManagedObject] = [:]
    }

    /// Calls `willSave()` on every changed object, again on objects that
    /// `willSave()` itself changes, until no new object changes.
    private func callWillSave() {
        var called: [ManagedObject] = []
        called.reserveCapacity(unsavedInserts.count + unsavedUpdates.count + unsavedDeletes.count)
        defer { for object in called { object.flags.remove(.willSaveCalled) } }
        for _ in 0..<100 {
            let before = called.count
            // Copies of the change sets: `willSave()` may change them.
            for changes in [unsavedInserts, unsavedUpdates, unsavedDeletes] {
                for object in changes.objects where !object.flags.contains(.willSaveCalled) {
                    object.flags.insert(.willSaveCalled)
                    called.append(object)
                    object.willSave()
                }
            }
            if called.count == before { return }
        }
    }

    /// Runs every object's validation and throws all problems together.
    private func validateChanges() throws {
        var errors: [ValidationError] = []
        func collect(_ object: ManagedObject, _ validate: () throws -> Void) throws {
            do {
                try validate()
            } catch let error as ObjectGraphError where error.code == .validationFailed {
                errors.append(contentsOf: error.validationErrors)
            } catch let error as FaultFulfillmentError {
                // Not a broken rule: the rules could not be checked.
                throw error
            } catch {
                errors.append(ValidationError(objectID: object.objectID, key: nil, reason: "\(error)"))
            }
        }
        for object in unsavedInserts.objects {
            if object.entity.isAbstract {
                let concrete = object.entity.selfAndDescendants.filter { !$0.isAbstract }.map(\.name)
                errors.append(ValidationError(objectID: object.objectID, key: nil, reason: "entity \(object.entity.name) is abstract: "
                    + (concrete.isEmpty ? "it has no concrete subentity" : "insert an object of \(concrete.joined(separator: " or ")) instead")))
            }
            try collect(object) { try object.validateForInsert() }
        }
        for object in unsavedUpdates.objects { try collect(object) { try object.validateForUpdate() } }
        for object in unsavedDeletes.objects where !object.flags.contains(.inaccessible) {
            try collect(object) { try object.validateForDelete() }
        }
        if !errors.isEmpty { throw ObjectGraphError.validationFailed(errors.sorted { $0.description < $1.description }) }
    }

    /// The row an object saves: its slots with transient values left out.
    private func node(for object: ManagedObject, version: Int64) -> IncrementalStoreNode {
        var values = object.slots
        for slot in object.entity.transientSlots { values[slot] = .null }
        return IncrementalStoreNode(objectID: object.objectID, values: values, version: version)
    }

    func saveRequest(for saved: SavedObjects) -> SaveChangesRequest {
        var request = SaveChangesRequest(
            insertedObjects: saved.inserted.map { node(for: $0, version: 0) },
            updatedObjects: saved.updated.map { node(for: $0, version: $0.snapshotVersion) },
            deletedObjects: saved.deleted.filter { !$0.flags.contains(.inaccessible) }.map {
                IncrementalStoreNode(objectID: $0.objectID, values: [], version: $0.snapshotVersion)
            })
        // Only a store reads them: a parent absorbing a child's save does not.
        if parent == nil, !saved.updated.isEmpty {
            let none = SnapshotChanges(objectID: saved.updated[0].objectID, version: -1, slots: SlotMask())
            request.updatedSnapshotChanges = saved.updated.map { Self.snapshotChanges(of: $0) ?? none }
        }
        return request
    }

    /// The slots an updated object changed since its snapshot, at the
    /// snapshot's version; nil when it has no snapshot of every slot, or
    /// holds a to-many's members (whether those changed is the store's to
    /// tell: members move when other rows' foreign keys do).
    private static func snapshotChanges(of object: ManagedObject) -> SnapshotChanges? {
        guard let snapshot = object.snapshot else { return nil }
        let slots = object.slots
        guard snapshot.count == slots.count else { return nil }
        var mask = SlotMask()
        for slot in slots.indices {
            let value = slots[slot]
            if case .objects = value { return nil }
            if case .objects = snapshot[slot] { return nil }
            if value != snapshot[slot] { mask.insert(slot) }
        }
        return SnapshotChanges(objectID: object.objectID, version: object.snapshotVersion, slots: mask)
    }

    /// Saves to the coordinator. The stores settle conflicts inside their
    /// write transactions through the request's resolver, which applies the
    /// merge policy and leaves `saved` as the objects actually written.
    private func save(_ saved: inout SavedObjects, to coordinator: PersistentStoreCoordinator) throws -> SaveResult {
        var request = saveRequest(for: saved)
        if request.isEmpty { return SaveResult(permanentIDs: [:]) }
        let resolver = ContextConflictResolver(context: self, saving: saved)
        request.conflictResolver = resolver
        defer { saved = resolver.saved }
        return try coordinator.save(request, in: self)
    }

    /// Pushes the changes into the parent context, where they become its own unsaved changes.
    private func push(_ saved: SavedObjects, into parent: ManagedObjectContext) throws {
        let request = saveRequest(for: saved)
        try parent.performAndWait {
            try parent.loadObjects(absorbing: request)
            parent.absorb(request)
        }
    }

    /// Loads the objects a child's save changes, before any of them changes:
    /// a read that fails then stops the push with the parent as it was.
    private func loadObjects(absorbing request: SaveChangesRequest) throws {
        for node in request.insertedObjects {
            try registry[resolvedID(node.objectID)]?.loadValues()
        }
        for node in request.updatedObjects + request.deletedObjects {
            try object(with: resolvedID(node.objectID)).loadValues()
        }
    }

    /// The ID a child's ID stands for here: the permanent one this context's
    /// save gave it, if the child still knows it by its temporary one.
    private func resolvedID(_ id: ObjectID) -> ObjectID { permanentIDsByTemporaryID[id] ?? id }

    /// Applies a child's save: inserts, updates and deletes become this context's pending changes.
    ///
    /// Reads nothing from the store: ``loadObjects(absorbing:)`` loaded what it changes.
    func absorb(_ request: SaveChangesRequest) {
        func remapped(_ values: ContiguousArray<PropertyValue>) -> ContiguousArray<PropertyValue> {
            permanentIDsByTemporaryID.isEmpty ? values : ContiguousArray(values.map { $0.remappingIDs(permanentIDsByTemporaryID) })
        }
        for node in request.insertedObjects {
            let id = resolvedID(node.objectID)
            if let existing = registry[id] {
                existing.fireFault()
                existing.slots = keepingLoadedToManys(of: existing, under: remapped(node.values))
                objectDidChange(existing)
                continue
            }
            let object = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
            object.objectID = id
            object.slots = remapped(node.values)
            object.state = .loaded
            object.managedObjectContext = self
            object.flags.insert(.inserted)
            registry[id] = object
            unsavedInserts.insert(object)
            pendingChanges.noteInserted(object)
        }
        for node in request.updatedObjects {
            let object = self.object(with: resolvedID(node.objectID))
            object.fireFault()
            object.slots = keepingLoadedToManys(of: object, under: remapped(node.values))
            objectDidChange(object)
        }
        for node in request.deletedObjects {
            let object = self.object(with: resolvedID(node.objectID))
            object.fireFault()
            markDeleted(object)
        }
    }

    /// A child's values for an object, except where the child never loaded a
    /// to-many (nil) that this context holds: the child did not change it, and
    /// only this context knows it (a many-to-many, or an ordered to-many with its
    /// order). A nil unordered one-to-many is taken as it is: the store derives it
    /// from the foreign keys, which the child may have changed.
    private func keepingLoadedToManys(of object: ManagedObject, under values: ContiguousArray<PropertyValue>) -> ContiguousArray<PropertyValue> {
        guard object.entity.hasRelationships, object.slots.count == values.count else { return values }
        var merged = values
        for case let relationship as RelationshipDescription in object.entity.slotProperties
        where relationship.isToMany && merged[relationship.index].isNull && !object.slots[relationship.index].isNull {
            let derivedFromForeignKey = relationship.inverseRelationship?.isToMany == false && !relationship.isOrdered
            if !derivedFromForeignKey { merged[relationship.index] = object.slots[relationship.index] }
        }
        return merged
    }

    /// Brings the saved objects up to date: permanent IDs, new snapshots and
    /// versions, deleted objects unregistered; calls `didSave()`.
    private func finishSave(_ saved: SavedObjects, stored: SaveResult) -> ContextDidSave {
        let isRoot = parent == nil
        // The inserted IDs as a list, not a set: see `ContextDidSave.inserted`.
        var insertedIDs: [ObjectID] = []
        var updatedIDs: Set<ObjectID> = []
        var deletedIDs: Set<ObjectID> = []
        insertedIDs.reserveCapacity(saved.inserted.count)
        updatedIDs.reserveCapacity(saved.updated.count)
        // The store's IDs by position when it gave them so and the objects are
        // the request's, in its order; else (and for relationships, which
        // name objects by ID) the mapping, made once.
        var mapping: [ObjectID: ObjectID]?
        func permanentIDs() -> [ObjectID: ObjectID] {
            if let mapping { return mapping }
            let made = stored.permanentIDs
            mapping = made
            return made
        }
        // Taken out of the result once, unwrapped, not per object (a copy of
        // the optional pair of arrays: two retains and two releases an object).
        let nodesByPosition = stored.inserted?.nodes ?? []
        let permanentIDsByPosition = stored.inserted?.permanentIDs ?? []
        func permanentID(ofInsertedAt position: Int, _ id: ObjectID) -> ObjectID? {
            guard id.isTemporaryID else { return nil }
            if position < nodesByPosition.count, nodesByPosition[position].objectID == id {
                return permanentIDsByPosition[position]
            }
            return permanentIDs()[id]
        }
        let remapsRelationships = saved.inserted.contains { $0.objectID.isTemporaryID }
        func settle(_ object: ManagedObject) {
            if remapsRelationships && object.entity.hasRelationships {
                let mapping = permanentIDs()
                if !mapping.isEmpty { object.slots = ContiguousArray(object.slots.map { $0.remappingIDs(mapping) }) }
            }
            object.takeValuesAsSnapshot()
            object.flags.subtract([.inserted, .updated])
        }
        // Re-keying an entry costs a removal from the registry; when most of it
        // changes keys (an import), building it again from the IDs is cheaper.
        let rebuildsRegistry = (stored.inserted?.nodes.count ?? permanentIDs().count) * 2 > registry.count
        // Read once, not per object: it is read under a lock. A child made
        // while this runs (on another queue) knows none of these objects yet.
        let remembersTemporaryIDs = hasChildContexts
        for position in saved.inserted.indices {
            let object = saved.inserted[position]
            let temporaryID = object.objectID
            if let permanentID = permanentID(ofInsertedAt: position, temporaryID) {
                // Out of the registry under the ID it was filed under, before that changes.
                if !rebuildsRegistry { registry[temporaryID] = nil }
                object.objectID = permanentID
                if !rebuildsRegistry { registry[permanentID] = object }
                // Only children know objects by temporary IDs their parent has since replaced.
                if remembersTemporaryIDs { permanentIDsByTemporaryID[temporaryID] = permanentID }
                insertedIDs.append(permanentID)
            } else {
                insertedIDs.append(temporaryID)
            }
            object.snapshotVersion = isRoot ? 1 : 0
            settle(object)
        }
        if rebuildsRegistry { registry.rekeyAll() }
        for object in saved.updated {
            if isRoot { object.snapshotVersion += 1 }
            updatedIDs.insert(object.objectID)
            settle(object)
        }
        for object in saved.deleted {
            deletedIDs.insert(object.objectID)
            registry[object.objectID] = nil
            object.flags.formIntersection(.changeLists)
            object.managedObjectContext = nil
        }
        unsavedInserts.removeAll()
        unsavedUpdates.removeAll()
        unsavedDeletes.removeAll()
        deletedInsertedObjectIDs = []
        pendingChanges.removeAll()
        for object in saved.inserted { object.didSave() }
        for object in saved.updated { object.didSave() }
        for object in saved.deleted { object.didSave() }
        return ContextDidSave(inserted: insertedIDs, updated: updatedIDs, deleted: deletedIDs, historyTokens: stored.historyTokens)
    }
}

extension PropertyValue {
    /// The value with relationship IDs replaced as `mapping` says.
    package func remappingIDs(_ mapping: [ObjectID: ObjectID]) -> PropertyValue {
        switch self {
        case .object(let id): return .object(mapping[id] ?? id)
        case .objects(let ids): return .objects(ids.map { mapping[$0] ?? $0 })
        default: return self
        }
    }
}
