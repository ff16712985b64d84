@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Batch update and delete

@_spi(StoreImplementation) extension InMemoryStore: BatchRequestStore {
    /// Runs a batch request with the same rules and results as the SQLite
    /// store: the rows are read, the new rows worked out (values evaluated as
    /// SQL would, delete rules by ``BatchDeletePlan``, uniqueness constraints
    /// checked against every row of the hierarchy), and then written as one
    /// save. That save checks every row's version, so a writer that moved a
    /// row in between makes the batch throw
    /// ``ObjectGraphError/Code-swift.struct/mergeConflict`` with nothing changed.
    public func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges {
        switch request {
        case .update(let update):
            let before = try matchedRows(update.fetch)
            guard !before.isEmpty else { return BatchChanges() }
            let after = try before.map { try updated($0, by: update) }
            try checkUniqueness(of: after, changing: update)
            _ = try execute(.save(SaveChangesRequest(updatedObjects: after)), in: nil)
            return BatchChanges(updatedObjectIDs: Set(before.map(\.objectID)))
        case .delete(let delete):
            let matched: [IncrementalStoreNode]
            switch delete {
            case .matching(let fetch): matched = try matchedRows(fetch)
            case .objectIDs(let ids): matched = try newValues(forObjectsWith: ids, in: nil)
            }
            let plan = try BatchDeletePlan(matched: matched,
                                           rows: { try newValues(forObjectsWith: $0, in: nil) },
                                           toMany: { relationship, owners in
                                               var destinations: [ObjectID: [ObjectID]] = [:]
                                               for owner in owners {
                                                   if case .objects(let ids) = try newValue(forRelationship: relationship, forObjectWith: owner, in: nil) {
                                                       destinations[owner] = ids
                                                   }
                                               }
                                               return destinations
                                           })
            guard !plan.deleted.isEmpty else { return BatchChanges() }
            _ = try execute(.save(SaveChangesRequest(updatedObjects: plan.clearedRows, deletedObjects: plan.deleted)), in: nil)
            return plan.changes(historyToken: nil)
        case .insert(let insert): return try executeBatchInsert(insert)
        }
    }

    /// A row with the new values, computed on its old ones as the SQLite
    /// store's `SET` computes them; a constant is stored as the context converted it.
    private func updated(_ row: IncrementalStoreNode, by update: StoreBatchUpdate) throws -> IncrementalStoreNode {
        // The values read only the row's own attributes, so the row needs no neighbours.
        let subject = NodeSubject(node: row, rows: [:], toMany: { _, _ in [] })
        var values = row.values
        for (attribute, value) in update.values {
            if case .constant(let constant) = value.node {
                values[attribute.index] = constant
            } else {
                let computed = try value.evaluate(with: subject, as: attribute.type)
                // A narrower integer attribute must hold it, as a constant is checked to; stored
                // anyway it would read back truncated to another number.
                if case .integer(let integer) = computed, let range = attribute.type.integerRange, !range.contains(integer) {
                    throw ObjectGraphError.valueOutOfRange(key: attribute.name, entity: update.fetch.entity.name,
                                                           value: String(integer), type: attribute.type)
                }
                values[attribute.index] = computed
            }
        }
        return IncrementalStoreNode(objectID: row.objectID, values: values, version: row.version)
    }

    private func matchedRows(_ fetch: StoreFetch) throws -> [IncrementalStoreNode] {
        let result: StoreResult
        do {
            result = try execute(.fetch(fetch), in: nil)
        } catch {
            throw ObjectGraphError.predicateDoesNotCompile(predicate: fetch.predicate?.description ?? "", entity: fetch.entity.name,
                                                           reason: "\(error)")
        }
        guard case .nodes(let nodes) = result else { throw unexpected(result, answering: "the rows of a batch request") }
        return nodes
    }

    /// The error for an answer of the wrong kind from this store's own
    /// `execute(_:in:)`: reported, never read as no rows or no changes.
    func unexpected(_ result: StoreResult, answering request: String) -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: url, message: "the in-memory store answered \(request) with \(result)")
    }

    /// Throws if the updated rows would share a unique key with each other or
    /// with another row, as the SQLite store's unique index would.
    private func checkUniqueness(of updated: [IncrementalStoreNode], changing update: StoreBatchUpdate) throws {
        let entity = update.fetch.entity
        let changed = Set(update.values.map(\.attribute.name))
        let declaring = entity.rootEntity.selfAndDescendants.filter { !$0.uniquenessConstraints.isEmpty }
        guard declaring.contains(where: { $0.uniquenessConstraints.contains { !changed.isDisjoint(with: $0) } }) else { return }
        let all = try matchedRows(StoreFetch(entity: entity.rootEntity, predicate: nil, sortDescriptors: [], fetchLimit: 0, fetchOffset: 0,
                                             includesSubentities: true, resultType: .managedObject, propertiesToFetch: nil,
                                             returnsDistinctResults: false))
        var rows = Dictionary(all.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        for row in updated { rows[row.objectID] = row }
        for owner in declaring {
            for constraint in owner.uniquenessConstraints where !changed.isDisjoint(with: constraint) {
                let slots = try constraint.map { try owner.property(forKey: $0).index }
                var holders: [[PropertyValue]: ObjectID] = [:]
                for row in rows.values where row.objectID.entity.isKind(of: owner) {
                    let key = slots.map { row.values[$0] }
                    if key.contains(where: \.isNull) { continue }
                    if let other = holders.updateValue(row.objectID, forKey: key) {
                        throw ObjectGraphError.uniquenessConflict([
                            UniquenessConflict(entityName: owner.name, constraint: constraint, objectIDs: [other, row.objectID], databaseObjectID: nil),
                        ])
                    }
                }
            }
        }
    }
}
