import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// Batch inserts on both stores: dictionaries and handlers, defaults and
/// conversions, keys and versions, uniqueness under each merge policy,
/// history, results, and bad input that changes nothing.
@Suite struct BatchInsertTests {
    private func listings(_ context: ManagedObjectContext) throws -> [String] {
        try context.performAndWait {
            try context.fetch(FetchRequest<Listing>(entityName: "Listing", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")]))
                .map { "\($0.symbol) \($0.name ?? "-") \($0.price)" }
        }
    }

    // MARK: - Rows

    @Test(arguments: allStoreTypes)
    func dictionariesInsertRowsWithTheModelsDefaultsAtVersionOne(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        var request = BatchInsertRequest(entityName: "Listing", objects: [
            ["symbol": "A", "name": "Alpha", "price": 10.5],
            ["symbol": "B"],
        ])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(save.insertedObjectIDs.count == 2 && save.updatedObjectIDs.isEmpty && save.deletedObjectIDs.isEmpty)
        #expect(save.insertedObjectIDs.allSatisfy { !$0.isTemporaryID && $0.entity.name == "Listing" })
        #expect(try listings(graph.context()) == ["A Alpha 10.5", "B - 0.0"])
        #expect(try save.insertedObjectIDs.map(graph.version(of:)) == [1, 1])
        // The IDs are the rows': each reads back as its object.
        let check = graph.context()
        let symbols = try check.performAndWait {
            try save.insertedObjectIDs.map { try #require(check.existingObject(with: $0) as? Listing).symbol }.sorted()
        }
        #expect(symbols == ["A", "B"])
    }

    @Test(arguments: allStoreTypes)
    func aHandlerGivesRowsUntilItReturnsTrueAndTheLastCallInsertsNothing(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let symbols = ["H0", "H1", "H2"]
        var request = BatchInsertRequest(entityName: "Listing") { index, row in
            #expect(row.isEmpty, "each call starts from an empty dictionary")
            guard index < symbols.count else {
                row["symbol"] = "NOT-INSERTED"
                return true
            }
            row["symbol"] = symbols[index]
            row["price"] = index * 2
            return false
        }
        request.resultType = .count
        #expect(try context.performAndWait { try context.execute(request) } == .count(3))
        #expect(try listings(graph.context()) == ["H0 - 0.0", "H1 - 2.0", "H2 - 4.0"])
    }

    @Test(arguments: allStoreTypes)
    func valuesAreConvertedAsKeyValueCodingConvertsThem(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let name: String? = nil
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Listing", objects: [
                ["symbol": "INT", "price": UInt8(7), "name": name],
                ["symbol": "FLOAT", "price": Float(1.5), "name": Optional("named")],
            ]))
            _ = try context.execute(BatchInsertRequest(entityName: "Seat", objects: [["row": "a", "number": Int16(12)]]))
        }
        #expect(try listings(graph.context()) == ["FLOAT named 1.5", "INT - 7.0"])
        let check = graph.context()
        let number = try check.performAndWait {
            try check.fetch(FetchRequest<Seat>(entityName: "Seat")).map(\.number)
        }
        #expect(number == [12])
    }

    /// Values of the Swift type an attribute keeps are taken as they are (read in
    /// place from the existential); the rest are converted, out-of-range integers
    /// refused. Keys are matched by name whatever their representation: long
    /// names, names built at run time, dictionaries each in an order of its own.
    @Test(arguments: allStoreTypes)
    func valuesOfEachAttributesOwnTypeAreTakenAsTheyAreAndKeysMatchWhateverTheirForm(type: StoreType) throws {
        let names = ["aLongStringAttributeName", "double", "integer64", "small", "flag", "when", "aLongOptionalTextName"]
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Sample", managedObjectClass: ManagedObject.self, properties: [
                AttributeDescription(name: names[0], type: .string, isOptional: false),
                AttributeDescription(name: names[1], type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: names[2], type: .integer64, isOptional: false, defaultValue: .integer(0)),
                AttributeDescription(name: names[3], type: .integer16, isOptional: true),
                AttributeDescription(name: names[4], type: .boolean, isOptional: true),
                AttributeDescription(name: names[5], type: .date, isOptional: true),
                AttributeDescription(name: names[6], type: .string, isOptional: true),
            ]),
        ])
        let stack = try TestStack(type: type, model: model)
        let date = Date(timeIntervalSinceReferenceDate: 123_456.75)
        // Keys made at run time: their storage is not the model's names'.
        func key(_ index: Int) -> String { String(decoding: Array(names[index].utf8), as: UTF8.self) }
        let long = String(repeating: "long text é ", count: 4)
        let rows: [[String: any Sendable]] = (0..<40).map { index in
            var row: [String: any Sendable] = [key(0): "row \(index) \(long)", names[1]: Double(index) + 0.5,
                                               key(2): index.isMultiple(of: 2) ? Int(index) : Int64(index) * 1_000_000_000_000]
            if index.isMultiple(of: 3) { row[names[3]] = Int(-index) }
            if index.isMultiple(of: 4) { row[key(4)] = index.isMultiple(of: 8) }
            if index.isMultiple(of: 5) { row[names[5]] = date.addingTimeInterval(Double(index)) }
            if index.isMultiple(of: 6) { row[key(6)] = index == 0 ? "é" : "s\(index)" }
            // Converted, not taken as they are: another integer type, a float, an Int into a double.
            if index == 7 { row[names[1]] = Int(7) }
            if index == 9 { row[names[3]] = Int8(9) }
            if index == 11 { row[names[1]] = Float(11.5) }
            return row
        }
        let context = stack.newContext()
        try context.performAndWait { _ = try context.execute(BatchInsertRequest(entityName: "Sample", objects: rows)) }
        let read = stack.newContext()
        let stored = try read.performAndWait {
            try read.fetch(FetchRequest<ManagedObject>(entityName: "Sample", predicate: nil, sortDescriptors: [FetchSort(key: names[1])]))
                .map { object in try names.map { String(describing: try object.value(forKey: $0) ?? "nil") } }
        }
        #expect(stored.count == 40)
        for (index, values) in stored.enumerated() {
            #expect(values[0] == "row \(index) \(long)")
            #expect(values[1] == String(describing: index == 7 ? 7.0 : Double(index) + 0.5))
            #expect(values[2] == String(index.isMultiple(of: 2) ? Int64(index) : Int64(index) * 1_000_000_000_000))
            #expect(values[3] == (index == 9 ? "9" : index.isMultiple(of: 3) ? String(-index) : "nil"))
            #expect(values[4] == (index.isMultiple(of: 4) ? String(index.isMultiple(of: 8)) : "nil"))
            #expect(values[5] == (index.isMultiple(of: 5) ? String(describing: date.addingTimeInterval(Double(index))) : "nil"))
            #expect(values[6] == (index == 0 ? "é" : index.isMultiple(of: 6) ? "s\(index)" : "nil"))
        }
        // An Int or Int64 out of a 16-bit attribute's range is refused as any other value would be.
        for value: any Sendable in [Int(Int16.max) + 1, Int64(Int16.min) - 1] {
            let refused = context.performAndWait { () -> (any Error)? in
                do { _ = try context.execute(BatchInsertRequest(entityName: "Sample", objects: [[names[0]: "x", names[3]: value]])) } catch { return error }
                return nil
            }
            #expect(refused as? ObjectGraphError
                == .valueOutOfRange(key: names[3], entity: "Sample", value: "\(value)", type: .integer16))
        }
        // A value of another type where a String is kept is refused, not read as a string.
        let wrong = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(BatchInsertRequest(entityName: "Sample", objects: [[names[0]: 42]])) } catch { return error }
            return nil
        }
        #expect((wrong as? ObjectGraphError)?.code == .wrongValueType)
    }

    @Test(arguments: allStoreTypes)
    func rowsAreOfTheEntityExactlyAndSubentitiesKeepTheirDefaults(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Car", objects: [["plate": "C1"], ["plate": "C2", "seats": 2]]))
            _ = try context.execute(BatchInsertRequest(entityName: "Truck", objects: [["plate": "T1", "load": 3.5]]))
        }
        let check = graph.context()
        let vehicles = try check.performAndWait {
            try check.fetch(FetchRequest<ManagedObject>(entityName: "Vehicle", predicate: nil, sortDescriptors: [FetchSort(key: "plate")]))
                .map { "\($0.entity.name) \(try $0.value(forKey: "plate") ?? "-")" }
        }
        #expect(vehicles == ["Car C1", "Car C2", "Truck T1"])
        let seats = try check.performAndWait {
            try check.fetch(FetchRequest<Car>(entityName: "Car", predicate: nil, sortDescriptors: [FetchSort(key: "plate")]))
                .map { try $0.value(forKey: "seats") as? Int }
        }
        #expect(seats == [4, 2])
    }

    @Test(arguments: allStoreTypes)
    func eachResultTypeAnswersAsAsked(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        #expect(try context.performAndWait { try context.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "S"]])) }
            == .statusOnly)
        var count = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "C1"], ["symbol": "C2"]])
        count.resultType = .count
        #expect(try context.performAndWait { try context.execute(count) } == .count(2))
        var none = BatchInsertRequest(entityName: "Listing", objects: [])
        none.resultType = .objectIDs
        #expect(try context.performAndWait { try context.execute(none) } == .objectIDs(ContextDidSave()))
        #expect(try graph.count("Listing") == 3)
    }

    @Test(arguments: allStoreTypes)
    func theDidSaveNotificationCarriesTheInsertedIDsForMerging(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let saves = BatchInsertSaveLog()
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context,
                                                              queue: nil) { notification in
            if let save = try? ContextDidSave(notification) { saves.append(save) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "N1"], ["symbol": "N2"]])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        #expect(saves.all.count == 1)
        #expect(result == .objectIDs(try #require(saves.all.first)))
        #expect(saves.all.first?.insertedObjectIDs.count == 2)
        // An empty request posts nothing.
        try context.performAndWait { _ = try context.execute(BatchInsertRequest(entityName: "Listing", objects: [])) }
        #expect(saves.all.count == 1)
    }

    // MARK: - Keys and versions in the file

    @Test func primaryKeysComeFromOneBlockAndRowsAreWrittenAsASaveWritesThem() throws {
        let graph = try GraphStack(.sqlite)
        _ = try graph.saveListings([("OLD", 1)])
        let raw = try SQLiteReference(graph.storeURL)
        let listingNumber = try #require(raw.rows("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Listing'").first?.first ?? nil)
        #expect(try raw.rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Listing'") == [["1"]])
        let context = graph.context()
        let rows = (0..<5).map { ["symbol": "K\($0)", "price": Double($0)] as [String: any Sendable] }
        let (_, statements) = try graph.countingStatements {
            try context.performAndWait { try context.execute(BatchInsertRequest(entityName: "Listing", objects: rows)) }
        }
        #expect(statements.filter { $0.contains("UPDATE Z_PRIMARYKEY") }.count == 1, "\(statements)")
        #expect(statements.filter { $0.hasPrefix("INSERT INTO ZLISTING") }.count == 5)
        #expect(try raw.rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Listing'") == [["6"]])
        #expect(try raw.rows("SELECT Z_PK, Z_ENT, Z_OPT, ZSYMBOL FROM ZLISTING ORDER BY Z_PK") == [
            ["1", listingNumber, "1", "OLD"], ["2", listingNumber, "1", "K0"], ["3", listingNumber, "1", "K1"],
            ["4", listingNumber, "1", "K2"], ["5", listingNumber, "1", "K3"], ["6", listingNumber, "1", "K4"],
        ])
        // A save after the batch takes the next key.
        let next = try graph.saveListings([("NEXT", 1)])
        #expect(next.first?.primaryKey == 7)
    }

    // MARK: - Uniqueness

    @Test(arguments: allStoreTypes)
    func aKeyAlreadyStoredFailsNamingTheConstraintAndValueAndChangesNothing(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10)])
        let before = try graph.rows()
        let dump = try type == .sqlite ? SQLiteReference(graph.storeURL).dump() : []
        let context = graph.context()
        let error = context.performAndWait { () -> (any Error)? in
            do {
                _ = try context.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "B"], ["symbol": "A", "price": 1]]))
            } catch { return error }
            return nil
        }
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Listing", constraint: ["symbol"], values: [.string("A")], row: 1,
                                                             storedObjectID: ids[0]), "\(String(describing: error))")
        #expect((error as? ObjectGraphError)?.description.contains("(symbol) = (\"A\")") == true)
        // What the error names is readable without parsing its text.
        let refused = try #require(error as? ObjectGraphError)
        #expect(refused.code == .duplicateKey && refused.entityName == "Listing" && refused.row == 1)
        #expect(refused.uniquenessConflicts == [UniquenessConflict(entityName: "Listing", constraint: ["symbol"], objectIDs: [], databaseObjectID: ids[0])])
        #expect(try graph.rows() == before)
        if type == .sqlite { #expect(try SQLiteReference(graph.storeURL).dump() == dump) }
    }

    @Test(arguments: allStoreTypes)
    func aKeyRepeatedWithinTheRequestFailsNamingTheLaterRow(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let error = context.performAndWait { () -> (any Error)? in
            do {
                _ = try context.execute(BatchInsertRequest(entityName: "Seat", objects: [
                    ["row": "a", "number": 1], ["row": "a", "number": 2], ["row": "a", "number": 1],
                ]))
            } catch { return error }
            return nil
        }
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Seat", constraint: ["row", "number"], values: [.string("a"), .integer(1)],
                                                             row: 2, storedObjectID: nil), "\(String(describing: error))")
        #expect(try graph.count("Seat") == 0)
    }

    @Test(arguments: allStoreTypes, [MergePolicy.mergeByPropertyObjectTrump, .overwrite])
    func objectTrumpUpsertsTheGivenValuesAndReportsTheStoredRowAsUpdated(type: StoreType, policy: MergePolicy) throws {
        let graph = try GraphStack(type)
        let writer = graph.context()
        let stored = try writer.performAndWait {
            let listing = Listing(context: writer)
            listing.symbol = "A"
            listing.name = "kept"
            listing.price = 10
            try writer.save()
            return listing.objectID
        }
        let context = graph.context(policy)
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 11], ["symbol": "N", "price": 1]])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(save.updatedObjectIDs == [stored])
        #expect(save.insertedObjectIDs.count == 1 && !save.insertedObjectIDs.contains(stored))
        #expect(try listings(graph.context()) == ["A kept 11.0", "N - 1.0"])
        #expect(try graph.version(of: stored) == 2)
        #expect(try save.insertedObjectIDs.map(graph.version(of:)) == [1])
        // The writer's object is stale now: its next save meets the bumped version.
        try writer.performAndWait {
            let listing = try #require(writer.existingObject(with: stored) as? Listing)
            listing.name = "stale"
            #expect(throws: ObjectGraphError.self) { try writer.save() }
        }
    }

    /// The store tells an upsert's insert from its update by the connection's
    /// last inserted rowid; a request rolled back before leaves that rowid at
    /// the key the next request starts from, which must not pass for an insert.
    @Test(arguments: allStoreTypes)
    func anUpsertAfterARolledBackRequestStillTellsUpdatesFromInserts(type: StoreType) throws {
        let graph = try GraphStack(type)
        let stored = try graph.saveListings([("A", 10), ("B", 20)])
        let failing = graph.context(.error)
        let refused = #expect(throws: ObjectGraphError.self) {
            try failing.performAndWait {
                try failing.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "C"], ["symbol": "A"]]))
            }
        }
        #expect(refused?.code == .duplicateKey)
        let context = graph.context(.mergeByPropertyObjectTrump)
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 11], ["symbol": "D", "price": 4]])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(save.updatedObjectIDs == [stored[0]])
        #expect(save.insertedObjectIDs.count == 1 && save.insertedObjectIDs.isDisjoint(with: stored))
        #expect(try listings(graph.context()) == ["A - 11.0", "B - 20.0", "D - 4.0"])
        #expect(try graph.version(of: stored[0]) == 2)
    }

    @Test(arguments: allStoreTypes, [MergePolicy.mergeByPropertyStoreTrump, .rollback])
    func storeTrumpKeepsTheStoredRowAsItIs(type: StoreType, policy: MergePolicy) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10)])
        let context = graph.context(policy)
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 11, "name": "new"], ["symbol": "N"]])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(save.updatedObjectIDs.isEmpty && save.insertedObjectIDs.count == 1)
        #expect(try listings(graph.context()) == ["A - 10.0", "N - 0.0"])
        #expect(try graph.version(of: ids[0]) == 1)
    }

    @Test(arguments: allStoreTypes)
    func duplicatesWithinOneRequestCollapseIntoOneInsertedRow(type: StoreType) throws {
        for (policy, expected) in [(MergePolicy.mergeByPropertyObjectTrump, "D named 2.0"), (.mergeByPropertyStoreTrump, "D - 1.0")] {
            let graph = try GraphStack(type)
            let context = graph.context(policy)
            var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "D", "price": 1], ["symbol": "D", "price": 2, "name": "named"]])
            request.resultType = .objectIDs
            let result = try context.performAndWait { try context.execute(request) }
            guard case .objectIDs(let save) = result else {
                Issue.record("\(result)")
                continue
            }
            #expect(save.insertedObjectIDs.count == 1 && save.updatedObjectIDs.isEmpty, "\(policy)")
            #expect(try listings(graph.context()) == [expected], "\(policy)")
            // An insert is at version 1 however many rows of the request it took.
            #expect(try save.insertedObjectIDs.map(graph.version(of:)) == [1], "\(policy)")
        }
    }

    @Test(arguments: allStoreTypes)
    func anUpsertNeverOverwritesARowOfAnotherEntity(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context(.mergeByPropertyObjectTrump)
        let truck = try context.performAndWait {
            let truck = Truck(context: context)
            truck.plate = "X"
            try context.save()
            return truck.objectID
        }
        let before = try graph.rows()
        let error = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(BatchInsertRequest(entityName: "Car", objects: [["plate": "Y"], ["plate": "X", "seats": 9]])) } catch { return error }
            return nil
        }
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Vehicle", constraint: ["plate"], values: [.string("X")], row: 1,
                                                             storedObjectID: truck), "\(String(describing: error))")
        #expect(try graph.rows() == before)
    }

    // MARK: - History

    @Test func historyRecordsOneTransactionWithAnInsertPerRowAndAnUpdatePerUpsert() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try PersistentHistoryTests.open(url, model: GraphTestModel.make())
        let seeder = PersistentHistoryTests.context(coordinator, author: "seeder")
        let stored = try seeder.performAndWait {
            let listing = Listing(context: seeder)
            listing.symbol = "A"
            try seeder.save()
            return listing.objectID
        }
        let importer = PersistentHistoryTests.context(coordinator, author: "batch-importer", name: "Importer")
        importer.mergePolicy = .mergeByPropertyObjectTrump
        var request = BatchInsertRequest(entityName: "Listing", objects: [
            ["symbol": "N1"], ["symbol": "A", "price": 3], ["symbol": "N2", "price": 2], ["symbol": "N3"],
        ])
        request.resultType = .objectIDs
        let result = try importer.performAndWait { try importer.execute(request) }

        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.count == 2)
        let last = try #require(history.last)
        #expect(last.author == "batch-importer" && last.contextName == "Importer")
        let changes = last.changes ?? []
        #expect(changes.filter { $0.changeType == .insert }.count == 3)
        #expect(changes.filter { $0.changeType == .update }.map(\.changedObjectID) == [stored])
        #expect(changes.first { $0.changeType == .update }?.updatedProperties == ["price"])
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(Set(changes.filter { $0.changeType == .insert }.map(\.changedObjectID)) == save.insertedObjectIDs)
        #expect(save.historyTokens == [last.token])
        let raw = try SQLiteReference(url)
        #expect(try raw.rows("SELECT COUNT(*) FROM ACHANGE WHERE ZCOLUMNS IS NULL AND ZCHANGETYPE = 0 AND ZTRANSACTIONID = \(last.transactionNumber)")
            == [["3"]])
    }

    /// Upserts giving different attributes record each stored row's own columns;
    /// a row upserted twice by one request records the columns of both.
    @Test func upsertsRecordTheColumnsEachStoredRowWasGivenAcrossTheRequest() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try PersistentHistoryTests.open(url, model: GraphTestModel.make())
        let seeder = PersistentHistoryTests.context(coordinator, author: "seeder")
        let stored = try seeder.performAndWait {
            let listings = ["A", "B", "C"].map { symbol in
                let listing = Listing(context: seeder)
                listing.symbol = symbol
                listing.price = 1
                return listing
            }
            try seeder.save()
            return listings.map(\.objectID)
        }
        let importer = PersistentHistoryTests.context(coordinator, author: "upserter")
        importer.mergePolicy = .mergeByPropertyObjectTrump
        var request = BatchInsertRequest(entityName: "Listing", objects: [
            ["symbol": "A", "price": 3], ["symbol": "B", "name": "bee"], ["symbol": "N", "price": 9], ["symbol": "A", "name": "ay"],
            ["symbol": "C", "price": 5], ["symbol": "N", "name": "new"],
        ])
        request.resultType = .objectIDs
        let result = try importer.performAndWait { try importer.execute(request) }
        guard case .objectIDs(let save) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(save.updatedObjectIDs == Set(stored) && save.insertedObjectIDs.count == 1)
        let changes = try #require(try coordinator.fetchHistory(.fetchHistory(after: nil)).last?.changes)
        let updates = Dictionary(uniqueKeysWithValues: changes.filter { $0.changeType == .update }.map { ($0.changedObjectID, $0.updatedProperties) })
        #expect(updates == [stored[0]: ["name", "price"], stored[1]: ["name"], stored[2]: ["price"]])
        // The row inserted and then upserted by the same request stays one insert, with both values.
        #expect(changes.filter { $0.changeType == .insert }.count == 1)
        #expect(try listings(PersistentHistoryTests.context(coordinator, author: nil)) == ["A ay 3.0", "B bee 1.0", "C - 5.0", "N new 9.0"])
    }

    @Test func aFailedRequestLeavesNoHistory() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try PersistentHistoryTests.open(url, model: GraphTestModel.make())
        let context = PersistentHistoryTests.context(coordinator)
        let dump = try SQLiteReference(url).dump()
        context.performAndWait {
            let refused = #expect(throws: ObjectGraphError.self) {
                _ = try context.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A"], ["symbol": "A"]]))
            }
            #expect(refused?.code == .duplicateKey)
        }
        #expect(try SQLiteReference(url).dump() == dump)
    }

    // MARK: - Bad input

    /// Runs a request that must fail on a store holding two listings and
    /// returns its error, after checking that no row changed.
    private func failure(on type: StoreType, sourceLocation: SourceLocation = #_sourceLocation,
                         _ request: BatchInsertRequest) throws -> (any Error)? {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 1), ("B", 2)])
        let before = try graph.rows()
        let dump = try type == .sqlite ? SQLiteReference(graph.storeURL).dump() : []
        let context = graph.context()
        var caught: (any Error)?
        context.performAndWait {
            do {
                let result = try context.execute(request)
                Issue.record("no error; the request returned \(result)", sourceLocation: sourceLocation)
            } catch {
                caught = error
            }
        }
        #expect(try graph.rows() == before, "rows changed", sourceLocation: sourceLocation)
        if type == .sqlite { #expect(try SQLiteReference(graph.storeURL).dump() == dump, "file changed", sourceLocation: sourceLocation) }
        return caught
    }

    @Test(arguments: allStoreTypes)
    func badInputThrowsATypedErrorAndChangesNothing(type: StoreType) throws {
        let good: [String: any Sendable] = ["symbol": "OK"]
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Nothing", objects: [good])) as? ObjectGraphError
            == .unknownEntity("Nothing"))
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Vehicle", objects: [["plate": "V"]])) as? ObjectGraphError
            == .abstractEntity("Vehicle"))
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Listing", objects: [good, ["symbol": "C", "prize": 1]])) as? ObjectGraphError
            == .unknownKey("prize", entity: "Listing"))
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Listing", objects: [good, ["symbol": "C", "quotes": [Int]()]]))
            as? ObjectGraphError == .notAnAttribute(key: "quotes", entity: "Listing"))
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Listing", objects: [good, ["symbol": "C", "price": "cheap"]]))
            as? ObjectGraphError == .wrongValueType(key: "price", entity: "Listing", expected: AttributeType.double.valueDescription, actual: "String"))
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Seat", objects: [["row": "r", "number": Int64.max]]))
            as? ObjectGraphError == .valueOutOfRange(key: "number", entity: "Seat", value: String(Int64.max), type: .integer32))
        let missing = try failure(on: type, BatchInsertRequest(entityName: "Listing", objects: [good, ["price": 3]]))
        #expect(missing as? ObjectGraphError == .missingValue(key: "symbol", entity: "Listing", row: 1))
        #expect((missing as? ObjectGraphError)?.description
            == "row 1 of the batch insert gives no value for Listing.symbol, which is not optional and has no default")
        let noSymbol: String? = nil
        #expect(try failure(on: type, BatchInsertRequest(entityName: "Listing", objects: [["symbol": noSymbol]])) as? ObjectGraphError
            == .missingValue(key: "symbol", entity: "Listing", row: 0))
        // A handler's bad row fails the same way, after rows already written in the transaction.
        let handler = BatchInsertRequest(entityName: "Listing") { index, row in
            guard index < 3 else { return true }
            row["symbol"] = "H\(index)"
            if index == 2 { row["owner"] = "nobody" }
            return false
        }
        #expect(try failure(on: type, handler) as? ObjectGraphError == .unknownKey("owner", entity: "Listing"))
    }

    @Test(arguments: allStoreTypes)
    func aReadOnlyStoreRefusesTheRequest(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 1)])
        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try coordinator.addPersistentStore(type: type, at: type == .sqlite ? graph.storeURL : nil, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let before = try graph.rows()
        let error = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "R"]])) } catch { return error }
            return nil
        }
        #expect((error as? PersistentStoreError)?.code == .readOnly, "\(String(describing: error))")
        #expect(try graph.rows() == before)
    }
}

/// Saves seen by an observer, from whichever thread posts them.
private final class BatchInsertSaveLog: @unchecked Sendable {
    private let lock = NSLock()
    private var saves: [ContextDidSave] = []   // protected by `lock`
    func append(_ save: ContextDidSave) { lock.withLock { saves.append(save) } }
    var all: [ContextDidSave] { lock.withLock { saves } }
}
