import Foundation
import Synchronization
import Testing
import ObjectGraph

// A store a user could write: it keeps everything in one JSON file and uses only
// the public `PersistentStore` API (no `package` symbols of ObjectGraph). Gaps it
// had to work around are marked "PUBLIC API GAP".

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

    /// A user's own error, for what the store cannot do.
    struct Unsupported: Error, CustomStringConvertible {
        var description: String
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
        // PUBLIC API GAP: a store cannot tell that it is opened only to read its metadata
        // (`metadataForPersistentStore` passes an empty model), so the check is skipped then.
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
        if fetch.predicate != nil {
            // PUBLIC API GAP: `FetchPredicate.evaluate(with:)` and `PredicateSubject` are
            // `package`, so a custom store cannot filter; it would have to parse the format itself.
            throw Unsupported(description: "the JSON store cannot evaluate predicates")
        }
        let contents = state.withLock { $0 }
        var nodes: [IncrementalStoreNode] = []
        for entity in fetch.entities {
            for (key, row) in contents.rows[entity.name] ?? [:] {
                nodes.append(try node(entity: entity, key: key, row: row))
            }
        }
        nodes.sort { ($0.objectID.primaryKey ?? 0) < ($1.objectID.primaryKey ?? 0) }
        if !fetch.sortDescriptors.isEmpty {
            let keys = nodes.map { node in fetch.sortDescriptors.map { sortValue(of: node, keyPath: $0.key, contents: contents) } }
            let order = nodes.indices.sorted { lhs, rhs in
                for (index, sort) in fetch.sortDescriptors.enumerated() {
                    let result = Self.compare(keys[lhs][index], keys[rhs][index], caseInsensitive: sort.caseInsensitive)
                    if result != .orderedSame { return (result == .orderedAscending) == sort.ascending }
                }
                return lhs < rhs
            }
            nodes = order.map { nodes[$0] }
        }
        if fetch.fetchOffset > 0 { nodes = Array(nodes.dropFirst(fetch.fetchOffset)) }
        if fetch.fetchLimit > 0 { nodes = Array(nodes.prefix(fetch.fetchLimit)) }
        switch fetch.resultType {
        case .managedObject: return .nodes(nodes)
        case .managedObjectID: return .objectIDs(nodes.map(\.objectID))
        case .count: return .count(nodes.count)
        case .dictionary:
            let names = fetch.propertiesToFetch ?? fetch.entity.attributesByName.keys.sorted()
            return .dictionaries(nodes.map { node in
                let slots = Self.slots(of: node.objectID.entity)
                var dictionary: [String: PropertyValue] = [:]
                for name in names {
                    if let index = slots.firstIndex(where: { $0.name == name }) { dictionary[name] = node.values[index] }
                }
                return dictionary
            })
        }
    }

    private func execute(_ save: SaveChangesRequest) throws -> SaveResult {
        if isReadOnly { throw PersistentStoreError(.readOnly, url: url, message: "the store is read-only") }
        return try state.withLock { contents in
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
        let contents = state.withLock { $0 }
        guard let key = objectID.primaryKey, let row = contents.rows[objectID.entityName]?[key] else {
            throw ObjectGraphError.objectNotFound(objectID)
        }
        return try node(entity: objectID.entity, key: key, row: row)
    }

    func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                  in context: ManagedObjectContext?) throws -> PropertyValue {
        let node = try newValues(forObjectWith: objectID, in: context)
        let slots = Self.slots(of: objectID.entity)
        guard relationship.isToMany, let inverse = relationship.inverseRelationship, !inverse.isToMany,
              let destination = relationship.destinationEntity else {
            return slots.firstIndex { $0 === relationship }.map { node.values[$0] } ?? .null
        }
        // A one-to-many is kept as the inverse's key on the other side.
        let contents = state.withLock { $0 }
        var members: [ObjectID] = []
        for entity in Self.selfAndDescendants(destination) {
            for (key, row) in contents.rows[entity.name] ?? [:] where row.values[inverse.name] == Self.encode(.object(objectID)) {
                members.append(newObjectID(for: entity, primaryKey: key))
            }
        }
        return .objects(members.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) })
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

    // MARK: Helpers

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

    /// The slots of an entity's values, in the order the engine uses.
    ///
    /// PUBLIC API GAP: `EntityDescription.slotProperties` and `PropertyDescription.index`
    /// are `package`; a store has to rebuild the order (superentity's properties first).
    static func slots(of entity: EntityDescription) -> [PropertyDescription] {
        var chain = [entity]
        while let parent = chain[0].superentity { chain.insert(parent, at: 0) }
        return chain.flatMap(\.properties)
    }

    static func selfAndDescendants(_ entity: EntityDescription) -> [EntityDescription] {
        [entity] + entity.subentities.flatMap(selfAndDescendants)
    }

    private func row(_ node: IncrementalStoreNode, permanentIDs: [ObjectID: ObjectID]) -> Row {
        var values: [String: Value] = [:]
        for (index, property) in Self.slots(of: node.objectID.entity).enumerated() where !property.isTransient {
            var value = node.values[index]
            switch value {
            case .object(let id): value = .object(permanentIDs[id] ?? id)
            case .objects(let ids): value = .objects(ids.map { permanentIDs[$0] ?? $0 })
            default: break
            }
            if let relationship = property as? RelationshipDescription, relationship.isToMany,
               relationship.inverseRelationship?.isToMany == false {
                value = .null   // one-to-many: the other side's key holds it
            }
            values[property.name] = Self.encode(value)
        }
        return Row(version: 0, values: values)
    }

    private func node(entity: EntityDescription, key: Int64, row: Row) throws -> IncrementalStoreNode {
        let values = try Self.slots(of: entity).map { property -> PropertyValue in
            if let relationship = property as? RelationshipDescription, relationship.isToMany,
               relationship.inverseRelationship?.isToMany == false {
                return .null   // loaded on demand through newValue(forRelationship:)
            }
            return try decode(row.values[property.name] ?? .null)
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

    /// The value a sort key reaches, following to-one relationships.
    private func sortValue(of node: IncrementalStoreNode, keyPath: String, contents: Contents) -> PropertyValue {
        var current: IncrementalStoreNode? = node
        let keys = keyPath.split(separator: ".").map(String.init)
        for (position, key) in keys.enumerated() {
            guard let step = current, let index = Self.slots(of: step.objectID.entity).firstIndex(where: { $0.name == key }) else { return .null }
            let value = step.values[index]
            if position == keys.count - 1 { return value }
            guard case .object(let id) = value, let next = try? newValues(forObjectWith: id, in: nil) else { return .null }
            current = next
        }
        return .null
    }

    /// Orders two values as a fetch sorts them; nil first.
    ///
    /// PUBLIC API GAP: `FetchSort.compare` is `package`, so stores repeat it.
    static func compare(_ lhs: PropertyValue, _ rhs: PropertyValue, caseInsensitive: Bool) -> ComparisonResult {
        func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult { a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame }
        switch (lhs, rhs) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case let (.integer(a), .integer(b)): return order(a, b)
        case let (.double(a), .double(b)): return order(a, b)
        case let (.bool(a), .bool(b)): return order(a ? 1 : 0, b ? 1 : 0)
        case let (.date(a), .date(b)): return order(a, b)
        case let (.decimal(a), .decimal(b)): return order(a, b)
        case let (.string(a), .string(b)): return caseInsensitive ? order(a.lowercased(), b.lowercased()) : order(a, b)
        default: return .orderedSame
        }
    }
}

