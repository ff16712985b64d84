import Foundation

/// Which rows a batch delete removes and which rows it changes on the way,
/// worked out from the rows before anything is written — the same for every
/// store, so the SQLite and in-memory stores apply one set of delete rules.
///
/// The rules, per relationship of each deleted row, as a context applies
/// them to objects:
/// - `deny`: a destination refuses the whole request
///   (``ObjectGraphError/Code-swift.struct/deleteDenied``).
/// - `cascade`: the destinations are deleted too, and their rules apply in
///   turn. Each row is visited once, so a cycle ends and the work is bounded
///   by the rows reached.
/// - `nullify`: a destination whose inverse is a to-one has it cleared (a
///   changed row: its version goes up and history records it); a destination
///   whose inverse is a to-many only loses a member, kept in the deleted row
///   or its join rows, so nothing of it is written — it is reported as
///   touched, for merging.
/// - `noAction`: nothing, as in Core Data: the graph is the caller's to keep.
///
/// Join-table rows of deleted rows go with them whatever the rule.
@_spi(StoreImplementation) public struct BatchDeletePlan {
    /// The rows to delete, as they are now: the matched ones, then cascades.
    public private(set) var deleted: [IncrementalStoreNode] = []
    /// Rows that stay but whose to-one pointing at a deleted row is cleared,
    /// as they are now, with the relationships to clear.
    public private(set) var cleared: [(row: IncrementalStoreNode, relationships: [RelationshipDescription])] = []
    /// Rows that stay and lose a member of a to-many, without a column changing.
    public private(set) var touched: [ObjectID] = []

    /// - Parameters:
    ///   - matched: the rows the request selects.
    ///   - rows: reads rows by ID (IDs without a row left out).
    ///   - toMany: the destinations of a to-many relationship of several rows,
    ///     by row (rows without any may be left out): called once per
    ///     relationship and round of cascades, so a store answers with a
    ///     query per relationship rather than per row.
    public init(matched: [IncrementalStoreNode], rows: ([ObjectID]) throws -> [IncrementalStoreNode],
                 toMany: (RelationshipDescription, [ObjectID]) throws -> [ObjectID: [ObjectID]]) throws {
        var deletedIDs = Set<ObjectID>()
        var nullified: [(relationship: RelationshipDescription, destinations: [ObjectID])] = []
        var round = matched.filter { deletedIDs.insert($0.objectID).inserted }
        // Looked up once per entity, not per row: a delete can reach a million rows.
        var ruledByEntity: [ObjectIdentifier: [RelationshipDescription]] = [:]
        func ruled(_ entity: EntityDescription) -> [RelationshipDescription] {
            if let known = ruledByEntity[ObjectIdentifier(entity)] { return known }
            let relationships = Self.ruled(entity)
            ruledByEntity[ObjectIdentifier(entity)] = relationships
            return relationships
        }
        while !round.isEmpty {
            deleted += round
            // The round's to-many destinations, one call per relationship.
            var owners: [ObjectIdentifier: (relationship: RelationshipDescription, ids: [ObjectID])] = [:]
            for row in round {
                for relationship in ruled(row.objectID.entity) where relationship.isToMany {
                    owners[ObjectIdentifier(relationship), default: (relationship, [])].ids.append(row.objectID)
                }
            }
            var toManyDestinations: [ObjectIdentifier: [ObjectID: [ObjectID]]] = [:]
            for (key, entry) in owners { toManyDestinations[key] = try toMany(entry.relationship, entry.ids) }

            var cascaded: [ObjectID] = []
            for row in round {
                for relationship in ruled(row.objectID.entity) {
                    let destinations: [ObjectID]
                    if relationship.isToMany {
                        destinations = toManyDestinations[ObjectIdentifier(relationship)]?[row.objectID] ?? []
                    } else if case .object(let destination) = row.values[relationship.index] {
                        destinations = [destination]
                    } else {
                        destinations = []
                    }
                    guard !destinations.isEmpty else { continue }
                    switch relationship.deleteRule {
                    case .deny:
                        throw ObjectGraphError.deleteDenied(objectID: row.objectID,
                                                             relationship: "\(row.objectID.entity.name).\(relationship.name)")
                    case .cascade:
                        cascaded += destinations.filter { deletedIDs.insert($0).inserted }
                    case .nullify:
                        nullified.append((relationship, destinations))
                    case .noAction:
                        break
                    }
                }
            }
            round = cascaded.isEmpty ? [] : try rows(cascaded)
        }
        var clearedByID: [ObjectID: [RelationshipDescription]] = [:]
        var touched = Set<ObjectID>()
        for (relationship, destinations) in nullified {
            guard let inverse = relationship.inverseRelationship else { continue }
            for destination in destinations where !deletedIDs.contains(destination) {
                if inverse.isToMany {
                    touched.insert(destination)
                } else if !(clearedByID[destination]?.contains { $0 === inverse } ?? false) {
                    clearedByID[destination, default: []].append(inverse)
                }
            }
        }
        cleared = try rows(Array(clearedByID.keys)).map { ($0, clearedByID[$0.objectID] ?? []) }
        self.touched = touched.subtracting(clearedByID.keys).sorted { $0.description < $1.description }
    }

    /// Whether deleting the fetch's rows can involve other rows: some
    /// relationship of the entities it selects has a rule other than no
    /// action. Without, a store deletes the rows by their condition alone.
    public static func appliesRules(to fetch: StoreFetch) -> Bool {
        let entities = fetch.includesSubentities ? fetch.entity.selfAndDescendants : [fetch.entity]
        return entities.contains { !ruled($0).isEmpty }
    }

    /// The stored relationships of an entity with a rule other than no action.
    private static func ruled(_ entity: EntityDescription) -> [RelationshipDescription] {
        entity.slotProperties.compactMap { property in
            guard let relationship = property as? RelationshipDescription, !relationship.isTransient,
                  relationship.deleteRule != .noAction else { return nil }
            return relationship
        }
    }

    /// The cleared rows with their to-ones set to nil, at the version they were read.
    public var clearedRows: [IncrementalStoreNode] {
        cleared.map { entry in
            var row = entry.row
            for relationship in entry.relationships { row.values[relationship.index] = .null }
            return row
        }
    }

    /// What the delete changes, for the caller to merge.
    public func changes(historyToken: PersistentHistoryToken?) -> BatchChanges {
        BatchChanges(updatedObjectIDs: Set(cleared.map(\.row.objectID) + touched), deletedObjectIDs: Set(deleted.map(\.objectID)),
                     historyToken: historyToken)
    }
}
