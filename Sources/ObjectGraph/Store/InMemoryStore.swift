import Foundation
import Synchronization

/// A store that keeps its rows in memory (Core Data: `NSInMemoryStoreType`).
///
/// Predicates and sorts are evaluated in memory with the same evaluator that
/// matches a context's pending changes, so results agree with the SQLite
/// store's. Nothing survives the process.
public final class InMemoryStore: PersistentStore, BatchFaultingStore {
    public let url: URL?
    public let identifier: String
    public let configurationName: String?
    public let isReadOnly: Bool
    public var type: StoreType { .inMemory }

    private let model: ManagedObjectModel
    private let state: Mutex<State>

    private struct State {
        var rows: [ObjectID: IncrementalStoreNode] = [:]
        /// The last primary key handed out, per root entity name.
        var maxPrimaryKeys: [String: Int64] = [:]
        var metadata: StoreMetadata = [:]
    }

    /// Creates an empty in-memory store.
    public init(configuration: StoreConfiguration) {
        self.url = configuration.url
        self.identifier = UUID().uuidString
        self.configurationName = configuration.configurationName
        self.isReadOnly = configuration.options.isReadOnly
        self.model = configuration.model
        self.state = Mutex(State())
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
        let rows = state.withLock { $0.rows }
        let entities = Set(fetch.entities.map(ObjectIdentifier.init))
        var matches: [IncrementalStoreNode] = []
        for node in rows.values where entities.contains(ObjectIdentifier(node.objectID.entity)) {
            if let predicate = fetch.predicate {
                guard try predicate.evaluate(with: NodeSubject(node: node, rows: rows)) else { continue }
            }
            matches.append(node)
        }
        if fetch.sortDescriptors.isEmpty {
            matches.sort { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
        } else {
            let keys = matches.map { node in fetch.sortDescriptors.map { NodeSubject(node: node, rows: rows).value(atKeyPath: $0.keyPath) } }
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

    private func execute(_ save: SaveChangesRequest) throws -> SaveResult {
        try state.withLock { state in
            var conflicts: [MergeConflict] = []
            for node in save.updatedObjects + save.deletedObjects + save.lockedObjects {
                let current = state.rows[node.objectID]?.version
                if current != node.version {
                    conflicts.append(MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version,
                                                   persistedSnapshotVersion: current))
                }
            }
            if !conflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts) }
            var mapping: [ObjectID: ObjectID] = [:]
            for node in save.insertedObjects where node.objectID.isTemporaryID {
                let root = node.objectID.entity.rootEntity.name
                let pk = (state.maxPrimaryKeys[root] ?? 0) + 1
                state.maxPrimaryKeys[root] = pk
                mapping[node.objectID] = newObjectID(for: node.objectID.entity, primaryKey: pk)
            }
            for node in save.insertedObjects {
                let id = mapping[node.objectID] ?? node.objectID
                state.rows[id] = IncrementalStoreNode(objectID: id, values: Self.storedValues(node.values, mapping: mapping, entity: id.entity), version: 1)
            }
            for node in save.updatedObjects {
                guard let old = state.rows[node.objectID] else { continue }
                var values = Self.storedValues(node.values, mapping: mapping, entity: node.objectID.entity)
                // An unloaded many-to-many (nil) keeps what the store has.
                for index in values.indices where values[index].isNull && old.values[index] != .null {
                    if case .objects = old.values[index] { values[index] = old.values[index] }
                }
                state.rows[node.objectID] = IncrementalStoreNode(objectID: node.objectID, values: values, version: old.version + 1)
            }
            for node in save.deletedObjects {
                state.rows[node.objectID] = nil
            }
            return SaveResult(permanentIDs: mapping)
        }
    }

    /// The values a row keeps: temporary IDs replaced, one-to-many slots left
    /// to the inverse's foreign key (nil), as the SQLite store keeps them.
    private static func storedValues(_ values: ContiguousArray<PropertyValue>, mapping: [ObjectID: ObjectID],
                                     entity: EntityDescription) -> ContiguousArray<PropertyValue> {
        var stored = ContiguousArray(values.map { $0.remappingIDs(mapping) })
        for case let relationship as RelationshipDescription in entity.slotProperties
        where relationship.isToMany && relationship.inverseRelationship?.isToMany == false {
            stored[relationship.index] = .null
        }
        return stored
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
        guard relationship.isToMany, let inverse = relationship.inverseRelationship, !inverse.isToMany else {
            return node.values[relationship.index]
        }
        // As in the SQLite file, a one-to-many lives in the inverse's foreign key.
        let rows = state.withLock { $0.rows }
        let members = rows.values.filter { row in
            row.objectID.entity.isKind(of: inverse.entity ?? row.objectID.entity)
                && row.values.indices.contains(inverse.index) && row.values[inverse.index] == .object(objectID)
        }
        return .objects(members.map(\.objectID).sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) })
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

/// A stored row seen by the predicate evaluator: relationships lead to other rows.
private struct NodeSubject: PredicateSubject {
    var node: IncrementalStoreNode
    var rows: [ObjectID: IncrementalStoreNode]

    func predicateValue(forKey key: String) throws -> PredicateValue {
        let property = try node.objectID.entity.property(forKey: key)
        let value = node.values[property.index]
        switch value {
        case .object(let id):
            return rows[id].map { .subject(NodeSubject(node: $0, rows: rows)) } ?? .value(.null)
        case .objects(let ids):
            return .collection(ids.compactMap { rows[$0] }.map { .subject(NodeSubject(node: $0, rows: rows)) })
        default:
            return .value(value)
        }
    }

    var predicateObjectID: ObjectID? { node.objectID }

    func value(atKeyPath keyPath: [String]) -> PropertyValue {
        var current = self
        for (position, key) in keyPath.enumerated() {
            guard let property = current.node.objectID.entity.propertiesByName[key] else { return .null }
            let value = current.node.values[property.index]
            if position == keyPath.count - 1 { return value }
            guard case .object(let id) = value, let next = rows[id] else { return .null }
            current = NodeSubject(node: next, rows: rows)
        }
        return .null
    }
}
