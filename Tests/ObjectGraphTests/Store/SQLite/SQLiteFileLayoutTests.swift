@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// What a new SQLite store looks like on disk: Core Data's own layout.
@Suite struct SQLiteFileLayoutTests {
    @Test func entityTablesHaveCoreDataColumns() throws {
        let stack = try TestStack(type: .sqlite)
        let connection = try RawStore.open(stack.storeURL)
        let company = try connection.columns(in: "ZCOMPANY")
        #expect(company.prefix(3).map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT"])
        #expect(company.first?.isPrimaryKey == true)
        #expect(Set(company.map(\.name)) == ["Z_PK", "Z_ENT", "Z_OPT", "ZSYMBOL", "ZNAME", "ZEMPLOYEES", "ZFOUNDED", "ZACTIVE"])
        let types = Dictionary(uniqueKeysWithValues: company.map { ($0.name, $0.declaredType) })
        #expect(types["ZSYMBOL"] == "VARCHAR")
        #expect(types["ZEMPLOYEES"] == "INTEGER")
        #expect(types["ZACTIVE"] == "INTEGER")
        #expect(types["ZFOUNDED"] == "TIMESTAMP")

        let update = try connection.columns(in: "ZSTOCKUPDATE")
        #expect(Set(update.map(\.name)) == ["Z_PK", "Z_ENT", "Z_OPT", "ZPRICE", "ZVOLUME", "ZTIME", "ZCOMPANY"])
        #expect(update.first { $0.name == "ZPRICE" }?.declaredType == "FLOAT")
        #expect(update.first { $0.name == "ZCOMPANY" }?.declaredType == "INTEGER")
        // Core Data's column order: integers and keys, then dates, then numbers.
        #expect(update.map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZVOLUME", "ZCOMPANY", "ZTIME", "ZPRICE"])
    }

    @Test func theForeignKeyColumnIsIndexed() throws {
        let stack = try TestStack(type: .sqlite)
        let connection = try RawStore.open(stack.storeURL)
        let indexes = try connection.indexNames(on: "ZSTOCKUPDATE")
        #expect(indexes.contains("ZSTOCKUPDATE_ZCOMPANY_INDEX"))
        #expect(try RawStore.text(stack.storeURL, "SELECT name FROM pragma_index_info('ZSTOCKUPDATE_ZCOMPANY_INDEX')") == "ZCOMPANY")
        #expect(try connection.indexNames(on: "ZCOMPANY").isEmpty)
    }

    @Test func primaryKeyRowsNumberEntitiesDepthFirstWithoutRegardToCase() throws {
        func entity(_ name: String, _ children: [EntityDescription] = [], root: Bool = true) -> EntityDescription {
            let entity = EntityDescription(name: name, properties: root ? [AttributeDescription(name: "value", type: .string)] : [])
            entity.subentities = children
            return entity
        }
        let beta = entity("beta", root: false)
        let alpha = entity("Alpha", root: false)
        let mango = entity("Mango", [beta, alpha])
        let zebra = entity("zebra")
        let apple = entity("apple")
        let model = ManagedObjectModel(entities: [zebra, mango, beta, alpha, apple])
        let stack = try TestStack(type: .sqlite, model: model)

        let rows = try RawStore.texts(stack.storeURL,
                                      "SELECT Z_ENT || ':' || Z_NAME || ':' || Z_SUPER || ':' || Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
        #expect(rows == ["1:apple:0:0", "2:Mango:0:0", "3:Alpha:2:0", "4:beta:2:0", "5:zebra:0:0"])
        let tables = try RawStore.texts(stack.storeURL, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%' ORDER BY name")
        #expect(tables == ["ZAPPLE", "ZMANGO", "ZZEBRA", "Z_METADATA", "Z_MODELCACHE", "Z_PRIMARYKEY"])
        #expect(try RawStore.open(stack.storeURL).indexNames(on: "ZMANGO").contains("ZMANGO_Z_ENT_INDEX"))

        let context = stack.newContext()
        try context.performAndWait {
            try ManagedObject(entity: beta, insertInto: context).setValue("b", forKey: "value")
            try ManagedObject(entity: mango, insertInto: context).setValue("m", forKey: "value")
            try context.save()
        }
        #expect(try RawStore.texts(stack.storeURL, "SELECT Z_ENT || ':' || ZVALUE FROM ZMANGO ORDER BY Z_ENT") == ["2:m", "4:b"])
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Mango'") == 2)
    }

    @Test func metadataIsOneRowWithTheUUIDAndABinaryPropertyList() throws {
        let stack = try TestStack(type: .sqlite)
        let store = stack.coordinator.persistentStores[0]
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM Z_METADATA") == 1)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_VERSION FROM Z_METADATA") == 1)
        #expect(try RawStore.text(stack.storeURL, "SELECT Z_UUID FROM Z_METADATA") == store.identifier)

        let plist = try #require(try RawStore.data(stack.storeURL, "SELECT Z_PLIST FROM Z_METADATA"))
        #expect(plist.prefix(8) == Data("bplist00".utf8))
        var format = PropertyListSerialization.PropertyListFormat.xml
        let decoded = try PropertyListSerialization.propertyList(from: plist, options: [], format: &format)
        #expect(format == .binary)
        let metadata = try #require(decoded as? [String: Any])
        #expect(metadata["NSStoreType"] as? String == "SQLite")
        #expect(metadata["NSStoreUUID"] as? String == store.identifier)
        let hashes = try #require(metadata["NSStoreModelVersionHashes"] as? [String: Any])
        #expect(Set(hashes.keys) == ["Company", "StockUpdate"])
        #expect((hashes["Company"] as? Data)?.count == 32)
        #expect(hashes["Company"] as? Data == stack.model.entityVersionHashesByName["Company"])
    }

