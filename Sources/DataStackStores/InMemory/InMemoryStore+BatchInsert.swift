@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Batch insert

extension InMemoryStore {
    /// Runs a batch insert with the same rules and results as the SQLite
    /// store: rows read and converted by ``BatchInsertRows``, each unique key
    /// checked against the stored rows of the hierarchy and the request's
    /// earlier rows and settled by the request's conflict choice, then all of
    /// it written as one save (new rows at version 1, keys handed out in one
    /// run, upserted rows at their version + 1).
    ///
    /// That save checks the version of every upserted row and every
    /// uniqueness constraint again, so a writer that moved one row or
    /// inserted a key in between makes the batch throw
    /// ``ObjectGraphError/Code-swift.struct/mergeConflict`` or
    /// ``ObjectGraphError/Code-swift.struct/uniquenessConflict`` with nothing changed.
    func executeBatchInsert(_ insert: StoreBatchInsert) throws -> BatchChanges {
        let entity = insert.entity
        let constraints = try insert.constraints.map { owner, keys in
            (owner: owner, keys: keys, slots: try keys.map { try owner.property(forKey: $0).index })
        }
        var holders = [[[PropertyValue]: Holder]](repeating: [:], count: constraints.count)
        if !constraints.isEmpty {
            for row in try storedRows(of: entity.rootEntity) {
                for (position, constraint) in constraints.enumerated() where row.objectID.entity.isKind(of: constraint.owner) {
                    let key = constraint.slots.map { row.values[$0] }
                    if !key.contains(where: \.isNull) { holders[position][key] = .stored(row) }
                }
            }
        }

        var inserted: [IncrementalStoreNode] = []
        var updated: [IncrementalStoreNode] = []
        var updatedPositions: [ObjectID: Int] = [:]
        var rows = BatchInsertRows(insert)
        let slotCount = entity.slotProperties.count
        rowLoop: while try rows.next() {
            var values = ContiguousArray(repeating: PropertyValue.null, count: slotCount)
            for (position, attribute) in rows.attributes.enumerated() { values[attribute.index] = rows.values[position] }

            for (position, constraint) in constraints.enumerated() {
                let key = constraint.slots.map { values[$0] }
                guard !key.contains(where: \.isNull), let holder = holders[position][key] else { continue }
                var stored: IncrementalStoreNode?
                if case .stored(let node) = holder { stored = node }
                let refused = ObjectGraphError.duplicateKey(entity: constraint.owner.name, constraint: constraint.keys, values: key,
                                                             row: rows.index, storedObjectID: stored?.objectID)
                switch insert.onConflict {
                case .fail:
                    throw refused
                case .keep:
                    continue rowLoop
                case .overwrite:
                    // The given values replace the holder's; the others stay as the holder has them.
                    func overwrite(_ node: inout IncrementalStoreNode) {
                        for (position, attribute) in rows.attributes.enumerated() where rows.given[position] {
                            node.values[attribute.index] = rows.values[position]
                        }
                    }
                    switch holder {
                    case .inserted(let index):
                        overwrite(&inserted[index])
                    case .stored(let node):
                        guard node.objectID.entity === entity else { throw refused }
                        if let index = updatedPositions[node.objectID] {
                            overwrite(&updated[index])
                        } else {
                            var row = node
                            overwrite(&row)
                            updatedPositions[node.objectID] = updated.count
                            updated.append(row)
                        }
                    }
                    continue rowLoop
                }
            }

            for (position, constraint) in constraints.enumerated() {
                let key = constraint.slots.map { values[$0] }
                if !key.contains(where: \.isNull) { holders[position][key] = .inserted(inserted.count) }
            }
            inserted.append(IncrementalStoreNode(objectID: .temporary(for: entity), values: values, version: 0))
        }
        guard !inserted.isEmpty || !updated.isEmpty else { return BatchChanges() }
        let result = try execute(.save(SaveChangesRequest(insertedObjects: inserted, updatedObjects: updated)), in: nil)
        guard case .saved(let saved) = result else { throw unexpected(result, answering: "the save of a batch insert") }
        return BatchChanges(insertedObjectIDs: Set(inserted.map { saved.permanentIDs[$0.objectID] ?? $0.objectID }),
                            updatedObjectIDs: Set(updated.map(\.objectID)))
    }

    /// Who holds a unique key: a stored row, or a row this request inserts (its position).
    private enum Holder {
        case stored(IncrementalStoreNode)
        case inserted(Int)
    }

    /// Every row of the entity and its subentities.
    private func storedRows(of entity: EntityDescription) throws -> [IncrementalStoreNode] {
        let fetch = StoreFetch(entity: entity, predicate: nil, sortDescriptors: [], fetchLimit: 0, fetchOffset: 0,
                               includesSubentities: true, resultType: .managedObject, propertiesToFetch: nil,
                               returnsDistinctResults: false)
        let result = try execute(.fetch(fetch), in: nil)
        guard case .nodes(let nodes) = result else { throw unexpected(result, answering: "the rows a batch insert checks its keys against") }
        return nodes
    }
}
