import Foundation
import Synchronization
import ObjectGraph
import DataStackStores

// A store a user could write: it keeps everything in one JSON file and uses only
// the public `PersistentStore` API (no `package` symbols of ObjectGraph).
// Predicates are evaluated in memory with `FetchPredicate.evaluate(with:)` over
// `RowSubject`, and sorts use `FetchSort.compare`, so fetches agree with the built-in stores.

/// One JSON file holding every row, rewritten atomically at each save.
final class JSONFileStore: PersistentStore {
    static let storeType = StoreType(rawValue: "JSONFile") { try JSONFileStore(configuration: $0) }

    let url: URL?
    let configurationName: String?
    let isReadOnly: Bool
    var type: StoreType { Self.storeType }

    private let fileURL: URL
    private let model: ManagedObjectModel
    private let state = Mutex(Contents())
    /// Held by a save from its first check to its last write (its write
    /// transaction), while the context resolves its conflicts too; reads take `state` only.
    private let writeLock = Mutex(())
    /// The UUID apart from the rows: `newObjectID(for:primaryKey:)` reads `identifier`
    /// while `state` is locked.
    private let uuid = Mutex("")

    /// The file's contents.
    struct Contents: Codable {
        var uuid = ""
        var versionHashes: [String: Data] = [:]
        var userMetadata: [String: String] = [:]
        /// The last primary key handed out, by root entity name.
        var maxKeys: [String: Int64] = [:]
        /// Rows by entity name, then primary key.
        var rows: [String: [Int64: Row]] = [:]
    }

    struct Row: Codable, Equatable {
        var version: Int64
        var values: [String: Value]
    }

    /// A property value as JSON.
    enum Value: Codable, Equatable {
        case null
        case integer(Int64), double(Double), bool(Bool), string(String), date(Date), data(Data)
        case uuid(UUID), uri(URL), decimal(String)
        case object(entity: String, key: Int64)
        case objects([Reference])
    }

    struct Reference: Codable, Equatable {
        var entity: String
        var key: Int64
    }

    init(configuration: StoreConfiguration) throws {
        guard let url = configuration.url else {
            throw PersistentStoreError(.missingLocation, url: nil, message: "a JSON file store needs a file URL")
        }
        self.url = url
        self.fileURL = url
        self.model = configuration.model
        self.configurationName = configuration.configurationName
        self.isReadOnly = configuration.options.isReadOnly
    }

    var identifier: String { uuid.withLock { $0 } }

    var metadata: StoreMetadata {
        state.withLock { contents in
            var metadata: StoreMetadata = contents.userMetadata
            metadata[StoreMetadataKey.storeType] = type.rawValue
            metadata[StoreMetadataKey.storeUUID] = contents.uuid
            metadata[StoreMetadataKey.modelVersionHashes] = contents.versionHashes
            return metadata
        }
    }

    func setMetadata(_ metadata: StoreMetadata) throws {
        let user = metadata.filter { !$0.key.hasPrefix("NS") }.compactMapValues { $0 as? String }
        state.withLock { $0.userMetadata = user }
    }

    func loadMetadata() throws {
        let data = (try? Data(contentsOf: fileURL)) ?? Data()
        if data.isEmpty {
            // A new (or zero-length) file is a new store.
            guard !isReadOnly else { throw PersistentStoreError(.readOnly, url: url, message: "no store here") }
            var contents = Contents()
            contents.uuid = UUID().uuidString
            contents.versionHashes = model.entityVersionHashesByName
            try write(contents)
            state.withLock { $0 = contents }
            uuid.withLock { $0 = contents.uuid }
            return
        }
        let contents: Contents
        do {
            contents = try JSONDecoder().decode(Contents.self, from: data)
        } catch {
            throw PersistentStoreError(.notAStore, url: url, message: "the file is not a JSON store", underlying: error)
        }
        // `metadataForPersistentStore` opens other store types with an empty model to
        // read their metadata, so the model check applies only to a real model.
        if !model.entities.isEmpty,
           !model.isConfiguration(withName: configurationName, compatibleWithStoreMetadata: [StoreMetadataKey.modelVersionHashes: contents.versionHashes]) {
            throw PersistentStoreError(.incompatibleModel, url: url, message: "the store was written with another model")
        }
        state.withLock { $0 = contents }
        uuid.withLock { $0 = contents.uuid }
    }

