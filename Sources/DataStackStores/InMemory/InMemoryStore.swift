@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A store that keeps its rows in memory (Core Data: `NSInMemoryStoreType`).
///
/// Predicates and sorts are evaluated in memory with the same evaluator that
/// matches a context's pending changes, so results agree with the SQLite
/// store's. Nothing survives the process.
///
/// Relationships are kept as the SQLite store keeps them: a one-to-many by its
/// inverse's to-one (plus a rank per member when ordered, like `Z_FOK_`), a
/// many-to-many as the rows of a join table written by one side (the side that
/// would name the SQLite join table) and ranked by each ordered side.
public final class InMemoryStore: PersistentStore, BatchFaultingStore {
    public let url: URL?
    public let identifier: String
    public let configurationName: String?
    public let isReadOnly: Bool
    public var type: StoreType { .inMemory }

    private let model: ManagedObjectModel
    private let state: Locked<State>
    /// Held by a save from its first check to its last write — the store's
    /// write transaction — while its conflicts are resolved too. Reads take
    /// only `state`, so a resolver reading the store meanwhile never waits for it.
    private let writeLock = NSLock()
    /// Whether any entity declares a uniqueness constraint: without one, a save checks none.
    private let checksUniqueness: Bool
    /// Core Data's entity numbers for the model, to pick the side of a many-to-many that writes.
    private let entityNumbers: [String: Int64]

    fileprivate struct State {
        var rows: [ObjectID: IncrementalStoreNode] = [:]
        /// The last primary key handed out, per root entity name.
        var maxPrimaryKeys: [String: Int64] = [:]
        var metadata: StoreMetadata = [:]
        /// Many-to-many rows, by the relationship that writes them.
        var joins: [ObjectIdentifier: JoinRows] = [:]
        /// Ranks of members of ordered one-to-many relationships, by member and the to-one's slot.
        var ranks: [ObjectID: [Int: Int64]] = [:]
        /// The rows whose to-one points at a row: the index a one-to-many is read from.
        var referrers: [Referrer: Set<ObjectID>] = [:]
    }

    /// A to-one relationship and the row it points at.
    fileprivate struct Referrer: Hashable {
        let relationship: ObjectIdentifier
        let target: ObjectID
    }

    /// One join table: each owner's members in the writing relationship's order,
    /// and each member's owners in the inverse's order.
    fileprivate struct JoinRows {
        var members: [ObjectID: [ObjectID]] = [:]
        var owners: [ObjectID: [ObjectID]] = [:]
    }

    /// Creates an empty in-memory store.
    public init(configuration: StoreConfiguration) {
        self.url = configuration.url
        self.identifier = UUID().uuidString
        self.configurationName = configuration.configurationName
        self.isReadOnly = configuration.options.isReadOnly
        self.model = configuration.model
        self.state = Locked(State())
        self.checksUniqueness = configuration.model.entities.contains { !$0.uniquenessConstraints.isEmpty }
        self.entityNumbers = TableLayout.coreDataNumbers(for: configuration.model.entities)
    }

    public var metadata: StoreMetadata {
        var metadata = state.withLock { $0.metadata }
        metadata[StoreMetadataKey.storeType] = type.rawValue
        metadata[StoreMetadataKey.storeUUID] = identifier
        metadata[StoreMetadataKey.modelVersionHashes] = model.entityVersionHashesByName
        return metadata
    }

    public func setMetadata(_ metadata: StoreMetadata) throws {
        state.withLock { $0.metadata = metadata }
    }

    public func loadMetadata() throws {}

    // MARK: - Requests

    public func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult {
        switch request {
        case .fetch(let fetch): return try execute(fetch)
        case .save(let save): return .saved(try execute(save))
        }
    }

