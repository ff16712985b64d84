@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Loading values from the parent store

extension ManagedObjectContext {
    /// Loads a fault's values (and its batch's, for a batched fetch) from the parent store.
    ///
    /// A row that is gone makes the object inaccessible (see
    /// ``shouldDeleteInaccessibleFaults``); any other failure leaves it a
    /// fault, is recorded and posted (``FaultFulfillmentError``), and is thrown.
    package func fulfillFault(_ object: ManagedObject) throws {
        assertOnQueue()
        if let batch = faultBatches[object.objectID] {
            fulfillBatch(batch)
            if !object.isFault { return }
        }
        let node: IncrementalStoreNode
        do {
            node = try parentNode(for: object.objectID)
        } catch ObjectGraphError.Code.objectNotFound {
            markInaccessible(object)
            return
        } catch {
            throw noteReadFailure(of: object.objectID, error)
        }
        fill(object, with: node)
        noteReadSucceeded(of: object.objectID)
    }

    private func fulfillBatch(_ batch: FaultBatch) {
        let members = batch.objectIDs.compactMap { id -> ManagedObject? in
            faultBatches[id] = nil
            return registry[id]
        }
        fireFaults(members)
    }

    /// Fires the faults among `objects` together: one query per 500 rows and
    /// store (or none, for rows in the row cache). Rows that are gone stay
    /// faults, to be found out when they fire one by one.
    ///
    /// Loading several at once only saves queries: if the query fails, the
    /// faults stay faults and each fires (and reports its error) on its own
    /// when it is used, so dropping the error here loses nothing.
    package func fireFaults(_ objects: [ManagedObject]) {
        let faults = objects.filter { $0.isFault && $0.managedObjectContext === self }
        if faults.count == 1 { faults[0].fireFault() }
        guard faults.count > 1, let nodes = try? parentNodes(for: faults.map(\.objectID)) else { return }
        var byID: [ObjectID: IncrementalStoreNode] = [:]
        byID.reserveCapacity(nodes.count)
        for node in nodes { byID[node.objectID] = node }
        for object in faults where object.isFault {
            faultBatches[object.objectID] = nil
            if let node = byID[object.objectID] {
                fill(object, with: node)
                noteReadSucceeded(of: object.objectID)
            }
        }
    }

    /// Gives an object the values of a row and calls `awakeFromFetch()`.
    func fill(_ object: ManagedObject, with node: IncrementalStoreNode) {
        var node = node
        fill(object, from: &node)
    }

    /// ``fill(_:with:)`` from a row the caller is done with (a fetch's): its
    /// values move into the object rather than being copied (see
    /// ``ManagedObject/takeFetchedValues(_:)``).
    func fill(_ object: ManagedObject, from node: inout IncrementalStoreNode) {
        object.takeFetchedValues(&node.values)
        object.snapshotVersion = node.version
        object.state = .loaded
        object.awakeFromFetch()
    }

    /// A fault whose row is gone: a deleted object with empty values, or a trap
    /// when ``shouldDeleteInaccessibleFaults`` is false (Core Data raises there too).
    /// Only a row that does not exist comes here; a failed read never does.
    private func markInaccessible(_ object: ManagedObject) {
        guard shouldDeleteInaccessibleFaults else {
            preconditionFailure("the row of \(object.objectID) is gone and shouldDeleteInaccessibleFaults is false")
        }
        object.slots = ContiguousArray(object.entity.slotProperties.map {
            ($0 as? RelationshipDescription)?.isToMany == true ? .objects([]) : .null
        })
        object.state = .loaded
        object.flags.insert([.deleted, .inaccessible])
        unsavedDeletes.insert(object)
        registry[object.objectID] = object
        readFailures[object.objectID] = nil
    }