    // MARK: Requests

    func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult {
        switch request {
        case .fetch(let fetch): return try execute(fetch)
        case .save(let save): return .saved(try execute(save))
        }
    }

    private func execute(_ fetch: StoreFetch) throws -> StoreResult {
        let contents = state.withLock { $0 }
        var matches: [RowSubject] = []
        for entity in fetch.entities {
            for (key, row) in contents.rows[entity.name] ?? [:] {
                let subject = RowSubject(node: try node(entity: entity, key: key, row: row), store: self, contents: contents)
                if let predicate = fetch.predicate, try !predicate.evaluate(with: subject) { continue }
                matches.append(subject)
            }
        }
        matches.sort { ($0.node.objectID.primaryKey ?? 0) < ($1.node.objectID.primaryKey ?? 0) }
        if !fetch.sortDescriptors.isEmpty {
            let keys = try matches.map { subject in try fetch.sortDescriptors.map { try subject.value(atKeyPath: $0.key) } }
            let order = matches.indices.sorted { lhs, rhs in
                for (index, sort) in fetch.sortDescriptors.enumerated() {
                    let result = FetchSort.compare(keys[lhs][index], keys[rhs][index], caseInsensitive: sort.caseInsensitive)
                    if result != .orderedSame { return (result == .orderedAscending) == sort.ascending }
                }
                return lhs < rhs
            }
            matches = order.map { matches[$0] }
        }
        var nodes = matches.map(\.node)
        if fetch.fetchOffset > 0 { nodes = Array(nodes.dropFirst(fetch.fetchOffset)) }
        if fetch.fetchLimit > 0 { nodes = Array(nodes.prefix(fetch.fetchLimit)) }
        switch fetch.resultType {
        case .managedObject: return .nodes(nodes)
        case .managedObjectID: return .objectIDs(nodes.map(\.objectID))
        case .count: return .count(nodes.count)
        case .dictionary:
            let names = fetch.propertiesToFetch ?? fetch.entity.slotProperties.compactMap { ($0 as? AttributeDescription)?.name }
            return .dictionaries(nodes.map { node in
                var dictionary: [String: PropertyValue] = [:]
                for name in names {
                    if let property = node.objectID.entity.propertiesByName[name] { dictionary[name] = node.values[property.index] }
                }
                return dictionary
            })
        }
    }

    /// A save as the `SaveConflictResolver` contract says: attempts under the
    /// write lock, each all or nothing, the conflicts resolved in between.
    private func execute(_ save: SaveChangesRequest) throws -> SaveResult {
        if isReadOnly { throw PersistentStoreError.readOnly(url: url) }
        return try writeLock.withLock { _ in
            try save.writeResolvingConflicts(attempt: apply, currentRows: { objectIDs in
                let contents = state.withLock { $0 }
                return try objectIDs.compactMap { try node(for: $0, in: contents) }
            })
        }
    }