    private func execute(_ fetch: StoreFetch) throws -> StoreResult {
        let snapshot = state.withLock { $0 }
        let rows = snapshot.rows
        let toMany: (RelationshipDescription, ObjectID) -> [ObjectID] = { [self] relationship, id in
            destinations(relationship, of: id, in: snapshot)
        }
        let entities = Set(fetch.entities.map(ObjectIdentifier.init))
        var matches: [IncrementalStoreNode] = []
        for node in rows.values where entities.contains(ObjectIdentifier(node.objectID.entity)) {
            if let predicate = fetch.predicate {
                guard try predicate.evaluate(with: NodeSubject(node: node, rows: rows, toMany: toMany)) else { continue }
            }
            matches.append(node)
        }
        if fetch.resultType == .dictionary, let expressions = fetch.expressions {
            let subjects = matches.map { NodeSubject(node: $0, rows: rows, toMany: toMany) }
            return .dictionaries(try expressions.results(for: subjects, of: fetch))   // ExpressionFetch+Evaluation.swift
        }
        if fetch.sortDescriptors.isEmpty {
            matches.sort { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
        } else {
            let paths = try fetch.sortDescriptors.map { try ToOneKeyPath($0.keyPath, from: fetch.entity) }
            let keys = matches.map { node in
                zip(fetch.sortDescriptors, paths).map { $0.sortValue(NodeSubject(node: node, rows: rows, toMany: toMany).value(at: $1)) }
            }
            let order = matches.indices.sorted { lhs, rhs in
                for (index, sort) in fetch.sortDescriptors.enumerated() {
                    let result = FetchSort.compare(keys[lhs][index], keys[rhs][index], caseInsensitive: sort.caseInsensitive)
                    if result != .orderedSame { return (result == .orderedAscending) == sort.ascending }
                }
                return (matches[lhs].objectID.primaryKey ?? 0) < (matches[rhs].objectID.primaryKey ?? 0)
            }
            matches = order.map { matches[$0] }
        }
        if fetch.fetchOffset > 0 { matches = Array(matches.dropFirst(fetch.fetchOffset)) }
        if fetch.fetchLimit > 0 { matches = Array(matches.prefix(fetch.fetchLimit)) }
        switch fetch.resultType {
        case .managedObject: return .nodes(matches)
        case .managedObjectID: return .objectIDs(matches.map(\.objectID))
        case .count: return .count(matches.count)
        case .dictionary:
            let names = fetch.propertiesToFetch ?? fetch.entity.slotProperties.compactMap { ($0 as? AttributeDescription)?.name }
            var dictionaries = matches.map { node in
                Dictionary(uniqueKeysWithValues: names.compactMap { name -> (String, PropertyValue)? in
                    guard let property = node.objectID.entity.propertiesByName[name] else { return nil }
                    return (name, node.values[property.index])
                })
            }
            if fetch.returnsDistinctResults {
                var seen = Set<[String: PropertyValue]>()
                dictionaries = dictionaries.filter { seen.insert($0).inserted }
            }
            return .dictionaries(dictionaries)
        }
    }

    /// Writes a save under the write lock, its conflicts settled by the
    /// request's resolver in between attempts (the ``SaveConflictResolver``
    /// contract); each attempt checks everything before it changes anything.
    private func execute(_ save: SaveChangesRequest) throws -> SaveResult {
        try writeLock.withLock {
            try save.writeResolvingConflicts(attempt: { request in
                try state.withLock { try write(request, into: &$0) }
            }, currentRows: { objectIDs in
                state.withLock { state in objectIDs.compactMap { state.rows[$0] } }
            })
        }
    }

    /// One attempt: every version, then every uniqueness constraint, checked
    /// before any row changes, so a conflict leaves the store as it was.
    private func write(_ save: SaveChangesRequest, into state: inout State) throws -> SaveResult {
        var conflicts: [MergeConflict] = []
        for node in save.updatedObjects + save.deletedObjects + save.lockedObjects {
            let current = state.rows[node.objectID]?.version
            if current != node.version {
                conflicts.append(MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version,
                                               persistedSnapshotVersion: current))
            }
        }
        if !conflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts) }
        if checksUniqueness, let refused = Self.uniquenessConflict(in: save, rows: state.rows) {
            throw ObjectGraphError.uniquenessConflict([refused])
        }
        var mapping: [ObjectID: ObjectID] = [:]
        for node in save.insertedObjects where node.objectID.isTemporaryID {
            let root = node.objectID.entity.rootEntity.name
            let pk = (state.maxPrimaryKeys[root] ?? 0) + 1
            state.maxPrimaryKeys[root] = pk
            mapping[node.objectID] = newObjectID(for: node.objectID.entity, primaryKey: pk)
        }
        for node in save.insertedObjects {
            let id = mapping[node.objectID] ?? node.objectID
            let row = IncrementalStoreNode(objectID: id, values: Self.storedValues(node.values, mapping: mapping, entity: id.entity), version: 1)
            Self.index(row, adding: true, in: &state)
            state.rows[id] = row
        }
        for node in save.updatedObjects {
            guard let old = state.rows[node.objectID] else { continue }
            let values = Self.storedValues(node.values, mapping: mapping, entity: node.objectID.entity)
            let row = IncrementalStoreNode(objectID: node.objectID, values: values, version: old.version + 1)
            Self.index(old, adding: false, in: &state)
            Self.index(row, adding: true, in: &state)
            state.rows[node.objectID] = row
        }
        for node in save.deletedObjects {
            if let old = state.rows.removeValue(forKey: node.objectID) { Self.index(old, adding: false, in: &state) }
        }
        writeRelationships(of: save, mapping: mapping, into: &state)
        return SaveResult(permanentIDs: mapping)
    }

    /// The first row a save would leave holding a uniqueness constraint's
    /// values that another row holds — what a unique index refuses in the
    /// SQLite store — or nil.
    ///
    /// - Complexity: O(*n*) per constraint of a saved entity, *n* = rows stored.
    private static func uniquenessConflict(in save: SaveChangesRequest, rows: [ObjectID: IncrementalStoreNode]) -> UniquenessConflict? {
        let written = save.updatedObjects + save.insertedObjects
        var constraints: [(entity: EntityDescription, keys: [String], slots: [Int])] = []
        var seen = Set<ObjectIdentifier>()
        for node in written where seen.insert(ObjectIdentifier(node.objectID.entity)).inserted {
            var entity: EntityDescription? = node.objectID.entity
            while let declaring = entity {
                for keys in declaring.uniquenessConstraints
                where !keys.isEmpty && !constraints.contains(where: { $0.entity === declaring && $0.keys == keys }) {
                    let slots = keys.compactMap { declaring.propertiesByName[$0]?.index }
                    if slots.count == keys.count { constraints.append((declaring, keys, slots)) }
                }
                entity = declaring.superentity
            }
        }
        if constraints.isEmpty { return nil }
        // Rows the save rewrites or removes hold their new values, or none.
        var replaced = Set(save.updatedObjects.map(\.objectID))
        for node in save.deletedObjects { replaced.insert(node.objectID) }
        for constraint in constraints {
            var holders: [[PropertyValue]: ObjectID] = [:]
            for row in rows.values where !replaced.contains(row.objectID) && row.objectID.entity.isKind(of: constraint.entity) {
                let tuple = constraint.slots.map { row.values[$0] }
                if !tuple.contains(where: \.isNull) { holders[tuple] = row.objectID }
            }
            for node in written where node.objectID.entity.isKind(of: constraint.entity) {
                let tuple = constraint.slots.map { node.values[$0] }
                if tuple.contains(where: \.isNull) { continue }
                if let holder = holders.updateValue(node.objectID, forKey: tuple), holder != node.objectID {
                    return UniquenessConflict(entityName: constraint.entity.name, constraint: constraint.keys,
                                              objectIDs: [node.objectID], databaseObjectID: holder.isTemporaryID ? nil : holder)
                }
            }
        }
        return nil
    }

    /// The values a row keeps: temporary IDs replaced, to-many slots left to the
    /// inverse's to-one or to the join rows (nil), as the SQLite store keeps them.
    private static func storedValues(_ values: ContiguousArray<PropertyValue>, mapping: [ObjectID: ObjectID],
                                     entity: EntityDescription) -> ContiguousArray<PropertyValue> {
        var stored = ContiguousArray(values.map { $0.remappingIDs(mapping) })
        for case let relationship as RelationshipDescription in entity.slotProperties where relationship.isToMany {
            stored[relationship.index] = .null
        }
        return stored
    }

    // MARK: - Relationships

    /// Adds a row's to-one values to (or removes them from) the referrer index.
    private static func index(_ row: IncrementalStoreNode, adding: Bool, in state: inout State) {
        let entity = row.objectID.entity
        guard entity.hasRelationships else { return }
        for case let relationship as RelationshipDescription in entity.slotProperties where !relationship.isToMany {
            guard row.values.indices.contains(relationship.index), case .object(let target) = row.values[relationship.index] else { continue }
            let key = Referrer(relationship: ObjectIdentifier(relationship), target: target)
            if adding {
                state.referrers[key, default: []].insert(row.objectID)
            } else {
                state.referrers[key]?.remove(row.objectID)
                if state.referrers[key]?.isEmpty == true { state.referrers[key] = nil }
            }
        }
    }

    /// The relationship that writes a many-to-many's rows (the side that would
    /// name the SQLite join table), or nil for a relationship without join rows.
    private func writingSide(of relationship: RelationshipDescription) -> RelationshipDescription? {
        guard TableLayout.usesJoinTable(relationship) else { return nil }
        return TableLayout.joinTableCandidates(for: relationship, numbers: entityNumbers).first
    }

    /// Writes join rows and ranks from the loaded to-many slots of a save, and
    /// removes deleted rows from every join.
    private func writeRelationships(of save: SaveChangesRequest, mapping: [ObjectID: ObjectID], into state: inout State) {
        let written = save.insertedObjects + save.updatedObjects
        for primaryPass in [true, false] {
            for node in written where node.objectID.entity.hasRelationships {
                let owner = mapping[node.objectID] ?? node.objectID
                for case let relationship as RelationshipDescription in node.objectID.entity.slotProperties where relationship.isToMany {
                    guard case .objects(let raw) = node.values[relationship.index] else { continue }
                    var seen = Set<ObjectID>()
                    let ids = raw.map { mapping[$0] ?? $0 }.filter { seen.insert($0).inserted }
                    if let writer = writingSide(of: relationship) {
                        let key = ObjectIdentifier(writer)
                        if writer === relationship && primaryPass {
                            var join = state.joins[key] ?? JoinRows()
                            let old = join.members[owner] ?? []
                            let new = Set(ids)
                            for member in old where !new.contains(member) { join.owners[member]?.removeAll { $0 == owner } }
                            let oldSet = Set(old)
                            for member in ids where !oldSet.contains(member) { join.owners[member, default: []].append(owner) }
                            join.members[owner] = ids.isEmpty ? nil : ids
                            state.joins[key] = join
                        } else if writer !== relationship && !primaryPass && relationship.isOrdered {
                            // The inverse side ranks the rows the writing side made.
                            guard var join = state.joins[key], let current = join.owners[owner] else { continue }
                            let position = Dictionary(ids.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
                            join.owners[owner] = current.enumerated().sorted {
                                (position[$0.element] ?? Int.max, $0.offset) < (position[$1.element] ?? Int.max, $1.offset)
                            }.map(\.element)
                            state.joins[key] = join
                        }
                    } else if primaryPass, relationship.isOrdered, let inverse = relationship.inverseRelationship, !inverse.isToMany {
                        for (position, member) in ids.enumerated() {
                            state.ranks[member, default: [:]][inverse.index] = Int64(position + 1) * 1024
                        }
                    }
                }
            }
        }
        for node in save.deletedObjects {
            let id = node.objectID
            state.ranks[id] = nil
            for (key, var join) in state.joins {
                var changed = false
                if let members = join.members.removeValue(forKey: id) {
                    for member in members { join.owners[member]?.removeAll { $0 == id } }
                    changed = true
                }
                if let owners = join.owners.removeValue(forKey: id) {
                    for owner in owners { join.members[owner]?.removeAll { $0 == id } }
                    changed = true
                }
                if changed { state.joins[key] = join }
            }
        }
    }

    /// The destinations of a to-many of one row, as the SQLite store would return them.
    fileprivate func destinations(_ relationship: RelationshipDescription, of objectID: ObjectID, in state: State) -> [ObjectID] {
        func byKey(_ a: ObjectID, _ b: ObjectID) -> Bool { (a.primaryKey ?? 0) < (b.primaryKey ?? 0) }
        if let writer = writingSide(of: relationship) {
            let join = state.joins[ObjectIdentifier(writer)]
            let ids = ((writer === relationship ? join?.members[objectID] : join?.owners[objectID]) ?? [])
                .filter { state.rows[$0] != nil }
            return relationship.isOrdered ? ids : ids.sorted(by: byKey)
        }
        guard let inverse = relationship.inverseRelationship, !inverse.isToMany else { return [] }
        // As in the SQLite file, a one-to-many lives in the inverse's foreign key.
        let members = (state.referrers[Referrer(relationship: ObjectIdentifier(inverse), target: objectID)] ?? [])
            .filter { state.rows[$0] != nil }
        guard relationship.isOrdered else { return members.sorted(by: byKey) }
        // Unranked rows first, as SQLite sorts NULL `Z_FOK_` values.
        return members.sorted {
            let lhs = state.ranks[$0]?[inverse.index] ?? .min, rhs = state.ranks[$1]?[inverse.index] ?? .min
            return lhs != rhs ? lhs < rhs : byKey($0, $1)
        }
    }

    // MARK: - Faults

    public func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
        guard let node = state.withLock({ $0.rows[objectID] }) else { throw ObjectGraphError.objectNotFound(objectID) }
        return node
    }

    public func newValues(forObjectsWith objectIDs: [ObjectID], in context: ManagedObjectContext?) throws -> [IncrementalStoreNode] {
        state.withLock { state in objectIDs.compactMap { state.rows[$0] } }
    }

    public func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                         in context: ManagedObjectContext?) throws -> PropertyValue {
        let node = try newValues(forObjectWith: objectID, in: context)
        guard relationship.isToMany else { return node.values[relationship.index] }
        let snapshot = state.withLock { $0 }
        return .objects(destinations(relationship, of: objectID, in: snapshot))
    }

    public func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] {
        state.withLock { state in
            objectIDs.map { id in
                guard id.isTemporaryID else { return id }
                let root = id.entity.rootEntity.name
                let pk = (state.maxPrimaryKeys[root] ?? 0) + 1
                state.maxPrimaryKeys[root] = pk
                return newObjectID(for: id.entity, primaryKey: pk)
            }
        }
    }
}