    /// The destinations of a relationship of `object`, from the parent store.
    ///
    /// - Throws: ``FaultFulfillmentError`` (recorded and posted) when the store
    ///   cannot be read; never an empty list in its place.
    package func loadRelationship(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> [ObjectID] {
        if object.objectID.isTemporaryID && parent == nil { return [] }
        do {
            if let parent {
                return try parent.performAndWait {
                    guard let owner = parent.registry[object.objectID] ?? (object.objectID.isTemporaryID ? nil : parent.object(with: object.objectID)) else { return [] }
                    return try owner.objectIDs(for: relationship)
                }
            }
            guard let coordinator = persistentStoreCoordinator else { return [] }
            let stored = try coordinator.objectIDs(for: relationship, of: object.objectID, in: self)
            noteReadSucceeded(of: object.objectID)
            return overlayPendingChanges(on: stored, for: relationship, of: object.objectID)
        } catch let error as ObjectGraphError where error.code == .objectNotFound && error.objectID == object.objectID {
            // The owner's row is gone: nothing relates to it any more.
            return []
        } catch {
            throw noteReadFailure(of: object.objectID, relationship: relationship, error)
        }
    }

    /// A to-many kept by its inverse's foreign key, as this context sees it: the
    /// store's members, less those whose unsaved inverse now points elsewhere or
    /// that are deleted, plus those whose unsaved inverse points here.
    func overlayPendingChanges(on stored: [ObjectID], for relationship: RelationshipDescription, of owner: ObjectID) -> [ObjectID] {
        guard let inverse = relationship.inverseRelationship, !inverse.isToMany,
              !(unsavedInserts.isEmpty && unsavedUpdates.isEmpty && unsavedDeletes.isEmpty) else { return stored }
        var members = stored.filter { id in
            guard let member = registry[id] else { return true }
            guard !unsavedDeletes.contains(member) else { return false }
            guard unsavedUpdates.contains(member), member.state == .loaded else { return true }
            return member.slots[inverse.index] == .object(owner)
        }
        var present = Set(members)
        for candidate in unsavedInserts.objects + unsavedUpdates.objects
        where candidate.state == .loaded && candidate.entity.isKind(of: inverse.entity ?? candidate.entity)
            && candidate.slots[inverse.index] == .object(owner) && present.insert(candidate.objectID).inserted {
            members.append(candidate.objectID)
        }
        return members
    }

    // MARK: - The parent store: a coordinator or a parent context

    /// One row as the parent store sees it now.
    func parentNode(for objectID: ObjectID) throws -> IncrementalStoreNode {
        if let parent {
            return try parent.performAndWait { try parent.currentNode(for: objectID) }
        }
        guard let coordinator = persistentStoreCoordinator else { throw ObjectGraphError.objectNotFound(objectID) }
        return try coordinator.node(for: objectID, stalenessInterval: stalenessInterval, in: self)
    }

    /// Several rows at once (one query per store for a coordinator), cached
    /// ones no older than ``stalenessInterval`` as for one fault.
    /// Rows that are gone are left out; any other failure throws.
    func parentNodes(for objectIDs: [ObjectID]) throws -> [IncrementalStoreNode] {
        if let parent {
            return try parent.performAndWait {
                try objectIDs.compactMap { id in
                    do {
                        return try parent.currentNode(for: id)
                    } catch ObjectGraphError.Code.objectNotFound {
                        return nil
                    }
                }
            }
        }
        guard let coordinator = persistentStoreCoordinator else { return [] }
        return try coordinator.nodes(for: objectIDs, stalenessInterval: stalenessInterval, in: self)
    }

    /// The object's state in this context as a row, for a child context.
    func currentNode(for objectID: ObjectID) throws -> IncrementalStoreNode {
        if let object = registry[objectID] {
            if object.flags.contains(.deleted) { throw ObjectGraphError.objectNotFound(objectID) }
            try object.loadValues()
            if object.flags.contains(.inaccessible) { throw ObjectGraphError.objectNotFound(objectID) }
            return IncrementalStoreNode(objectID: objectID, values: object.slots, version: object.snapshotVersion)
        }
        return try parentNode(for: objectID)
    }
}