    @Test func valuesAreStoredAsCoreDataStoresThem() throws {
        let stack = try TestStack(type: .sqlite, model: EngineTestModel.make())
        let uuid = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!
        let date = Date(timeIntervalSinceReferenceDate: 12_345.25)
        let context = stack.newContext()
        try context.performAndWait {
            let on = Gadget(context: context)
            on.name = "on"
            on.enabled = true
            on.created = date
            on.identifier = uuid
            on.homepage = URL(string: "https://example.com/x")!
            on.price = Decimal(string: "2.5")!
            on.count = 7
            on.tags = Tags(names: ["t"])
            let off = Gadget(context: context)
            off.name = "off"
            off.enabled = false
            try context.save()
        }
        let url = stack.storeURL
        #expect(try RawStore.text(url, "SELECT typeof(ZCREATED) FROM ZGADGET WHERE ZNAME = 'on'") == "real")
        #expect(try RawStore.text(url, "SELECT ZCREATED FROM ZGADGET WHERE ZNAME = 'on'") == "12345.25")
        #expect(try RawStore.texts(url, "SELECT ZENABLED FROM ZGADGET ORDER BY ZNAME") == ["0", "1"])
        #expect(try RawStore.text(url, "SELECT typeof(ZENABLED) FROM ZGADGET WHERE ZNAME = 'on'") == "integer")
        #expect(try RawStore.text(url, "SELECT typeof(ZIDENTIFIER) FROM ZGADGET WHERE ZNAME = 'on'") == "blob")
        let bytes = try #require(try RawStore.data(url, "SELECT ZIDENTIFIER FROM ZGADGET WHERE ZNAME = 'on'"))
        #expect(bytes == withUnsafeBytes(of: uuid.uuid) { Data($0) })
        #expect(try RawStore.text(url, "SELECT ZHOMEPAGE FROM ZGADGET WHERE ZNAME = 'on'") == "https://example.com/x")
        #expect(try RawStore.text(url, "SELECT typeof(ZPRICE) FROM ZGADGET WHERE ZNAME = 'on'") == "real")
        #expect(try RawStore.text(url, "SELECT typeof(ZCOUNT) FROM ZGADGET WHERE ZNAME = 'on'") == "integer")
        let tags = try #require(try RawStore.data(url, "SELECT ZTAGS FROM ZGADGET WHERE ZNAME = 'on'"))
        #expect(try TransformableCoding.decode(Tags.self, from: tags) == Tags(names: ["t"]))
        #expect(try RawStore.text(url, "SELECT typeof(ZCREATED) FROM ZGADGET WHERE ZNAME = 'off'") == "null")
    }

    @Test func rowsCarryEntityNumberVersionAndForeignKeys() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            let update = StockUpdate(context: context)
            update.company = company
            update.price = 3.5
            try context.save()
        }
        #expect(try RawStore.texts(stack.storeURL, "SELECT Z_PK || ':' || Z_ENT || ':' || Z_OPT FROM ZCOMPANY") == ["1:1:1"])
        #expect(try RawStore.texts(stack.storeURL, "SELECT Z_PK || ':' || Z_ENT || ':' || ZCOMPANY || ':' || ZPRICE FROM ZSTOCKUPDATE")
                == ["1:2:1:3.5"])
    }

    @Test func aNewStoreUsesWALJournalModeAndNormalSynchronous() throws {
        let stack = try TestStack(type: .sqlite)
        // The journal mode is in the file: read it without changing it.
        let statement = try RawStore.open(stack.storeURL, readOnly: true).prepare("PRAGMA journal_mode")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "wal")
        let header = try Data(contentsOf: stack.storeURL).prefix(20)
        #expect(header[header.startIndex + 18] == 2 && header[header.startIndex + 19] == 2, "WAL file format version")
        #expect(FileManager.default.fileExists(atPath: stack.storeURL.path + "-wal"))
        // synchronous is per connection and not visible from outside; the store opens with the default option.
        let options = StoreOptions()
        #expect(options.synchronous == .normal)
        #expect(options.journalMode == .wal)
    }

    @Test func journalModeAndPragmasFollowTheStoreOptions() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Delete.sqlite")
        var options = StoreOptions()
        options.journalMode = .delete
        options.pragmas = [.cacheSize(kibibytes: 4000)]
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let statement = try RawStore.open(url, readOnly: true).prepare("PRAGMA journal_mode")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "delete")
    }

    @Test func theStorePassesAnIntegrityCheckAfterWork() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies((0..<50).map { "S\($0)" })
        let context = stack.newContext()
        try context.performAndWait {
            for company in try context.fetch(FetchRequest<Company>()) where company.employees % 20 == 0 {
                context.delete(company)
            }
            try context.save()
        }
        #expect(try RawStore.open(stack.storeURL).integrityCheck() == ["ok"])
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 25)
    }
}