extension InMemoryStore: RelationshipPrefetchingStore, UniquenessCheckingStore {
    public func prefetch(_ relationship: RelationshipDescription, forObjectsWith objectIDs: [ObjectID]) throws -> RelationshipPrefetch {
        let snapshot = state.withLock { $0 }
        var result = RelationshipPrefetch()
        for owner in objectIDs where snapshot.rows[owner] != nil {
            let ids = destinations(relationship, of: owner, in: snapshot)
            guard !ids.isEmpty else { continue }
            result.destinations[owner] = ids
            result.nodes.append(contentsOf: ids.compactMap { snapshot.rows[$0] })
        }
        return result
    }

    public func objectIDs(of entity: EntityDescription, matching keys: [String], values: [[PropertyValue]]) throws -> [ObjectID?] {
        let indexes = try keys.map { try entity.property(forKey: $0).index }
        let rows = state.withLock { $0.rows }
        var byValues: [[PropertyValue]: ObjectID] = [:]
        for row in rows.values where row.objectID.entity.isKind(of: entity) {
            let tuple = indexes.map { row.values[$0] }
            if tuple.contains(where: \.isNull) { continue }
            if let existing = byValues[tuple], (existing.primaryKey ?? 0) < (row.objectID.primaryKey ?? 0) { continue }
            byValues[tuple] = row.objectID
        }
        return values.map { tuple in tuple.contains(where: \.isNull) ? nil : byValues[tuple] }
    }
}

