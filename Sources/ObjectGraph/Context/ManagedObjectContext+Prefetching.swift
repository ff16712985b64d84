import Foundation

// MARK: - Prefetching relationships

extension ManagedObjectContext {
    /// The relationships each key path of `relationshipKeyPathsForPrefetching`
    /// crosses, from `entity`.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` for a key path that
    ///   does not lead through relationships.
    func prefetchPaths(_ keyPaths: [String], from entity: EntityDescription) throws -> [[RelationshipDescription]] {
        try keyPaths.map { keyPath in
            var current = entity
            var steps: [RelationshipDescription] = []
            for key in keyPath.split(separator: ".", omittingEmptySubsequences: false) {
                guard let relationship = current.propertiesByName[String(key)] as? RelationshipDescription,
                      let destination = relationship.destinationEntity else {
                    throw ObjectGraphError.unknownKey(keyPath, entity: entity.name)
                }
                steps.append(relationship)
                current = destination
            }
            return steps
        }
    }

    /// Loads the relationships of fetched objects along each key path, and their
    /// destinations' values (Core Data: `relationshipKeyPathsForPrefetching`).
    ///
    /// Each step costs one query for all the objects (per 500 and per store): a
    /// to-one step reads the destinations' rows by primary key; a to-many step
    /// reads them through the inverse's foreign key (`IN (…)`) or the join table.
    /// Objects that already hold the relationship, or whose rows the fetch left in
    /// the row cache, cost nothing. A child context loads through its parent,
    /// object by object.
    func prefetch(_ paths: [[RelationshipDescription]], for objects: [ManagedObject]) throws {
        var levels: [[ObjectIdentifier]: [ManagedObject]] = [:]
        for path in paths {
            var level = objects
            for depth in path.indices {
                let prefix = path[...depth].map(ObjectIdentifier.init)
                if let known = levels[prefix] {
                    level = known
                    continue
                }
                level = try prefetch(path[depth], of: level)
                levels[prefix] = level
            }
        }
    }

    /// Loads one relationship of many objects; returns the destinations, loaded.
    private func prefetch(_ relationship: RelationshipDescription, of objects: [ManagedObject]) throws -> [ManagedObject] {
        let index = relationship.index
        let owners = objects.filter { owner in
            owner.managedObjectContext === self && owner.entity.slotProperties.indices.contains(index)
                && owner.entity.slotProperties[index] === relationship
        }
        fireFaults(owners)
        var destinations: [ManagedObject] = []
        var seen = Set<ObjectID>()
        var rows: [ObjectID: IncrementalStoreNode] = [:]
        // A store's prefetch reads the latest data: a context pinned to a query
        // generation loads each owner's relationship below, from its generation.
        if relationship.isToMany, parent == nil, try pinnedQueryGeneration() == nil, let coordinator = persistentStoreCoordinator {
            // One query per store for the owners that have not loaded it yet.
            var byStore: [ObjectIdentifier: (store: any RelationshipPrefetchingStore, owners: [ManagedObject])] = [:]
            for owner in owners where !owner.isDeleted && !owner.objectID.isTemporaryID {
                try owner.loadValues()
                // A store that cannot prefetch leaves the owner to load its relationship below.
                guard owner.slots.indices.contains(index), owner.slots[index].isNull,
                      let store = try coordinator.store(for: owner.objectID) as? any RelationshipPrefetchingStore else { continue }
                byStore[ObjectIdentifier(store), default: (store, [])].owners.append(owner)
            }
            for (_, entry) in byStore {
                let result = try entry.store.prefetch(relationship, forObjectsWith: entry.owners.map(\.objectID))
                for node in result.nodes { rows[node.objectID] = node }
                for owner in entry.owners {
                    let ids = overlayPendingChanges(on: result.destinations[owner.objectID] ?? [], for: relationship, of: owner.objectID)
                    owner.slots[index] = .objects(ids)
                    if owner.snapshot?[index].isNull == true { owner.snapshot?[index] = .objects(ids) }
                }
            }
        }
        for owner in owners where !owner.isDeleted {
            var related: [ManagedObject] = []
            for id in try owner.objectIDs(for: relationship) {
                let destination = object(with: id)
                related.append(destination)
                if seen.insert(id).inserted { destinations.append(destination) }
            }
            // The owner keeps them, so their values and loaded relationships stay.
            owner.prefetchedObjects[index] = related
        }
        if parent == nil, let coordinator = persistentStoreCoordinator {
            // Rows not read yet: one query (per 500, per store); all kept in the row cache.
            let missing = destinations.filter { $0.isFault && rows[$0.objectID] == nil && !$0.objectID.isTemporaryID }
                .map(\.objectID)
            if !missing.isEmpty {
                for node in try coordinator.nodes(for: missing, stalenessInterval: stalenessInterval, in: self) { rows[node.objectID] = node }
            }
            coordinator.didRead(Array(rows.values), for: self)
        }
        for destination in destinations where destination.isFault {
            if let node = rows[destination.objectID] {
                faultBatches[destination.objectID] = nil
                fill(destination, with: node)
            }
        }
        fireFaults(destinations)
        return destinations
    }
}