@Suite struct CustomStoreTests {
    init() {
        StoreType.register(JSONFileStore.storeType)
    }

    private func addStore(_ coordinator: PersistentStoreCoordinator, at url: URL) throws -> any PersistentStore {
        try coordinator.addPersistentStore(type: #require(StoreType.named("JSONFile")), at: url)
    }

    @Test func roundTripThroughAContext() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Ticker.json")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try addStore(coordinator, at: url)
        #expect(store.type == JSONFileStore.storeType)
        #expect(!store.identifier.isEmpty)

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for (symbol, employees) in [("MSFT", 220), ("AAPL", 160), ("ACME", 3), ("IBM", 280)] {
                let company = Company(context: context)
                company.symbol = symbol
                company.employees = employees
                let update = StockUpdate(context: context)
                update.price = Double(employees) / 10
                update.company = company
            }
            try context.save()
        }

        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            var request = FetchRequest<Company>(entityName: "Company")
            request.sortDescriptors = [FetchSort(key: "employees", ascending: false)]
            request.fetchLimit = 2
            #expect(try reader.fetch(request).map(\.symbol) == ["IBM", "MSFT"])
            request.fetchOffset = 2
            #expect(try reader.fetch(request).map(\.symbol) == ["AAPL", "ACME"])
            #expect(try reader.count(for: FetchRequest<Company>(entityName: "Company")) == 4)