/// A stored row seen by the predicate evaluator and by expressions: relationships lead to other rows.
struct NodeSubject: PredicateSubject {
    var node: IncrementalStoreNode
    var rows: [ObjectID: IncrementalStoreNode]
    /// The destinations of a to-many, which rows do not hold.
    var toMany: (RelationshipDescription, ObjectID) -> [ObjectID]

    func predicateValue(forKey key: String) throws -> PredicateValue {
        let property = try node.objectID.entity.property(forKey: key)
        var value = node.values[property.index]
        if let relationship = property as? RelationshipDescription, relationship.isToMany, value.isNull {
            value = .objects(toMany(relationship, node.objectID))
        }
        switch value {
        case .object(let id):
            return rows[id].map { .subject(NodeSubject(node: $0, rows: rows, toMany: toMany)) } ?? .value(.null)
        case .objects(let ids):
            return .collection(ids.compactMap { rows[$0] }.map { .subject(NodeSubject(node: $0, rows: rows, toMany: toMany)) })
        default:
            return .value(value)
        }
    }

    var predicateObjectID: ObjectID? { node.objectID }

    func value(at path: ToOneKeyPath) -> PropertyValue {
        path.value(from: self, read: { subject, property in subject.node.values[property.index] },
                   destination: { id in rows[id].map { NodeSubject(node: $0, rows: rows, toMany: toMany) } })
    }
}
