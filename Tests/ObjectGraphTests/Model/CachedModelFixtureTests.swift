import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStores

/// Real stores written by Apple's Core Data, opened with the model they cache in
/// `Z_MODELCACHE` and no model file.
///
/// Two oracles, neither written by us: for stores that came with their Xcode
/// model, the cached model must equal that model entity by entity and property
/// by property; for stores that came without one (Notes, Accounts, Screen Time,
/// network usage, CoreDataPlus's model built in code), every object must read
/// back what SQLite holds — the count per entity, and each row's text values
/// against its object's string attributes, whichever column holds them (so a
/// column given to the wrong property shows as a difference).
@Suite struct CachedModelFixtureTests {
    /// The fixture stores written before Core Data cached its model (frameworks
    /// up to 519, 2011), as the fixture README lists them.
    static let storesWithoutCache: Set<String> = [
        "hwaxxer-bookmigration/stores/Model1.sqlite",
        "mwkirk-mwkcoredata/stores/MWKCoreDataTests.sqlite",
        "mwkirk-mwkcoredata/stores/MWKCoreDataTests2.sqlite",
        "magicalrecord-recipes/stores/Recipes.sqlite",
        "plaso-apple-stores/stores/ios-kik.sqlite",
        "restkit-twitter-seed/stores/RKSeedDatabase.sqlite",
    ]

    /// The pairs whose store has a model cache.
    static let pairsWithCache = CoreDataFixtures.pairs.filter { !storesWithoutCache.contains($0.store) }

    /// The stores that came without an Xcode model but cache theirs.
    static let storesWithOnlyACache = (CoreDataFixtures.manifest?.storesWithoutXMLModel ?? []).filter { !storesWithoutCache.contains($0) }

    @Test func theCorpusHasTheStoresTheIssueNames() {
        #expect(Self.pairsWithCache.count == 17)
        #expect(Self.storesWithOnlyACache.count == 9)
    }

    @Test(arguments: storesWithoutCache.sorted())
    func aStoreWithoutModelCacheSaysSoInsteadOfOpeningEmpty(store: String) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(store)
        let error = try #require(throws: ModelLoadingError.self) { try ManagedObjectModel(cachedInStoreAt: storeURL) }
        #expect(error.code == .notAModel)
        #expect(error.path == storeURL.path)
        #expect(error.message.contains("Z_MODELCACHE"))
    }

    @Test(arguments: pairsWithCache)
    func theCachedModelEqualsTheXcodeModelThatWroteTheStore(pair: CoreDataFixtures.Manifest.Pair) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(pair.store)
        let xml = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(pair.model))
        let loaded = try CompiledModelLoader.loadModel(cachedInStoreAt: storeURL)
        // Core Data caches the model without class names after it migrates a store
        // (CoreDataPlus V2, the wibosco chains); the entities are the same.
        let differences = ModelDifferences.between(xml, loaded.model, classNamesMayBeMissing: true)
        #expect(differences.isEmpty, "\(differences.count) differences: \(differences.prefix(12).joined(separator: "; "))")
    }

    @Test(arguments: storesWithOnlyACache)
    func aStoreWithoutModelFileOpensWithItsCachedModelAndReadsAsSQLiteHoldsIt(store: String) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(store)
        let model = try ManagedObjectModel(cachedInStoreAt: storeURL)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.isReadOnly = true
        try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
        let reference = try FixtureSQLite(path: storeURL.path, model: model)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let mismatches = try context.performAndWait { try StoreReadback.stringMismatches(in: context, with: reference) }
        #expect(mismatches.isEmpty, "\(mismatches.count) differences, first: \(mismatches.prefix(8).joined(separator: "; "))")
    }

    /// A store this package creates caches its model, as Core Data's do; a
    /// migration replaces the cache with the new model, as Core Data's migrator does.
    @Test func storesThisPackageWritesCacheTheirModelThroughMigrations() throws {
        let workspace = try FixtureWorkspace()
        let versions = "wibosco-migration/CoreDataMigration_Example.xcdatamodeld/"
        let first = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(versions + "CoreDataMigration_Example.xcdatamodel"))
        let second = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(versions + "CoreDataMigration_Example 2.xcdatamodel"))
        let storeURL = workspace.url.appendingPathComponent("Posts.sqlite")
        let creator = PersistentStoreCoordinator(managedObjectModel: first)
        try creator.remove(creator.addPersistentStore(type: .sqlite, at: storeURL))
        #expect(ModelDifferences.between(first, try ManagedObjectModel(cachedInStoreAt: storeURL)).isEmpty)

        let migrator = PersistentStoreCoordinator(managedObjectModel: second)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        try migrator.remove(migrator.addPersistentStore(type: .sqlite, at: storeURL, options: options))
        let cached = try ManagedObjectModel(cachedInStoreAt: storeURL)
        #expect(ModelDifferences.between(second, cached).isEmpty, "\(ModelDifferences.between(second, cached).prefix(4))")
    }

    @Test func theOneLineOpenIsReadOnlyUnlessAsked() throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore("plaso-apple-stores/stores/ios-Accounts3.sqlite")
        let coordinator = try PersistentStoreCoordinator(openingStoreWithItsCachedModelAt: storeURL)
        #expect(coordinator.persistentStores.first?.isReadOnly == true)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let error = try context.performAndWait {
            let account = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Account")).first)
            try account.setValue("changed", forKey: "username")
            return try #require(throws: (any Error).self) { try context.save() }
        }
        #expect("\(error)".contains("read-only"), "\(error)")

        let writable = try PersistentStoreCoordinator(openingStoreWithItsCachedModelAt: workspace.copyStore(
            "apple-notes-notestore/stores/NoteStore-macOS-12-Monterey.sqlite"), readOnly: false)
        #expect(writable.persistentStores.first?.isReadOnly == false)
    }
}