            let sorted = try reader.fetch(FetchRequest<StockUpdate>(entityName: "StockUpdate", predicate: nil,
                                                                     sortDescriptors: [FetchSort(key: "company.symbol")]))
            #expect(sorted.map { $0.company?.symbol } == ["AAPL", "ACME", "IBM", "MSFT"])
            #expect(sorted[0].company?.updates.map(\.price) == [16])

            // Update one, delete another (the cascade takes its update along).
            let companies = try reader.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                   sortDescriptors: [FetchSort(key: "symbol")]))
            companies[0].employees = 161
            reader.delete(companies[1])
            try reader.save()
        }

        // Reopened from the file by another coordinator.
        try coordinator.remove(store)
        let reopened = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let again = try addStore(reopened, at: url)
        #expect(again.identifier == store.identifier)
        let fresh = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: reopened)
        try fresh.performAndWait {
            let companies = try fresh.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                  sortDescriptors: [FetchSort(key: "symbol")]))
            #expect(companies.map(\.symbol) == ["AAPL", "IBM", "MSFT"])
            #expect(companies[0].employees == 161)
            #expect(companies.map { $0.updates.count } == [1, 1, 1])
            #expect(try fresh.count(for: FetchRequest<StockUpdate>(entityName: "StockUpdate")) == 3)
            // New keys continue after the file's counter.
            let company = Company(context: fresh)
            company.symbol = "NEW"
            try fresh.save()
            #expect(company.objectID.primaryKey == 5)
        }
    }

    @Test func versionMismatchIsAMergeConflict() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        _ = try addStore(coordinator, at: directory.file("Ticker.json"))
        let first = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let second = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let id = try first.performAndWait {
            let company = Company(context: first)
            company.symbol = "A"
            try first.save()
            return company.objectID
        }
        // The second context reads version 1 and keeps the object (contexts hold unchanged objects weakly).
        let stale = try second.performAndWait {
            let company = try #require(second.existingObject(with: id) as? Company)
            #expect(company.symbol == "A")
            return company
        }
        try first.performAndWait {
            (try first.existingObject(with: id) as? Company)?.employees = 1
            try first.save()
        }
        let error = second.performAndWait {
            stale.employees = 2
            return #expect(throws: ObjectGraphError.self) { try second.save() }
        }
        guard case .mergeConflict(let conflicts)? = error else {
            Issue.record("expected a merge conflict, got \(String(describing: error))")
            return
        }
        #expect(conflicts.map(\.objectID) == [id])
        #expect(conflicts.first?.objectSnapshotVersion == 1)
        #expect(conflicts.first?.persistedSnapshotVersion == 2)
    }

    @Test func metadataOfACustomStoreWithoutAStack() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Ticker.json")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try addStore(coordinator, at: url)
        try coordinator.setMetadata(["Owner": "me"], for: store)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            Company(context: context).symbol = "A"
            try context.save()
        }
        let type = JSONFileStore.storeType
        var metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: url)
        #expect(metadata[StoreMetadataKey.storeType] as? String == "JSONFile")
        #expect(metadata[StoreMetadataKey.storeUUID] as? String == store.identifier)
        #expect(metadata["Owner"] as? String == "me")
        #expect(coordinator.managedObjectModel.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))

        metadata["Owner"] = "you"
        try PersistentStoreCoordinator.setMetadata(metadata, forPersistentStoreOfType: type, at: url)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: url)["Owner"] as? String == "you")
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: directory.file("Missing.json"))
        }
    }

    /// `migratePersistentStore` moves a custom store's objects into SQLite and back.
    @Test func customStoreMigratesToSQLiteAndBack() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let json = try addStore(coordinator, at: directory.file("Ticker.json"))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            for price in [1.0, 2.0] {
                let update = StockUpdate(context: context)
                update.price = price
                update.company = company
            }
            try context.save()
        }
        let sqlite = try coordinator.migratePersistentStore(json, to: directory.file("Ticker.sqlite"), type: .sqlite)
        let back = try coordinator.migratePersistentStore(sqlite, to: directory.file("Back.json"), type: JSONFileStore.storeType)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores[0] === back)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let prices = try reader.performAndWait {
            try reader.fetch(FetchRequest<Company>(entityName: "Company")).flatMap { $0.updates.map(\.price) }.sorted()
        }
        #expect(prices == [1, 2])
    }
}
