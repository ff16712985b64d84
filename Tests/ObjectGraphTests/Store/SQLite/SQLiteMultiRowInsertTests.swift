@_spi(StoreImplementation) @testable import DataStackStorage
import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// The SQLite store inserts a run of new rows of one entity several a
/// statement (`EntityStatements.insertRowsSQL`, 32 rows): each row still
/// lands under its own key with its entity's number and version 1, and a
/// row the table refuses is named as it is when rows go one at a time, with
/// nothing of the save kept.
@Suite struct SQLiteMultiRowInsertTests {
    /// Cars and trucks share the vehicles' table, each with its own `Z_ENT`:
    /// runs of 45 (one statement of 32, 13 alone), 7 (all alone) and 70.
    @Test func eachRowOfARunLandsUnderItsKeyWithItsEntitysNumber() throws {
        let graph = try GraphStack()
        let model = graph.coordinator.managedObjectModel
        let context = graph.context()
        let runs: [(entity: String, count: Int)] = [("Car", 45), ("Truck", 7), ("Car", 70)]
        let saved: [(id: ObjectID, plate: String, entity: String)] = try context.performAndWait {
            var objects: [(ManagedObject, String, String)] = []
            for (run, (entity, count)) in runs.enumerated() {
                for index in 0..<count {
                    let vehicle: Vehicle = entity == "Car" ? Car(context: context) : Truck(context: context)
                    vehicle.plate = "\(entity)-\(run)-\(index)"
                    objects.append((vehicle, vehicle.plate, entity))
                }
            }
            let (_, statements) = try graph.countingStatements { try context.save() }
            // 45: one of 32 rows and 13 alone; 7 alone; 70: two of 32 and 6 alone.
            #expect(statements.filter { $0.hasPrefix("INSERT INTO ZVEHICLE") }.count == 14 + 7 + 8)
            return objects.map { ($0.0.objectID, $0.1, $0.2) }
        }
        #expect(saved.count == 122)

        let file = try FixtureSQLite(path: graph.storeURL.path, model: model)
        let vehicle = try #require(model.entitiesByName["Vehicle"])
        var rowsByKey: [Int64: [String: FixtureSQLite.Value]] = [:]
        for entity in ["Car", "Truck"] {
            rowsByKey.merge(try file.rows(of: try #require(model.entitiesByName[entity]))) { first, _ in first }
        }
        #expect(rowsByKey.count == 122, "one row per object")
        for object in saved {
            let key = try #require(object.id.primaryKey)
            let row = try #require(rowsByKey[key], "no row for \(object.plate)")
            #expect(row["ZPLATE"] == .text(object.plate), "row \(key)")
            #expect(row["Z_ENT"] == .integer(try #require(file.entityNumbers[object.entity])), "row \(key) of \(object.entity)")
            #expect(row["Z_OPT"] == .integer(1), "row \(key)")
        }
        #expect(file.table(for: vehicle) == "ZVEHICLE")

        // Read back through another context, every value where its ID says.
        let reader = graph.context()
        let plates = try reader.performAndWait {
            try saved.map { try (reader.existingObject(with: $0.id) as? Vehicle)?.plate }
        }
        #expect(plates == saved.map(\.plate))
    }

    typealias RecordingResolver = SaveConflictResolverContractTests.RecordingResolver
    typealias Refusal = SaveConflictResolverContractTests.Refusal

    /// A store holding listing ACME at price 1, and 70 new listings' rows
    /// (L0…L69, price 100 + n) of which the one at `duplicate` is ACME again.
    /// A context checks its keys against the store before it saves; a row sent
    /// to the store directly meets the table's unique index, as a row saved
    /// by another process between that check and the write would.
    private func seventyRows(duplicate: Int) throws -> (graph: GraphStack, store: any PersistentStore, read: IncrementalStoreNode,
                                                         rows: [IncrementalStoreNode]) {
        let graph = try GraphStack()
        let id = try graph.saveListings([("ACME", 1)])[0]
        let store = try #require(graph.coordinator.persistentStores.first)
        let read = try store.newValues(forObjectWith: id, in: nil)
        let entity = read.objectID.entity
        let symbol = try #require(entity.propertiesByName["symbol"]).index
        let price = try #require(entity.propertiesByName["price"]).index
        let rows = (0..<70).map { index in
            var values = ContiguousArray(repeating: PropertyValue.null, count: read.values.count)
            values[symbol] = .string(index == duplicate ? "ACME" : "L\(index)")
            values[price] = .double(Double(index) + 100)
            return IncrementalStoreNode(objectID: .temporary(for: entity), values: values, version: 0)
        }
        return (graph, store, read, rows)
    }

    /// The 41st of 70 new rows repeats a stored key: the statement of 32 rows
    /// it is in is refused, and the resolver hears of that row alone; when it
    /// refuses too, no row of the save is kept.
    @Test func aDuplicateInAStatementOfSeveralRowsIsNamedAloneAndARefusalKeepsNothing() throws {
        let (graph, store, _, rows) = try seventyRows(duplicate: 40)
        let resolver = RecordingResolver { _ in throw Refusal() }
        #expect(throws: Refusal.self) {
            _ = try store.execute(.save(SaveChangesRequest(insertedObjects: rows, conflictResolver: resolver)), in: nil)
        }
        let received = try #require(resolver.received.first)
        #expect(resolver.received.count == 1)
        #expect(received.uniquenessConflicts.map(\.entityName) == ["Listing"])
        #expect(received.uniquenessConflicts.first?.objectIDs.contains(rows[40].objectID) == true)
        #expect(received.uniquenessConflicts.flatMap(\.objectIDs).allSatisfy { $0 == rows[40].objectID || !$0.isTemporaryID },
                "no other new row is named: \(received.uniquenessConflicts)")
        #expect(try graph.prices() == ["ACME": 1], "nothing of the refused save is kept")
    }