    private func apply(_ save: SaveChangesRequest) throws -> SaveResult {
        try state.withLock { contents in
            var next = contents
            var conflicts: [MergeConflict] = []
            for node in save.updatedObjects + save.deletedObjects + save.lockedObjects {
                let current = node.objectID.primaryKey.flatMap { next.rows[node.objectID.entityName]?[$0]?.version }
                if current != node.version {
                    conflicts.append(MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version,
                                                   persistedSnapshotVersion: current))
                }
            }
            if !conflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts) }

            var permanentIDs: [ObjectID: ObjectID] = [:]
            for node in save.insertedObjects where node.objectID.isTemporaryID {
                permanentIDs[node.objectID] = allocateID(for: node.objectID.entity, in: &next)
            }
            for node in save.insertedObjects {
                let id = permanentIDs[node.objectID] ?? node.objectID
                guard let key = id.primaryKey else { continue }
                next.rows[id.entityName, default: [:]][key] = Row(version: 1, values: row(node, permanentIDs: permanentIDs).values)
            }
            for node in save.updatedObjects {
                guard let key = node.objectID.primaryKey, let old = next.rows[node.objectID.entityName]?[key] else { continue }
                var values = row(node, permanentIDs: permanentIDs).values
                for (name, value) in values where value == .null {
                    if case .objects = old.values[name] { values[name] = old.values[name] }   // an unloaded many-to-many
                }
                next.rows[node.objectID.entityName]?[key] = Row(version: old.version + 1, values: values)
            }
            for node in save.deletedObjects {
                if let key = node.objectID.primaryKey { next.rows[node.objectID.entityName]?[key] = nil }
            }
            try write(next)
            contents = next
            return SaveResult(permanentIDs: permanentIDs)
        }
    }

    func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
        guard let node = try node(for: objectID, in: state.withLock({ $0 })) else {
            throw ObjectGraphError.objectNotFound(objectID)
        }
        return node
    }

    func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                  in context: ManagedObjectContext?) throws -> PropertyValue {
        let contents = state.withLock { $0 }
        guard let node = try node(for: objectID, in: contents) else { throw ObjectGraphError.objectNotFound(objectID) }
        if Self.isKeptByInverse(relationship) {
            return .objects(members(of: relationship, for: objectID, in: contents))
        }
        return node.values[relationship.index]
    }

    func obtainPermanentIDs(for objectIDs: [ObjectID]) throws -> [ObjectID] {
        try state.withLock { contents in
            var next = contents
            let ids = objectIDs.map { $0.isTemporaryID ? allocateID(for: $0.entity, in: &next) : $0 }
            try write(next)
            contents = next
            return ids
        }
    }

    // MARK: Rows

    /// The node of the row `objectID` names in `contents`, or nil if there is none.
    func node(for objectID: ObjectID, in contents: Contents) throws -> IncrementalStoreNode? {
        guard let key = objectID.primaryKey, let row = contents.rows[objectID.entityName]?[key] else { return nil }
        return try node(entity: objectID.entity, key: key, row: row)
    }

    /// The destinations of a one-to-many: the rows whose inverse holds `objectID`.
    func members(of relationship: RelationshipDescription, for objectID: ObjectID, in contents: Contents) -> [ObjectID] {
        guard let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity else { return [] }
        let owner = Self.encode(.object(objectID))
        var members: [ObjectID] = []
        for entity in Self.selfAndDescendants(destination) {
            for (key, row) in contents.rows[entity.name] ?? [:] where row.values[inverse.name] == owner {
                members.append(newObjectID(for: entity, primaryKey: key))
            }
        }
        return members.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
    }

    /// Whether a relationship is a one-to-many, which rows do not hold: the other side's key does.
    static func isKeptByInverse(_ property: PropertyDescription) -> Bool {
        guard let relationship = property as? RelationshipDescription else { return false }
        return relationship.isToMany && relationship.inverseRelationship?.isToMany == false
    }

    static func selfAndDescendants(_ entity: EntityDescription) -> [EntityDescription] {
        [entity] + entity.subentities.flatMap(selfAndDescendants)
    }

    private func write(_ contents: Contents) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try encoder.encode(contents).write(to: fileURL, options: .atomic)
        } catch {
            throw PersistentStoreError(.ioFailure, url: url, message: "could not write the JSON file", underlying: error)
        }
    }

    private func allocateID(for entity: EntityDescription, in contents: inout Contents) -> ObjectID {
        var root = entity
        while let parent = root.superentity { root = parent }
        let key = (contents.maxKeys[root.name] ?? 0) + 1
        contents.maxKeys[root.name] = key
        return newObjectID(for: entity, primaryKey: key)
    }

    private func row(_ node: IncrementalStoreNode, permanentIDs: [ObjectID: ObjectID]) -> Row {
        var values: [String: Value] = [:]
        for property in node.objectID.entity.slotProperties where !property.isTransient {
            var value = node.values[property.index]
            switch value {
            case .object(let id): value = .object(permanentIDs[id] ?? id)
            case .objects(let ids): value = .objects(ids.map { permanentIDs[$0] ?? $0 })
            default: break
            }
            values[property.name] = Self.isKeptByInverse(property) ? .null : Self.encode(value)
        }
        return Row(version: 0, values: values)
    }

    private func node(entity: EntityDescription, key: Int64, row: Row) throws -> IncrementalStoreNode {
        let values = try entity.slotProperties.map { property -> PropertyValue in
            // A one-to-many is loaded on demand through newValue(forRelationship:).
            Self.isKeptByInverse(property) ? .null : try decode(row.values[property.name] ?? .null)
        }
        return IncrementalStoreNode(objectID: newObjectID(for: entity, primaryKey: key), values: ContiguousArray(values), version: row.version)
    }

    static func encode(_ value: PropertyValue) -> Value {
        switch value {
        case .null: .null
        case .integer(let v): .integer(v)
        case .double(let v): .double(v)
        case .bool(let v): .bool(v)
        case .string(let v): .string(v)
        case .date(let v): .date(v)
        case .data(let v): .data(v)
        case .uuid(let v): .uuid(v)
        case .uri(let v): .uri(v)
        case .decimal(let v): .decimal("\(v)")
        case .object(let id): .object(entity: id.entityName, key: id.primaryKey ?? 0)
        case .objects(let ids): .objects(ids.map { Reference(entity: $0.entityName, key: $0.primaryKey ?? 0) })
        }
    }

    private func decode(_ value: Value) throws -> PropertyValue {
        func id(_ entity: String, _ key: Int64) throws -> ObjectID {
            guard let description = model.entitiesByName[entity] else {
                throw PersistentStoreError(.incompatibleModel, url: url, message: "the model has no entity \(entity)")
            }
            return newObjectID(for: description, primaryKey: key)
        }
        switch value {
        case .null: return .null
        case .integer(let v): return .integer(v)
        case .double(let v): return .double(v)
        case .bool(let v): return .bool(v)
        case .string(let v): return .string(v)
        case .date(let v): return .date(v)
        case .data(let v): return .data(v)
        case .uuid(let v): return .uuid(v)
        case .uri(let v): return .uri(v)
        case .decimal(let v): return Decimal(string: v).map(PropertyValue.decimal) ?? .null
        case .object(let entity, let key): return .object(try id(entity, key))
        case .objects(let references): return .objects(try references.map { try id($0.entity, $0.key) })
        }
    }
}

