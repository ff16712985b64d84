@_spi(DataStackInternal) import DataStackSQLite
import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores
@testable import DataStackStorage

/// Version hashes decide whether a store written here matches the model:
/// changes that keep every column (optionality, a wider integer, a new index)
/// migrate with migration options and are refused, naming the entity and the
/// property, without them.
@Suite struct VersionHashCompatibilityTests {
    /// A store written with the test model: two companies, one without a name.
    private func existingStore(in directory: TemporaryDirectory, model: ManagedObjectModel = TestModel.make(),
                               employees: [Int] = [42, 7]) throws -> URL {
        let url = directory.file("Existing.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for (offset, count) in employees.enumerated() {
                let company = ManagedObject(entity: model.entitiesByName["Company"]!, insertInto: context)
                try company.setValue("C\(offset)", forKey: "symbol")
                try company.setValue(offset == 0 ? "Named" : nil, forKey: "name")
                try company.setValue(count, forKey: "employees")
            }
            try context.save()
        }
        try coordinator.remove(store)
        return url
    }

    /// The test model with Company changed by `change`.
    private func model(_ change: (EntityDescription) -> Void) -> ManagedObjectModel {
        let model = TestModel.make()
        // Unbound: the test classes declare the original attributes, and a
        // coordinator refuses a class that disagrees with its entity.
        for entity in model.entities { entity.managedObjectClass = ManagedObject.self }
        change(model.entitiesByName["Company"]!)
        return model
    }

    private func replace(_ name: String, in company: EntityDescription, with attribute: AttributeDescription) {
        let index = company.properties.firstIndex { $0.name == name }!
        company.properties[index] = attribute
    }

    private var migrating: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        return options
    }

    private func openError(_ url: URL, _ model: ManagedObjectModel, options: StoreOptions = StoreOptions()) -> PersistentStoreError? {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        return #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        }
    }

    private func bytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

    // MARK: - Equal hashes

    @Test func equalHashesOpenTheStoreWithoutMigrating() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let before = try bytes(url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: migrating)
        #expect(store.metadata[StoreMetadataKey.modelVersionHashes] as? [String: Data] == TestModel.make().entityVersionHashesByName)
        try coordinator.remove(store)
        // A migration would have rewritten the file; opening it touched no page.
        #expect(try bytes(url) == before)
    }

    @Test func changesOutsideTheHashOpenTheStoreWithoutMigrating() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let changed = model { company in
            company.userInfo = ["note": "x"]
            company.renamingIdentifier = "Firm"
            let name = company.attributesByName["name"]!
            name.userInfo = ["a": "b"]
            name.maximumLength = 40
            name.defaultValue = .string("—")
        }
        #expect(changed.entityVersionHashesByName == TestModel.make().entityVersionHashesByName)
        try PersistentStoreCoordinator(managedObjectModel: changed).addPersistentStore(type: .sqlite, at: url)
    }

    // MARK: - Optional to required

    @Test func anOptionalAttributeMadeRequiredWithADefaultMigratesAndFillsTheDefault() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let required = {
            self.model { self.replace("name", in: $0, with: AttributeDescription(name: "name", type: .string, isOptional: false,
                                                                                 defaultValue: .string("unnamed"))) }
        }
        let error = openError(url, required())
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company, attribute name: the store was written with optional String, the model says required String") == true,
                "\(error.map { "\($0)" } ?? "")")

        try PersistentStoreCoordinator(managedObjectModel: required()).addPersistentStore(type: .sqlite, at: url, options: migrating)
        #expect(try RawStore.texts(url, "SELECT ZNAME FROM ZCOMPANY ORDER BY ZSYMBOL") == ["Named", "unnamed"])
        try PersistentStoreCoordinator(managedObjectModel: required()).addPersistentStore(type: .sqlite, at: url)
    }

    @Test func anOptionalAttributeMadeRequiredWithoutADefaultOverNullRowsFailsNamingIt() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let before = try bytes(url)
        let required = model { self.replace("name", in: $0, with: AttributeDescription(name: "name", type: .string, isOptional: false)) }
        let error = openError(url, required, options: migrating)
        #expect(error?.code == .migrationFailed)
        #expect(error?.message.contains("Company.name is required but 1 Company row has no value in the store and it has no default value") == true,
                "\(error.map { "\($0)" } ?? "")")
        #expect(try bytes(url) == before)
    }

    // MARK: - Integer widths

    @Test func anInteger32WidenedToInteger64MigratesAndKeepsTheValues() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let wide = {
            self.model { self.replace("employees", in: $0, with: AttributeDescription(name: "employees", type: .integer64, isOptional: false,
                                                                                      defaultValue: .integer(0))) }
        }
        let error = openError(url, wide())
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company, attribute employees: the store was written with required Integer 32, the model says required Integer 64") == true,
                "\(error.map { "\($0)" } ?? "")")

        let coordinator = PersistentStoreCoordinator(managedObjectModel: wide())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: migrating)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
            let values = try context.fetch(request).map { try $0.value(forKey: "employees").map { "\($0)" } }
            #expect(values == ["42", "7"])
        }
    }

    @Test func anIntegerNarrowedMigratesOnlyWhenEveryValueFits() throws {
        let narrow = {
            self.model { self.replace("employees", in: $0, with: AttributeDescription(name: "employees", type: .integer16, isOptional: false,
                                                                                      defaultValue: .integer(0))) }
        }
        let fits = TemporaryDirectory()
        let small = try existingStore(in: fits, employees: [42, 7])
        try PersistentStoreCoordinator(managedObjectModel: narrow()).addPersistentStore(type: .sqlite, at: small, options: migrating)

        let overflows = TemporaryDirectory()
        let large = try existingStore(in: overflows, employees: [42, 100_000])
        let before = try bytes(large)
        let error = openError(large, narrow(), options: migrating)
        #expect(error?.code == .migrationFailed)
        #expect(error?.message.contains("Company.employees was Integer 32 in the store and is Integer 16 in the model, but 1 Company row has a value outside -32768…32767") == true,
                "\(error.map { "\($0)" } ?? "")")
        #expect(try bytes(large) == before)
    }

    @Test(arguments: [
        (AttributeType.integer16, AttributeType.integer64, MappingModel.TypeChange.widening),
        (.boolean, .integer32, .widening),
        (.integer64, .boolean, .narrowing(0...1)),
        (.integer64, .integer32, .narrowing(Int64(Int32.min)...Int64(Int32.max))),
        (.float, .double, .widening),
        (.double, .float, .refused),
        (.uri, .string, .widening),
        (.string, .uri, .refused),
        (.uuid, .binaryData, .widening),
        (.binaryData, .transformable, .refused),
    ] as [(AttributeType, AttributeType, MappingModel.TypeChange)])
    func typeChangesWithinAColumnTypeAreWidenedNarrowedOrRefused(from: AttributeType, to: AttributeType, expected: MappingModel.TypeChange) {
        #expect(MappingModel.typeChange(from: from, to: to) == expected)
    }

    // MARK: - Indexes

    @Test func aNewFetchIndexMigratesAndIsCreated() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let indexed = { self.model { $0.indexes = [FetchIndexDescription(name: "byName", propertyNames: ["name"])] } }
        #expect(indexed().entityVersionHashesByName == TestModel.make().entityVersionHashesByName)
        let error = openError(url, indexed())
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company: the store has no index for its fetch index byName (name) (an index on ZNAME of ZCOMPANY)") == true,
                "\(error.map { "\($0)" } ?? "")")

        try PersistentStoreCoordinator(managedObjectModel: indexed()).addPersistentStore(type: .sqlite, at: url, options: migrating)
        #expect(try RawStore.texts(url, "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'Z_Company_byName'") == ["Z_Company_byName"])
        try PersistentStoreCoordinator(managedObjectModel: indexed()).addPersistentStore(type: .sqlite, at: url)
    }

    @Test func aNewIndexedAttributeMigratesAndIsCreated() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let indexed = { self.model { $0.attributesByName["symbol"]!.isIndexed = true } }
        let error = openError(url, indexed())
        #expect(error?.message.contains("entity Company: the store has no index for its indexed attribute symbol") == true,
                "\(error.map { "\($0)" } ?? "")")
        try PersistentStoreCoordinator(managedObjectModel: indexed()).addPersistentStore(type: .sqlite, at: url, options: migrating)
        #expect(try RawStore.texts(url, "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'Z_Company_symbol'") == ["Z_Company_symbol"])
    }

    @Test func anIndexOfTheStoreUnderAnotherNameCounts() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        try RawStore.execute(url, "CREATE INDEX SOME_OTHER_NAME ON ZCOMPANY (ZNAME COLLATE BINARY ASC)")
        let indexed = model { $0.indexes = [FetchIndexDescription(name: "byName", propertyNames: ["name"])] }
        try PersistentStoreCoordinator(managedObjectModel: indexed).addPersistentStore(type: .sqlite, at: url)
    }

    // MARK: - What else the hash covers

    @Test func aVersionHashModifierAloneNeedsAMigration() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let modified = { self.model { $0.attributesByName["name"]!.versionHashModifier = "2" } }
        let error = openError(url, modified())
        #expect(error?.message.contains("entity Company, attribute name: the store was written with optional String, the model says optional String, version hash modifier \"2\"") == true,
                "\(error.map { "\($0)" } ?? "")")
        try PersistentStoreCoordinator(managedObjectModel: modified()).addPersistentStore(type: .sqlite, at: url, options: migrating)
    }

    @Test func aChangedDeleteRuleIsNamed() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        let error = openError(url, model { ($0.relationshipsByName["updates"]!).deleteRule = .deny })
        #expect(error?.message.contains("relationship updates: the store was written with optional to-many StockUpdate (inverse company), delete rule cascade, the model says optional to-many StockUpdate (inverse company), delete rule deny") == true,
                "\(error.map { "\($0)" } ?? "")")
    }

    @Test func aChangedSuperentityIsNamedForItsSubentities() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Assets.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: EngineTestModel.make())
        try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: url))
        let changed = EngineTestModel.make()
        changed.entitiesByName["Asset"]!.versionHashModifier = "2"
        let error = openError(url, changed)
        #expect(error?.message.contains("entity Asset: the store was written with an abstract entity, the model says an abstract entity, version hash modifier \"2\"") == true,
                "\(error.map { "\($0)" } ?? "")")
        #expect(error?.message.contains("entity Bond: its superentity Asset changed") == true)
        #expect(error?.message.contains("entity Stock: its superentity Asset changed") == true)
    }

    // MARK: - Metadata

    @Test func aNewStoreAndAMigratedOneRecordDigestChecksumAndHashVersion() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        func expectRecorded(_ model: ManagedObjectModel) throws {
            let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
            let hashes = model.entityVersionHashesByName
            #expect(metadata[StoreMetadataKey.modelVersionHashes] as? [String: Data] == hashes)
            #expect(metadata[StoreMetadataKey.modelVersionHashesDigest] as? String == VersionHash.digest(of: hashes))
            #expect(metadata[StoreMetadataKey.modelVersionChecksum] as? String == model.versionChecksum)
            #expect(metadata[StoreMetadataKey.modelVersionHashesVersion] as? Int == 3)
        }
        try expectRecorded(TestModel.make())
        let changed = model { $0.attributesByName["name"]!.versionHashModifier = "2" }
        #expect(changed.versionChecksum != TestModel.make().versionChecksum)
        try PersistentStoreCoordinator(managedObjectModel: changed).addPersistentStore(type: .sqlite, at: url, options: migrating)
        try expectRecorded(model { $0.attributesByName["name"]!.versionHashModifier = "2" })
    }

    // MARK: - Damaged or older hashes

    /// Rewrites the store's metadata property list with `change`.
    private func editMetadata(_ url: URL, _ change: (inout [String: Any]) -> Void) throws {
        let plist = try #require(try RawStore.data(url, "SELECT Z_PLIST FROM Z_METADATA"))
        var metadata = try #require(try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any])
        change(&metadata)
        let data = try PropertyListSerialization.data(fromPropertyList: metadata, format: .binary, options: 0)
        let statement = try RawStore.open(url).prepare("UPDATE Z_METADATA SET Z_PLIST = ?")
        try statement.bind(data, at: 1)
        try statement.execute()
    }

    @Test(arguments: ["a string", "short data", "an array"])
    func aStoreWithDamagedHashesIsJudgedByItsRecordedModel(damage: String) throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        try editMetadata(url) { metadata in
            switch damage {
            case "a string": metadata["NSStoreModelVersionHashes"] = "not hashes"
            case "short data": metadata["NSStoreModelVersionHashes"] = ["Company": Data([1, 2, 3]), "StockUpdate": Data([4])]
            default: metadata["NSStoreModelVersionHashes"] = [Data([1])]
            }
        }
        // The same model opens it; a changed one is still refused, naming the change.
        try PersistentStoreCoordinator(managedObjectModel: TestModel.make()).addPersistentStore(type: .sqlite, at: url)
        let error = openError(url, model { self.replace("name", in: $0, with: AttributeDescription(name: "name", type: .string, isOptional: false,
                                                                                                  defaultValue: .string("x"))) })
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company, attribute name: the store was written with optional String, the model says required String") == true,
                "\(error.map { "\($0)" } ?? "")")
    }

    @Test func aStoreWithHashesOfAnEarlierEncodingIsJudgedByItsSchema() throws {
        let directory = TemporaryDirectory()
        let url = try existingStore(in: directory)
        try editMetadata(url) { metadata in
            metadata["DataStackVersionHashFormat"] = nil
            metadata["NSStoreModelVersionHashes"] = ["Company": Data(repeating: 1, count: 32), "StockUpdate": Data(repeating: 2, count: 32)]
        }
        try PersistentStoreCoordinator(managedObjectModel: TestModel.make()).addPersistentStore(type: .sqlite, at: url)
        // The schema still refuses what it can see.
        let error = openError(url, model { self.replace("name", in: $0, with: AttributeDescription(name: "name", type: .date)) })
        #expect(error?.message.contains("entity Company, attribute name: the store has VARCHAR, the model says Date") == true)
    }
}