    /// The resolver's answer — the other 69 rows, and ACME at the newcomer's
    /// price — is written whole.
    @Test func theResolversAnswerToADuplicateInAStatementOfSeveralRowsIsWritten() throws {
        let (graph, store, read, rows) = try seventyRows(duplicate: 5)
        let price = try #require(read.objectID.entity.propertiesByName["price"]).index
        let resolver = RecordingResolver { _ in
            var merged = try store.newValues(forObjectWith: read.objectID, in: nil)
            merged.values[price] = .double(105)
            var others = rows
            others.remove(at: 5)
            return SaveChangesRequest(insertedObjects: others, updatedObjects: [merged])
        }
        _ = try store.execute(.save(SaveChangesRequest(insertedObjects: rows, conflictResolver: resolver)), in: nil)
        #expect(resolver.received.count == 1)
        let prices = try graph.prices()
        #expect(prices.count == 70, "69 new listings and ACME")
        #expect(prices["ACME"] == 105)
        #expect(prices["L69"] == 169)
        #expect(prices["L0"] == 100)
    }

    /// Rows of many columns go fewer a statement, staying under SQLite's
    /// oldest limit of 999 parameters; past 499 columns, one a statement.
    @Test func wideRowsGoFewerAStatement() {
        func statements(columns: Int) -> EntityStatements {
            let attributes = (0..<columns).map { TableLayout.Column(name: "ZA\($0)", kind: .attribute(.integer64)) }
            return EntityStatements(table: "ZWIDE", columns: attributes, entityNumber: 7)
        }
        let narrow = statements(columns: 5)
        #expect(narrow.rowsPerInsert == 32)
        // SQLite's placeholders are numbered in the order they appear.
        #expect(narrow.insertSQL == "INSERT INTO ZWIDE (Z_PK, Z_ENT, Z_OPT, ZA0, ZA1, ZA2, ZA3, ZA4) VALUES (?, 7, 1, ?, ?, ?, ?, ?)")
        let rows = narrow.insertRowsSQL.dropFirst(narrow.insertPrefix.count).components(separatedBy: "), (")
        #expect(rows.count == 32)
        #expect(Set(rows.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "()")) }) == ["?, 7, 1, ?, ?, ?, ?, ?"])
        #expect(statements(columns: 99).rowsPerInsert == 9)
        #expect(statements(columns: 499).rowsPerInsert == 1)
        #expect(statements(columns: 600).rowsPerInsert == 1)
    }

    /// The INSERT of any number of rows is one text (the batches of a store
    /// across a network use it too): each row's key and columns numbered on
    /// from the row before, its entity's number and version written in.
    @Test func anInsertOfSeveralRowsNumbersEachRowsParametersOn() {
        let columns = [TableLayout.Column(name: "ZA", kind: .attribute(.integer64)), TableLayout.Column(name: "ZB", kind: .attribute(.string))]
        let statements = EntityStatements(table: "ZT", columns: columns, entityNumber: 3, dialect: DefaultSpellingsDialect())
        #expect(statements.insertParametersPerRow == 3)
        #expect(statements.insertSQL == "INSERT INTO ZT (Z_PK, Z_ENT, Z_OPT, ZA, ZB) VALUES (?1, 3, 1, ?2, ?3)")
        #expect(statements.insertSQL(rows: 1) == statements.insertSQL)
        #expect(statements.insertSQL(rows: 3)
            == "INSERT INTO ZT (Z_PK, Z_ENT, Z_OPT, ZA, ZB) VALUES (?1, 3, 1, ?2, ?3), (?4, 3, 1, ?5, ?6), (?7, 3, 1, ?8, ?9)")
        #expect(statements.insertRowsSQL == statements.insertSQL(rows: statements.rowsPerInsert))
    }
}
