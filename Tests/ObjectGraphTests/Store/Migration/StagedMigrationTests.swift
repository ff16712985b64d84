import Foundation
import Synchronization
import Testing
import ObjectGraph
import DataStackStores

/// Staged migration (``StagedMigrationManager``) of stores written by Apple's
/// Core Data along the fixture corpus's model-version chains, with custom
/// stages doing what an inferred mapping cannot; failures leave the store's
/// files byte for byte as they were.
@Suite struct StagedMigrationTests {
    static let wibosco = "wibosco-migration/CoreDataMigration_Example.xcdatamodeld"
    static let revised = "wibosco-migration-revised/CoreDataMigration_Example.xcdatamodeld"

    static func versions(_ bundle: String) throws -> [ManagedObjectModel] {
        try ManagedObjectModel.versions(in: CoreDataFixtures.url(bundle))
    }

    static func options(_ manager: StagedMigrationManager, progress: Shared<[Double]>? = nil) -> StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.stagedMigrationManager = manager
        if let progress {
            options.migrationProgress = { fraction in progress.withLock { $0.append(fraction) } }
        }
        return options
    }

    // MARK: - Versions

    @Test func versionsLoadOldestFirstInNumericNameOrder() throws {
        let wibosco = try Self.versions(Self.wibosco)
        #expect(wibosco.count == 4)
        #expect(wibosco[0].entitiesByName["Post"]?.attributesByName["color"] != nil)
        #expect(wibosco[1].entitiesByName["Post"]?.attributesByName["hexColor"] != nil)
        #expect(wibosco[2].entitiesByName["Color"] != nil && wibosco[2].entitiesByName["Post"]?.attributesByName["hide"] == nil)
        #expect(wibosco[3].entitiesByName["Post"]?.attributesByName["hide"] != nil)
        let sample = try Self.versions("coredataplus-samplemodel/SampleModel.xcdatamodeld")
        #expect(sample.map(\.versionIdentifiers) == [["1"], ["2"], ["3"]])

        // "Model 10" comes after "Model 9", not after "Model".
        let workspace = try FixtureWorkspace()
        let contents = try String(contentsOf: CoreDataFixtures.url(Self.wibosco + "/CoreDataMigration_Example.xcdatamodel/contents"), encoding: .utf8)
        for (name, identifier) in [("Model", "a"), ("Model 9", "b"), ("Model 10", "c")] {
            try workspace.write(contents.replacingOccurrences(of: "userDefinedModelVersionIdentifier=\"\"",
                                                              with: "userDefinedModelVersionIdentifier=\"\(identifier)\""),
                                to: "Model.xcdatamodeld/\(name).xcdatamodel/contents")
        }
        let ordered = try ManagedObjectModel.versions(in: workspace.url.appendingPathComponent("Model.xcdatamodeld"))
        #expect(ordered.map(\.versionIdentifiers) == [["a"], ["b"], ["c"]])
    }

    // MARK: - wibosco: a custom stage fills a new required relationship

    /// The stages of wibosco's chain. v1 → v2 renames `Post.color` to
    /// `hexColor`; the renaming identifier (Xcode's "Renaming ID") makes it
    /// lightweight. v2 → v3 moves the colour into a Color entity behind a new
    /// required `Post.color`: `willMigrate` (model 2) reads each post's colour
    /// into memory by post ID, because the schema change drops the column;
    /// `didMigrate` (model 3) makes a Color per post.
    static func wiboscoStages(hexByPost: Shared<[String: String]>) throws -> (StagedMigrationManager, [ManagedObjectModel]) {
        let v = try versions(wibosco)
        v[1].entitiesByName["Post"]?.attributesByName["hexColor"]?.renamingIdentifier = "color"
        let manager = StagedMigrationManager(stages: [
            .lightweight([v[0], v[1]]),
            .custom(from: v[1], to: v[2], label: "colors become entities",
                    willMigrate: { context in try readColors(context, into: hexByPost) },
                    didMigrate: { context in try makeColors(context, from: hexByPost) }),
            .lightweight([v[2], v[3]]),
        ])
        return (manager, v)
    }

    /// Model 2: each post's colour, by post ID.
    static func readColors(_ context: ManagedObjectContext, into hexByPost: Shared<[String: String]>) throws {
        for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
            guard let id = try post.value(forKey: "postID") as? String,
                  let hex = try post.value(forKey: "hexColor") as? String else { continue }
            hexByPost.withLock { $0[id] = hex }
        }
    }

    /// Model 3: a Color for each post, with the colour read before the schema changed.
    static func makeColors(_ context: ManagedObjectContext, from hexByPost: Shared<[String: String]>) throws {
        let colorEntity = try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Color"])
        for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
            let id = try post.value(forKey: "postID") as? String ?? ""
            let color = ManagedObject(entity: colorEntity, insertInto: context)
            try color.setValue(UUID().uuidString, forKey: "colorID")
            try color.setValue(hexByPost.withLock { $0[id] }, forKey: "hex")
            try post.setValue(color, forKey: "color")
        }
        try context.save()
    }

    /// Stores of versions 1, 2 and 3 all reach version 4: every post keeps its
    /// ID, date and colour (now a Color row), `hide` is false, the store keeps
    /// its UUID, and progress climbs to 1 without going back.
    @Test(arguments: [("CoreDataMigration_Example_1.sqlite", "ZCOLOR", 1001),
                      ("CoreDataMigration_Example_2.sqlite", "ZHEXCOLOR", 5979),
                      ("CoreDataMigration_Example_3.sqlite", "(SELECT ZHEX FROM ZCOLOR c WHERE c.Z_PK = ZPOST.ZCOLOR)", 7995)])
    func wiboscoStoresReachVersion4ThroughACustomStage(store: String, colorColumn: String, posts: Int) throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration/stores/" + store))
        let expected = try reference.rows("SELECT ZPOSTID, ZDATE, \(colorColumn) FROM ZPOST ORDER BY ZPOSTID")
        #expect(expected.count == posts)
        let uuid = try reference.rows("SELECT Z_UUID FROM Z_METADATA")

        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/" + store)
        let (manager, v) = try Self.wiboscoStages(hexByPost: Shared([:]))
        let progress = Shared<[Double]>([])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v[3])
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(manager, progress: progress))

        let migrated = try SQLiteReference(url)
        let colors = "SELECT p.ZPOSTID, p.ZDATE, c.ZHEX FROM ZPOST p JOIN ZCOLOR c ON c.Z_PK = p.ZCOLOR AND c.ZPOST = p.Z_PK ORDER BY p.ZPOSTID"
        #expect(try migrated.rows(colors) == expected)
        #expect(try migrated.rows("SELECT count(*) FROM ZCOLOR") == [[String(posts)]])
        #expect(try migrated.rows("SELECT ZHIDE, count(*) FROM ZPOST GROUP BY ZHIDE") == [["0", String(posts)]])
        #expect(try migrated.rows("SELECT Z_UUID FROM Z_METADATA") == uuid)
        #expect(try migrated.rows("PRAGMA integrity_check") == [["ok"]])
        #expect(try leftovers(in: workspace.url).isEmpty)

        let reports = progress.withLock { $0 }
        #expect(reports.first == 0 && reports.last == 1)
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0 < $1 }, "\(reports)")

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Post")
            request.fetchLimit = 20
            for post in try context.fetch(request) {
                let color = try #require(try post.value(forKey: "color") as? ManagedObject)
                #expect(try color.value(forKey: "post") as? ManagedObject === post)
            }
        }
    }

    /// A store written here with model 2 (WAL mode, our own version hashes):
    /// the hashes find its model; `willMigrate` sees model 2 and `didMigrate`
    /// model 3, each on a private-queue context.
    @Test func storeWrittenHereIsFoundByItsHashesAndHandlersSeeTheirModels() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Posts.sqlite")
        let hexByPost = Shared<[String: String]>([:])
        let (manager, v) = try Self.wiboscoStages(hexByPost: hexByPost)
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: v[1])
            let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            try context.performAndWait {
                let post = try #require(v[1].entitiesByName["Post"])
                for index in 0..<30 {
                    let object = ManagedObject(entity: post, insertInto: context)
                    try object.setValue("post \(index)", forKey: "postID")
                    try object.setValue(String(format: "%06X", index * 4099), forKey: "hexColor")
                }
                try context.save()
            }
            try coordinator.remove(store)
        }
        let seen = Shared<[String]>([])
        let watched = StagedMigrationManager(stages: manager.stages.map { stage in
            guard stage.label == "colors become entities" else { return stage }
            return .custom(from: v[1], to: v[2], label: stage.label,
                           willMigrate: { context in
                               seen.withLock { $0.append("will: \(context.persistentStoreCoordinator?.managedObjectModel === v[1]) \(context.concurrencyType == .privateQueue)") }
                               try Self.readColors(context, into: hexByPost)
                           },
                           didMigrate: { context in
                               seen.withLock { $0.append("did: \(context.persistentStoreCoordinator?.managedObjectModel === v[2])") }
                               try Self.makeColors(context, from: hexByPost)
                           })
        })
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v[3])
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(watched))
        #expect(seen.withLock { $0 } == ["will: true true", "did: true"])
        #expect(try SQLiteReference(url).rows("""
            SELECT count(*) FROM ZPOST p JOIN ZCOLOR c ON c.Z_PK = p.ZCOLOR WHERE c.ZHEX = printf('%06X', CAST(substr(p.ZPOSTID, 6) AS INTEGER) * 4099)
            """) == [["30"]])
    }

    /// A store that records persistent history: the custom stage's saves go
    /// into the copy (recorded like any save) instead of being refused, and
    /// each stage's schema change restarts the history.
    @Test func aCustomStageSavesIntoAStoreWithHistory() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Posts.sqlite")
        let hexByPost = Shared<[String: String]>([:])
        let (manager, v) = try Self.wiboscoStages(hexByPost: hexByPost)
        var tracking = StoreOptions()
        tracking.persistentHistoryTracking = true
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: v[1])
            let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: tracking)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            try context.performAndWait {
                let post = try #require(v[1].entitiesByName["Post"])
                for index in 0..<5 {
                    let object = ManagedObject(entity: post, insertInto: context)
                    try object.setValue("post \(index)", forKey: "postID")
                    try object.setValue("00000\(index)", forKey: "hexColor")
                }
                try context.save()
            }
            try coordinator.remove(store)
        }
        var options = Self.options(manager)
        options.persistentHistoryTracking = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v[3])
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        #expect(try SQLiteReference(url).rows("SELECT count(*) FROM ZCOLOR") == [["5"]])
        // The store is at model 2: transaction 2 is the custom stage's schema change,
        // 3 its save, 4 the last stage's schema change; each schema change restarts
        // the history (HistoryMigrationTests), so only the last is left.
        #expect(try SQLiteReference(url).rows("SELECT Z_PK, ZAUTHOR IS NULL FROM ATRANSACTION") == [["4", "1"]])
        #expect(try coordinator.fetchHistory(.fetchHistory(after: nil)).first?.author?.hasPrefix("com.apple.coredata.schemamigrator: ") == true)
    }

    // MARK: - wibosco revised: a custom stage keeps a dropped attribute as a section

    /// The revised chain: v2 → v3 drops `Post.content` and adds Section; a
    /// custom stage keeps each post's content as its first section. v1 → v2
    /// is lightweight through the model's own renaming identifier
    /// (`hexColor` was `color`).
    @Test func wiboscoRevisedChainKeepsContentAsSections() throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_1.sqlite"))
        let expected = try reference.rows("SELECT ZPOSTID, ZCOLOR, ZCONTENT FROM ZPOST ORDER BY ZPOSTID")
        #expect(expected.count == 10)

        let v = try Self.versions(Self.revised)
        let contentByPost = Shared<[String: String]>([:])
        let manager = StagedMigrationManager(stages: [
            .lightweight([v[0], v[1]]),
            .custom(from: v[1], to: v[2], label: "content becomes a section",
                    willMigrate: { context in
                        for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
                            let id = try post.value(forKey: "postID") as? String ?? ""
                            let content = try post.value(forKey: "content") as? String
                            contentByPost.withLock { $0[id] = content }
                        }
                    },
                    didMigrate: { context in
                        let sectionEntity = try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Section"])
                        for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
                            let id = try post.value(forKey: "postID") as? String ?? ""
                            let section = ManagedObject(entity: sectionEntity, insertInto: context)
                            try section.setValue("Body", forKey: "title")
                            try section.setValue(contentByPost.withLock { $0[id] }, forKey: "body")
                            try section.setValue(post, forKey: "post")
                        }
                        // Left unsaved on purpose: the stage saves what a handler leaves.
                    }),
            .lightweight([v[2], v[3]]),
        ])
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration-revised/stores/CoreDataMigration_Example_1.sqlite")
        _ = try PersistentStoreCoordinator(managedObjectModel: v[3]).addPersistentStore(type: .sqlite, at: url, options: Self.options(manager))

        let migrated = try SQLiteReference(url)
        #expect(try migrated.rows("""
            SELECT p.ZPOSTID, p.ZHEXCOLOR, s.ZBODY FROM ZPOST p JOIN ZSECTION s ON s.ZPOST = p.Z_PK ORDER BY p.ZPOSTID
            """) == expected)
        #expect(try migrated.rows("SELECT ZSOFTDELETED, count(*) FROM ZPOST GROUP BY ZSOFTDELETED") == [["0", "10"]])
        #expect(try leftovers(in: workspace.url).isEmpty)
    }

    // MARK: - CoreDataPlus chains

    /// SampleModel V1 → 2 → 3 through one lightweight stage, stepping through
    /// model 2; the V2 store (migrated by Core Data, with a stale entity name
    /// in `Z_PRIMARYKEY`) is found to be at model 2 and takes the last step only.
    @Test(arguments: ["SampleModel_V1.sqlite", "SampleModel_V2.sqlite"])
    func coreDataPlusSampleModelChain(store: String) throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("coredataplus-samplemodel/stores/" + store))
        let v = try Self.versions("coredataplus-samplemodel/SampleModel.xcdatamodeld")
        let manager = StagedMigrationManager(stages: [.lightweight(v)])
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel/stores/" + store)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v[2])
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(manager))

        let cars = "SELECT c.Z_PK, c.ZNUMBERPLATE, c.ZMODEL, p.ZFIRSTNAME FROM ZCAR c LEFT JOIN ZPERSON p ON p.Z_PK = c.ZOWNER ORDER BY c.Z_PK"
        let migrated = try SQLiteReference(url)
        #expect(try migrated.rows(cars) == reference.rows(cars))
        #expect(try migrated.rows("SELECT count(*) FROM ZCAR") == [["125"]])
        #expect(try migrated.rows("PRAGMA integrity_check") == [["ok"]])
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let luxury = try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: "LuxuryCar")) }
        #expect(luxury == 5)
    }

    /// SampleModel3 V1 → v2 (adds Pet) → v3 (drops `User.petName`).
    @Test func coreDataPlusSampleModel3Chain() throws {
        let original = try FixtureWorkspace()
        let reference = try SQLiteReference(try original.copyStore("coredataplus-samplemodel3/stores/SampleModel3_V1.sqlite"))
        let v = try Self.versions("coredataplus-samplemodel3/SampleModel3.xcdatamodeld")
        #expect(v.count == 3)
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel3/stores/SampleModel3_V1.sqlite")
        let manager = StagedMigrationManager(stages: [.lightweight([v[0], v[1]]), .lightweight([v[1], v[2]])])
        try PersistentStoreCoordinator(managedObjectModel: v[2]).addPersistentStore(type: .sqlite, at: url, options: Self.options(manager))
        let users = "SELECT Z_PK, ZNAME FROM ZUSER ORDER BY Z_PK"
        #expect(try reference.rows(users).count == 12)
        #expect(try SQLiteReference(url).rows(users) == reference.rows(users))
        #expect(try !SQLiteReference(url).rows("SELECT name FROM pragma_table_info('ZUSER')").contains(["ZPETNAME"]))
    }

    // MARK: - Failures leave the store as it was

    /// The store's files, byte for byte. `-shm` is left out: it is SQLite's
    /// shared-memory index of the log, which any reader rebuilds, not data.
    ///
    /// An empty `-wal` counts as none: a read-only connection to a WAL store
    /// creates one, and SQLite reads an empty log and a missing one alike.
    static func files(at url: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-journal"] {
            let file = URL(fileURLWithPath: url.path + suffix)
            guard FileManager.default.fileExists(atPath: file.path) else { continue }
            let contents = try Data(contentsOf: file)
            if suffix == "" || !contents.isEmpty { files[suffix] = contents }
        }
        return files
    }

    struct HandlerError: Error, CustomStringConvertible {
        var description: String { "the colour table is not ready" }
    }

    /// A handler that throws, and a didMigrate that leaves the new required
    /// relationship empty: the error names the stage (and carries the
    /// handler's error), the store's files are unchanged, no copy is left,
    /// and the store still opens with its own model.
    @Test(arguments: ["throws in willMigrate", "throws in didMigrate", "leaves Post.color empty"])
    func failingCustomStageLeavesTheStoreByteIdentical(failure: String) throws {
        let workspace = try FixtureWorkspace()
        // With its rows in its -wal: both files must survive.
        let url = try workspace.copyStoreWithItsRowsInTheLog("wibosco-migration/stores/CoreDataMigration_Example_2.sqlite")
        let before = try Self.files(at: url)
        let v = try Self.versions(Self.wibosco)
        let manager = StagedMigrationManager(stages: [
            .custom(from: v[1], to: v[2], label: "colors",
                    willMigrate: { _ in if failure == "throws in willMigrate" { throw HandlerError() } },
                    didMigrate: { _ in if failure == "throws in didMigrate" { throw HandlerError() } }),
        ])
        let error = try #require(throws: PersistentStoreError.self) {
            _ = try PersistentStoreCoordinator(managedObjectModel: v[2]).addPersistentStore(type: .sqlite, at: url, options: Self.options(manager))
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("stage 1 (custom, \"colors\")"), "\(error)")
        #expect(error.message.contains("the store was not changed"), "\(error)")
        if failure == "leaves Post.color empty" {
            #expect(error.message.contains("Post.color is a required relationship, but 5979 Post rows have no value"), "\(error)")
        } else {
            #expect(error.message.contains(failure.hasSuffix("willMigrate") ? "willMigrate" : "didMigrate"), "\(error)")
            #expect(error.underlyingDescription == "the colour table is not ready")
        }
        #expect(try Self.files(at: url) == before)
        #expect(try leftovers(in: workspace.url).isEmpty)
        try PersistentStoreCoordinator(managedObjectModel: v[1]).addPersistentStore(type: .sqlite, at: url)
    }

    /// A store in WAL mode whose rows are only in its `-wal` (revised v2):
    /// a failing stage leaves the main file and the log byte for byte.
    @Test func failingStageLeavesAWriteAheadLogStoreByteIdentical() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStoreWithItsRowsInTheLog("wibosco-migration-revised/stores/CoreDataMigration_Example_2.sqlite")
        let before = try Self.files(at: url)
        #expect(before["-wal"]?.isEmpty == false)
        let v = try Self.versions(Self.revised)
        let manager = StagedMigrationManager(stages: [
            .lightweight([v[0], v[1]]),
            .custom(from: v[1], to: v[2], didMigrate: { _ in throw HandlerError() }),
        ])
        let error = try #require(throws: PersistentStoreError.self) {
            _ = try PersistentStoreCoordinator(managedObjectModel: v[2]).addPersistentStore(type: .sqlite, at: url, options: Self.options(manager))
        }
        #expect(error.message.contains("stage 2 (custom)"), "\(error)")
        #expect(try Self.files(at: url) == before)
        #expect(try leftovers(in: workspace.url).isEmpty)
    }

    // MARK: - Bad input

    /// Each bad stage list, store or model: a clear error, the store's files unchanged.
    @Test(arguments: [
        ("gap", "there is a gap between stage 1 (lightweight) and stage 2 (lightweight)"),
        ("duplicate", "model 2 of stage 2 (lightweight) is the same version as model 1 of stage 1 (lightweight)"),
        ("duplicate loaded twice", "is the same version as"),
        ("no stages", "there are no stages"),
        ("empty stage", "stage 2 (lightweight) lists no model"),
        ("store matches no stage", "the store's model is none of the stages' 2 model versions"),
        ("newer store", "cannot be migrated backwards"),
        ("backwards", "cannot migrate backwards: the store was written with model 4 of stage 1 (lightweight), a later version than the coordinator's model (model 3 of stage 1"),
        ("coordinator's model missing", "the coordinator's model is none of the stages' models"),
        ("last stage ends elsewhere", "the last stage ends with model 4 of stage 1 (lightweight), not with the coordinator's model (model 3 of stage 1"),
    ])
    func badInputThrowsAndLeavesTheStore(input: String, message: String) throws {
        let workspace = try FixtureWorkspace()
        let v = try Self.versions(Self.wibosco)
        // Every case opens wibosco's v3 store, except those needing a newer one.
        var store = "wibosco-migration/stores/CoreDataMigration_Example_3.sqlite"
        var coordinatorModel = v[3]
        let stages: [MigrationStage]
        switch input {
        case "gap": stages = [.lightweight([v[0], v[1]]), .lightweight([v[2], v[3]])]
        case "duplicate": stages = [.lightweight([v[1], v[2]]), .lightweight([v[2], v[1]])]
        case "duplicate loaded twice": stages = [.lightweight([v[2], try Self.versions(Self.wibosco)[2], v[3]])]
        case "no stages": stages = []
        case "empty stage": stages = [.lightweight([v[2], v[3]]), .lightweight([])]
        case "store matches no stage": stages = [.lightweight([v[0], v[1]])]; coordinatorModel = v[1]
        case "newer store":
            // A v4 store (the WAL fixture) opened by an app whose last model is v3.
            store = "wibosco-migration/stores/CoreDataMigration_Example_WAL.sqlite"
            stages = [.lightweight([v[1], v[2]])]; coordinatorModel = v[2]
        case "backwards":
            store = "wibosco-migration/stores/CoreDataMigration_Example_WAL.sqlite"
            stages = [.lightweight(v)]; coordinatorModel = v[2]
        case "coordinator's model missing": stages = [.lightweight([v[1], v[2]])]
        default: stages = [.lightweight(v)]; coordinatorModel = v[2]; store = "wibosco-migration/stores/CoreDataMigration_Example_2.sqlite"
        }
        let url = try workspace.copyStore(store)
        let before = try Self.files(at: url)
        let error = try #require(throws: PersistentStoreError.self) {
            _ = try PersistentStoreCoordinator(managedObjectModel: coordinatorModel)
                .addPersistentStore(type: .sqlite, at: url, options: Self.options(StagedMigrationManager(stages: stages)))
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains(message), "\(error)")
        #expect(error.message.contains("the store was not changed"), "\(error)")
        #expect(try Self.files(at: url) == before)
        #expect(try leftovers(in: workspace.url).isEmpty)
    }

    /// ``StagedMigrationManager/validate()`` finds a bad stage list without a store.
    @Test func validateFindsAGapWithoutAStore() throws {
        let v = try Self.versions(Self.wibosco)
        #expect(throws: PersistentStoreError.self) {
            try StagedMigrationManager(stages: [.lightweight([v[0], v[1]]), .custom(from: v[2], to: v[3])]).validate()
        }
        try StagedMigrationManager(stages: [.lightweight([v[0], v[1]]), .custom(from: v[1], to: v[2]), .lightweight([v[2], v[3]])]).validate()
    }
}

/// A value shared by the handlers of a stage: what an app captures in both
/// `willMigrate` and `didMigrate` to carry values across the schema change.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) {
        storage = Mutex(value)
    }

    func withLock<Result: Sendable>(_ body: @Sendable (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock { try body(&$0) }
    }
}
