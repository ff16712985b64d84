@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Testing

/// Lightweight migration of stores written by Apple's Core Data, along the
/// model-version chains of the fixture corpus: each store is copied, opened with
/// a later version (`migratesAutomatically` + `infersMappingModel`), and its data
/// compared with SQLite queries of an untouched copy. Where the inference cannot
/// follow Core Data's own (custom) mapping, the clear error is expected.
@Suite struct MigrationFixtureTests {
    static let wibosco = "wibosco-migration/CoreDataMigration_Example.xcdatamodeld"

    static func wiboscoModel(_ version: String) throws -> ManagedObjectModel {
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url(wibosco))
        return try ManagedObjectModel(contentsOf: try #require(versions[version]))
    }

    /// v1 → v2 renames `Post.color` to `hexColor` without a renaming identifier
    /// (the example app ships a custom mapping model for it). Inferred as Core
    /// Data infers it: `color` removed, `hexColor` added and empty; every post
    /// and its other values survive.
    @Test func wiboscoVersion1StoreOpensWithVersion2() throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration/stores/CoreDataMigration_Example_1.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_1.sqlite")
        let uuid = try reference.rows("SELECT Z_UUID FROM Z_METADATA")[0][0]

        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.wiboscoModel("CoreDataMigration_Example 2"))
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
        #expect(store.identifier == uuid)

        let expected = try reference.rows("SELECT ZPOSTID, ZDATE FROM ZPOST ORDER BY Z_PK")
        #expect(expected.count == 1001)
        #expect(try SQLiteReference(url).rows("SELECT ZPOSTID, ZDATE FROM ZPOST ORDER BY Z_PK") == expected)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let posts = try context.fetch(FetchRequest<ManagedObject>(entityName: "Post", predicate: nil,
                                                                      sortDescriptors: [FetchSort(key: "postID")]))
            #expect(posts.count == 1001)
            let ids = try posts.map { try $0.value(forKey: "postID") as? String ?? "" }
            #expect(ids == expected.map { $0[0] ?? "" }.sorted())
            #expect(try posts.allSatisfy { try $0.value(forKey: "hexColor") == nil && $0.value(forKey: "date") is Date })
        }
    }

    /// v2 → v3 moves the colour into a Color entity through a required to-one,
    /// which no existing post has: not inferable (the app uses a custom mapping).
    @Test(arguments: ["CoreDataMigration_Example_1.sqlite", "CoreDataMigration_Example_2.sqlite"])
    func wiboscoRequiredColorRelationshipCannotBeInferred(store: String) throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/" + store)
        let before = try SQLiteReference(url).dump()
        let target = store.hasSuffix("_1.sqlite") ? "CoreDataMigration_Example 4" : "CoreDataMigration_Example 3"
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.wiboscoModel(target))
        let error = try #require(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("Post.color"), "\(error)")
        #expect(error.message.contains("required"), "\(error)")
        // Opening switched the file to WAL, as any open does; the migration changed nothing.
        #expect(try SQLiteReference(url).dump() == before)
        #expect(try leftovers(in: workspace.url).isEmpty)
    }

    /// v3 → v4 adds `Post.hide` (default NO): every post gets false, and posts,
    /// colours and the one-to-one between them survive.
    @Test func wiboscoVersion3StoreOpensWithVersion4() throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration/stores/CoreDataMigration_Example_3.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_3.sqlite")

        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.wiboscoModel("CoreDataMigration_Example 4"))
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)

        let pairs = "SELECT p.ZPOSTID, p.ZDATE, c.ZCOLORID, c.ZHEX FROM ZPOST p LEFT JOIN ZCOLOR c ON c.Z_PK = p.ZCOLOR ORDER BY p.Z_PK"
        let expected = try reference.rows(pairs)
        #expect(expected.count == 7995)
        let migrated = try SQLiteReference(url)
        #expect(try migrated.rows(pairs) == expected)
        #expect(try migrated.rows("SELECT count(*) FROM ZCOLOR c JOIN ZPOST p ON p.Z_PK = c.ZPOST AND p.ZCOLOR = c.Z_PK") == [["7995"]])
        #expect(try migrated.rows("SELECT ZHIDE, count(*) FROM ZPOST GROUP BY ZHIDE") == [["0", "7995"]])

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Post")
            request.sortDescriptors = [FetchSort(key: "postID")]
            request.fetchLimit = 50
            let posts = try context.fetch(request)
            #expect(posts.count == 50)
            let byID = Dictionary(expected.map { ($0[0], $0) }, uniquingKeysWith: { first, _ in first })
            for post in posts {
                let id = try #require(try post.value(forKey: "postID") as? String)
                let color = try #require(try post.value(forKey: "color") as? ManagedObject)
                #expect(try color.value(forKey: "hex") as? String == byID[id]?[3])
                #expect(try (color.value(forKey: "post") as? ManagedObject) === post)
                #expect(try post.value(forKey: "hide") as? Bool == false)
            }
        }
    }

    static func model(_ bundle: String, _ version: String) throws -> ManagedObjectModel {
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url(bundle))
        return try ManagedObjectModel(contentsOf: try #require(versions[version], "\(bundle) has no version \(version)"))
    }

    /// wibosco's revised example: its v1 store migrated to v2, v3 and v4 one step at a
    /// time (each step adds or drops attributes, or adds the Section entity); every
    /// post keeps its ID and date, and the store its UUID.
    @Test func wiboscoRevisedChainMigratesStepByStep() throws {
        let bundle = "wibosco-migration-revised/CoreDataMigration_Example.xcdatamodeld"
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_1.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_1.sqlite")
        let posts = "SELECT Z_PK, ZPOSTID, ZDATE FROM ZPOST ORDER BY Z_PK"
        let expected = try reference.rows(posts)
        let uuid = try reference.rows("SELECT Z_UUID FROM Z_METADATA")
        #expect(expected.count == 10)
        for version in ["CoreDataMigration_Example 2", "CoreDataMigration_Example 3", "CoreDataMigration_Example 4"] {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model(bundle, version))
            let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            let count = try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: "Post")) }
            #expect(count == 10, "\(version)")
            try coordinator.remove(store)
            #expect(try SQLiteReference(url).rows(posts) == expected, "\(version)")
        }
        let migrated = try SQLiteReference(url)
        #expect(try migrated.rows("SELECT Z_UUID FROM Z_METADATA") == uuid)
        #expect(try migrated.rows("SELECT ZSOFTDELETED, count(*) FROM ZPOST GROUP BY ZSOFTDELETED") == [["0", "10"]])
        #expect(try migrated.rows("SELECT count(*) FROM ZSECTION") == [["0"]])
    }

    /// wibosco's revised v3 store (sections written by the app) opened with v4:
    /// posts, sections and the one-to-many between them survive.
    @Test func wiboscoRevisedVersion3StoreOpensWithVersion4() throws {
        let bundle = "wibosco-migration-revised/CoreDataMigration_Example.xcdatamodeld"
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_3.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_3.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model(bundle, "CoreDataMigration_Example 4"))
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
        let sections = "SELECT s.Z_PK, s.ZTITLE, s.ZBODY, s.ZINDEX, p.ZPOSTID FROM ZSECTION s LEFT JOIN ZPOST p ON p.Z_PK = s.ZPOST ORDER BY s.Z_PK"
        let expected = try reference.rows(sections)
        #expect(expected.count == 14)
        #expect(try SQLiteReference(url).rows(sections) == expected)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let counts = try context.performAndWait {
            try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")).map {
                (try $0.value(forKey: "sections") as? Set<ManagedObject> ?? []).count
            }
        }
        #expect(counts.reduce(0, +) == expected.filter { $0[4] != nil }.count)
    }

    /// CoreDataPlus SampleModel3: V1 (users) → v2 adds Pet and a one-to-one → v3 drops `User.petName`.
    @Test(arguments: ["SampleModel3_v2", "SampleModel3_v3"])
    func coreDataPlusSampleModel3StoreOpensWithLaterVersions(version: String) throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("coredataplus-samplemodel3/stores/SampleModel3_V1.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel3/stores/SampleModel3_V1.sqlite")
        let coordinator = PersistentStoreCoordinator(
            managedObjectModel: try Self.model("coredataplus-samplemodel3/SampleModel3.xcdatamodeld", version))
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
        let users = "SELECT Z_PK, ZNAME FROM ZUSER ORDER BY Z_PK"
        #expect(try reference.rows(users).count == 12)
        #expect(try SQLiteReference(url).rows(users) == reference.rows(users))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let pets = try context.performAndWait {
            try context.fetch(FetchRequest<ManagedObject>(entityName: "User")).filter { try $0.value(forKey: "pet") != nil }.count
        }
        #expect(pets == 0)
    }

    static let sampleModel = "coredataplus-samplemodel/SampleModel.xcdatamodeld"

    static func sampleModel(_ version: String) throws -> ManagedObjectModel {
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url(sampleModel))
        return try ManagedObjectModel(contentsOf: try #require(versions[version]))
    }

    /// CoreDataPlus V1 → model 2 renames ExpensiveSportCar to LuxuryCar (renaming
    /// ID) and drops `Car.color` and `Person.id`; V1 → model 3 also drops
    /// `Car.maker`, adds Maker and `Car.createdBy`. Cars keep their subentity,
    /// values and owners.
    @Test(arguments: ["SampleModel2", "SampleModel3"])
    func coreDataPlusVersion1StoreOpensWithLaterModels(version: String) throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("coredataplus-samplemodel/stores/SampleModel_V1.sqlite"))
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel/stores/SampleModel_V1.sqlite")

        let model = try Self.sampleModel(version)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)

        let oldNames = "CASE k.Z_NAME WHEN 'ExpensiveSportCar' THEN 'LuxuryCar' ELSE k.Z_NAME END"
        let cars = "SELECT c.Z_PK, \(oldNames), c.ZNUMBERPLATE, c.ZMODEL, c.ZMARKEDFORDELETIONASOF, p.ZFIRSTNAME, p.ZLASTNAME "
            + "FROM ZCAR c JOIN Z_PRIMARYKEY k ON k.Z_ENT = c.Z_ENT LEFT JOIN ZPERSON p ON p.Z_PK = c.ZOWNER ORDER BY c.Z_PK"
        let expected = try reference.rows(cars)
        #expect(expected.count == 125)
        let migrated = try SQLiteReference(url)
        #expect(try migrated.rows(cars) == expected)
        let persons = "SELECT Z_PK, ZFIRSTNAME, ZLASTNAME, ZUPDATEDAT FROM ZPERSON ORDER BY Z_PK"
        #expect(try migrated.rows(persons) == reference.rows(persons))
        #expect(try migrated.rows("SELECT Z_NAME, Z_MAX FROM Z_PRIMARYKEY WHERE Z_SUPER = 0 ORDER BY Z_NAME")
                == (version == "SampleModel3" ? [["Car", "125"], ["Maker", "0"], ["Person", "20"]] : [["Car", "125"], ["Person", "20"]]))
        #expect(try migrated.rows("PRAGMA integrity_check") == [["ok"]])
        if version == "SampleModel3" {
            // The new many-to-many's join table, in Core Data's layout (Car = 1, Person = 5).
            #expect(try migrated.rows("SELECT name FROM pragma_table_info('Z_1PREVIOUSOWNERS') ORDER BY cid")
                    == [["Z_1PREVIOUSCARS"], ["Z_5PREVIOUSOWNERS"]])
        }
        // Model 2 drops attributes and renames an entity (by renaming ID); a column the
        // model has no property for makes the file incompatible, as in Core Data, so it
        // is migrated like model 3, which also adds tables.
        let carColumns = try migrated.rows("SELECT name FROM pragma_table_info('ZCAR')").compactMap { $0[0] }
        #expect(!carColumns.contains("ZCOLOR"))
        if version == "SampleModel3" {
            #expect(!carColumns.contains("ZMAKER") && carColumns.contains("ZCREATEDBY"))
        }

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Car")) == 125)
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "SportCar")) == 10)
            let luxury = try context.fetch(FetchRequest<ManagedObject>(entityName: "LuxuryCar"))
            #expect(luxury.count == 5)
            for car in luxury {
                let plate = try #require(try car.value(forKey: "numberPlate") as? String)
                let row = try #require(expected.first { $0[2] == plate })
                #expect(row[1] == "LuxuryCar")
                let owner = try car.value(forKey: "owner") as? ManagedObject
                #expect(try owner?.value(forKey: "firstName") as? String == row[5])
            }
            let people = try context.fetch(FetchRequest<ManagedObject>(entityName: "Person"))
            let owned = try people.reduce(0) { $0 + (try $1.value(forKey: "cars") as? Set<ManagedObject> ?? []).count }
            let ownedInFile = try reference.rows("SELECT count(*) FROM ZCAR WHERE ZOWNER IS NOT NULL")[0][0]
            #expect(String(owned) == ownedInFile)
        }
    }

    /// The V2 fixture is the V1 store after Core Data migrated it to model 2, but
    /// its `Z_PRIMARYKEY` still names ExpensiveSportCar: the renaming ID maps it and
    /// the store opens as it is; without the renaming ID the store is migrated, and
    /// the metadata's hashes (keyed by LuxuryCar) tell the new name.
    @Test(arguments: [true, false])
    func coreDataPlusMigratedStoreWithStaleEntityNameOpensWithMigration(keepsRenamingID: Bool) throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel/stores/SampleModel_V2.sqlite")
        let model = try Self.sampleModel("SampleModel2")
        if !keepsRenamingID { model.entitiesByName["LuxuryCar"]?.renamingIdentifier = nil }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: MigrationTests.migrating)
        #expect(try SQLiteReference(url).rows("SELECT Z_NAME FROM Z_PRIMARYKEY WHERE Z_ENT = 3")
                == [[keepsRenamingID ? "ExpensiveSportCar" : "LuxuryCar"]])
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let luxuryCars = try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: "LuxuryCar")) }
        #expect(luxuryCars == 5)
    }
}

/// Reads a SQLite file directly, as the reference the engine's results are compared with.
struct SQLiteReference {
    let connection: Connection

    init(_ url: URL) throws {
        var configuration = Connection.Configuration()
        configuration.isReadOnly = true
        configuration.createsIfMissing = false
        connection = try Connection(path: url.path, configuration: configuration)
    }

    /// The schema and every row of every table, for comparing two states of a file.
    func dump() throws -> [[String?]] {
        let tables = try rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap { $0[0] }
        var all = try rows("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        for table in tables {
            all += try rows("SELECT * FROM \(Connection.quotedIdentifier(table)) ORDER BY 1")
        }
        return all
    }

    /// Every row of a query, each value as text (`nil` for NULL).
    func rows(_ sql: String) throws -> [[String?]] {
        let statement = try connection.prepare(sql)
        var rows: [[String?]] = []
        while try statement.step() {
            rows.append((0..<statement.columnCount).map { index in
                switch statement.columnType(at: index) {
                case .null: nil
                case .integer: String(statement.int64(at: index))
                case .double: String(statement.double(at: index))
                case .text: statement.string(at: index)
                case .blob: statement.data(at: index)?.base64EncodedString()
                }
            })
        }
        return rows
    }
}