/// A row as the predicate evaluator and the sort see it: relationships lead to
/// other rows of the same snapshot of the file's contents.
struct RowSubject: PredicateSubject {
    let node: IncrementalStoreNode
    let store: JSONFileStore
    let contents: JSONFileStore.Contents

    func predicateValue(forKey key: String) throws -> PredicateValue {
        let entity = node.objectID.entity
        guard let property = entity.propertiesByName[key] else { throw ObjectGraphError.unknownKey(key, entity: entity.name) }
        if let relationship = property as? RelationshipDescription, JSONFileStore.isKeptByInverse(relationship) {
            let members = store.members(of: relationship, for: node.objectID, in: contents)
            return .collection(try members.compactMap(row).map(PredicateValue.subject))
        }
        switch node.values[property.index] {
        case .object(let id): return try row(id).map(PredicateValue.subject) ?? .value(.null)
        case .objects(let ids): return .collection(try ids.compactMap(row).map(PredicateValue.subject))
        case let value: return .value(value)
        }
    }

    var predicateObjectID: ObjectID? { node.objectID }

    /// The value a sort key reaches, following to-one relationships; nil past an empty one.
    func value(atKeyPath keyPath: String) throws -> PropertyValue {
        var current = self
        let keys = keyPath.split(separator: ".").map(String.init)
        for (position, key) in keys.enumerated() {
            guard let property = current.node.objectID.entity.propertiesByName[key] else {
                throw ObjectGraphError.unknownKey(key, entity: current.node.objectID.entityName)
            }
            let value = current.node.values[property.index]
            if position == keys.count - 1 { return value }
            guard case .object(let id) = value, let next = try current.row(id) else { return .null }
            current = next
        }
        return .null
    }

    /// The subject of another row, or nil if the row is gone.
    private func row(_ id: ObjectID) throws -> RowSubject? {
        try store.node(for: id, in: contents).map { RowSubject(node: $0, store: store, contents: contents) }
    }
}
