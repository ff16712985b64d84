import DataStackPostgreSQL
import Foundation
@_spi(StoreImplementation) import ObjectGraph
import Testing

/// A fetch of faults on PostgreSQL keeps its rows as bytes in the row cache
/// (`EncodedStoreNode`), as the SQLite store does: a fault that fires from
/// one holds exactly what a fetch of values reads, for every attribute type,
/// nulls, extreme values, text longer than a chunk, to-ones and the rows of
/// a subentity among its parent's. A row the model cannot read throws, and
/// leaves nothing cached or registered.
@Suite("PostgreSQL rows kept as bytes", .serialized)
struct PostgreSQLEncodedRowTests {
    private static let longText = String(repeating: "long text, longer than a chunk of rows — ", count: 80)

    // MARK: - The store's answer

    @Test("the store answers a fetch of faults with rows that decode to the values of a fetch of values")
    func encodedRowsDecodeToTheValuesOfAFetchOfValues() throws {
        let url = try seededDatabase()
        let coordinator = try coordinator(at: url)
        let store = coordinator.persistentStores[0]
        var fetch = StoreFetch(entity: try #require(coordinator.managedObjectModel.entitiesByName["Reading"]))
        guard case .nodes(let nodes) = try store.execute(.fetch(fetch), in: nil) else {
            Issue.record("values expected for a fetch of values")
            return
        }
        fetch.returnsObjectsAsFaults = true
        guard case .encodedNodes(let rows) = try store.execute(.fetch(fetch), in: nil) else {
            Issue.record("rows kept as bytes expected for a fetch of faults")
            return
        }
        #expect(nodes.count == 7, "four readings and three samples")
        let nodesByID = Dictionary(uniqueKeysWithValues: nodes.map { ($0.objectID, $0) })
        #expect(Set(rows.map(\.objectID)) == Set(nodesByID.keys))
        for row in rows {
            let node = try #require(nodesByID[row.objectID])
            #expect(row.values == node.values, "row \(row.objectID)")
            #expect(row.version == node.version, "version of \(row.objectID)")
        }
        #expect(Set(rows.map(\.objectID.entity.name)) == ["Reading", "Sample"])
    }

    // MARK: - Faults fired from the cache

    @Test("faults fired from the row cache hold what a fetch of values reads, every one a hit")
    func faultsFiredFromTheCacheHoldWhatAFetchOfValuesReads() throws {
        let url = try seededDatabase()
        let faults = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try coordinator(at: url))
        let fired: [ObjectID: [String: String]] = try faults.performAndWait {
            let objects = try faults.fetch(FetchRequest<ManagedObject>(entityName: "Reading"))
            #expect(objects.count == 7)
            #expect(objects.allSatisfy { $0.isFault })
            let statistics = try #require(faults.persistentStoreCoordinator?.rowCacheStatistics)
            #expect(statistics.rows >= 7, "the fetch left its rows in the cache")
            for object in objects { try object.loadValues() }
            let after = try #require(faults.persistentStoreCoordinator?.rowCacheStatistics)
            #expect(after.hits - statistics.hits == objects.count, "every fault fired from the cache")
            #expect(after.misses == statistics.misses)
            return Dictionary(uniqueKeysWithValues: try objects.map { ($0.objectID, try Self.values(of: $0)) })
        }
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try coordinator(at: url))
        let read: [ObjectID: [String: String]] = try reader.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Reading")
            request.returnsObjectsAsFaults = false
            let objects = try reader.fetch(request)
            #expect(objects.allSatisfy { !$0.isFault })
            return Dictionary(uniqueKeysWithValues: try objects.map { ($0.objectID, try Self.values(of: $0)) })
        }
        #expect(fired.count == 7)
        #expect(fired == read)

        // And by key (every object loaded by now): extremes, text and bytes as they were saved, the to-one's destination.
        try faults.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Reading", predicate: try FetchPredicate(format: "large == %@", argumentArray: [Int64.max]))
            let full = try #require(try faults.fetch(request).first)
            #expect(try full.value(forKey: "text") as? String == "Ünïcødé — 名前 🚀")
            #expect(try full.value(forKey: "small") as? Int == Int(Int16.min), "integers read as Int, as Core Data's NSNumber")
            #expect(try full.value(forKey: "medium") as? Int == Int(Int32.max))
            #expect(try full.value(forKey: "ratio") as? Double == -.infinity)
            #expect(try full.value(forKey: "flag") as? Bool == true)
            #expect(try full.value(forKey: "taken") as? Date == Date(timeIntervalSinceReferenceDate: 123_456.789_012))
            #expect(try full.value(forKey: "payload") as? Data == Data([0, 1, 2, 255]))
            #expect(try full.value(forKey: "link") as? URL == URL(string: "https://example.com/a?b=c#d"))
            #expect(try full.value(forKey: "amount") as? Decimal == Decimal(string: "12345.5"))
            let owner = try #require(try full.value(forKey: "owner") as? ManagedObject)
            #expect(try owner.value(forKey: "label") as? String == "crate")

            let long = try #require(try faults.fetch(FetchRequest<ManagedObject>(
                entityName: "Reading", predicate: try FetchPredicate(format: "large == 7"))).first)
            #expect(try long.value(forKey: "text") as? String == Self.longText)
        }
    }

    // MARK: - Rows the model cannot read

    @Test("a row whose entity number no entity has throws incompatibleModel naming it, and nothing is cached or registered")
    func unknownEntityNumberThrows() throws {
        let url = try seededDatabase()
        try execute("UPDATE ZREADING SET Z_ENT = 99 WHERE ZLARGE = 7", on: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try coordinator(at: url))
        context.performAndWait {
            let error = #expect(throws: PersistentStoreError.self) {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Reading"))
            }
            #expect(error?.code == .incompatibleModel)
            let message = String(describing: error)
            #expect(message.contains("99"), "names the entity number: \(message)")
            #expect(context.registeredObjects.isEmpty, "no fault was made for the rows read before it")
            #expect(context.persistentStoreCoordinator?.rowCacheStatistics.rows == 0, "no row was cached")
        }
    }

    @Test("a row whose version is NULL throws naming the column, and nothing is cached or registered")
    func nullVersionThrows() throws {
        let url = try seededDatabase()
        try execute("UPDATE ZREADING SET Z_OPT = NULL WHERE ZLARGE = 7", on: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try coordinator(at: url))
        context.performAndWait {
            let error = #expect(throws: (any Error).self) {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Reading"))
            }
            let message = String(describing: error)
            #expect(message.lowercased().contains("z_opt"), "names the column: \(message)")
            #expect(context.registeredObjects.isEmpty)
            #expect(context.persistentStoreCoordinator?.rowCacheStatistics.rows == 0)
        }
    }

    // MARK: - Helpers

    private static func model() -> ManagedObjectModel {
        let owner = EntityDescription(name: "Owner", properties: [
            AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "readings", destination: "Reading", inverse: "owner", isToMany: true, deleteRule: .nullify),
        ])
        let reading = EntityDescription(name: "Reading", properties: [
            AttributeDescription(name: "text", type: .string),
            AttributeDescription(name: "small", type: .integer16),
            AttributeDescription(name: "medium", type: .integer32),
            AttributeDescription(name: "large", type: .integer64),
            AttributeDescription(name: "ratio", type: .double),
            AttributeDescription(name: "weight", type: .float),
            AttributeDescription(name: "flag", type: .boolean),
            AttributeDescription(name: "taken", type: .date),
            AttributeDescription(name: "payload", type: .binaryData),
            AttributeDescription(name: "identifier", type: .uuid),
            AttributeDescription(name: "link", type: .uri),
            AttributeDescription(name: "amount", type: .decimal),
            RelationshipDescription(name: "owner", destination: "Owner", inverse: "readings", deleteRule: .nullify),
        ])
        let sample = EntityDescription(name: "Sample", properties: [
            AttributeDescription(name: "site", type: .string),
        ])
        reading.subentities = [sample]
        return ManagedObjectModel(entities: [owner, reading, sample])
    }

    /// A new database with an owner, four readings (every value set and
    /// extreme; every optional nil; empty text and bytes; text longer than a
    /// chunk) and three samples, saved in two saves so that the samples'
    /// rows lie among the readings'.
    private func seededDatabase() throws -> URL {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try coordinator(at: url))
        try context.performAndWait {
            let model = try #require(context.persistentStoreCoordinator?.managedObjectModel)
            func insert(_ entity: String) throws -> ManagedObject {
                ManagedObject(entity: try #require(model.entitiesByName[entity]), insertInto: context)
            }
            let owner = try insert("Owner")
            try owner.setValue("crate", forKey: "label")
            let full = try insert("Reading")
            try full.setValue("Ünïcødé — 名前 🚀", forKey: "text")
            try full.setValue(Int16.min, forKey: "small")
            try full.setValue(Int32.max, forKey: "medium")
            try full.setValue(Int64.max, forKey: "large")
            try full.setValue(-Double.infinity, forKey: "ratio")
            try full.setValue(Float(0.1), forKey: "weight")
            try full.setValue(true, forKey: "flag")
            try full.setValue(Date(timeIntervalSinceReferenceDate: 123_456.789_012), forKey: "taken")
            try full.setValue(Data([0, 1, 2, 255]), forKey: "payload")
            try full.setValue(UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!, forKey: "identifier")
            try full.setValue(URL(string: "https://example.com/a?b=c#d")!, forKey: "link")
            try full.setValue(Decimal(string: "12345.5")!, forKey: "amount")
            try full.setValue(owner, forKey: "owner")
            let sample = try insert("Sample")
            try sample.setValue("north", forKey: "site")
            try sample.setValue(Int64(-1), forKey: "large")
            try context.save()

            _ = try insert("Reading")   // every optional nil
            let empty = try insert("Reading")
            try empty.setValue("", forKey: "text")
            try empty.setValue(Data(), forKey: "payload")
            try empty.setValue(Int64.min, forKey: "large")
            try empty.setValue(false, forKey: "flag")
            for site in ["south", "east"] {
                let sample = try insert("Sample")
                try sample.setValue(site, forKey: "site")
                try sample.setValue(owner, forKey: "owner")
            }
            let long = try insert("Reading")
            try long.setValue(Self.longText, forKey: "text")
            try long.setValue(Int64(7), forKey: "large")
            try context.save()
        }
        return url
    }

    /// Every property's value as text, a to-one as its destination's ID:
    /// what two contexts' objects of one row must agree on.
    private static func values(of object: ManagedObject) throws -> [String: String] {
        var values: [String: String] = [:]
        for name in object.entity.propertiesByName.keys {
            let value = try object.value(forKey: name)
            values[name] = (value as? ManagedObject).map { "\($0.objectID)" } ?? String(describing: value)
        }
        return values
    }

    private func coordinator(at url: URL) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: Self.model())
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: StoreOptions())
        return coordinator
    }

    private func execute(_ sql: String, on url: URL) throws {
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        try connection.executeScript(sql)
    }
}
