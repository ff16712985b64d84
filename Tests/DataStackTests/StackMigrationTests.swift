@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// The stack opens a store written with an older model version: it migrates it
/// with the default options, reports progress, and leaves the store as it was
/// when it cannot (or, for a cache, starts over when asked to).
@Suite struct StackMigrationTests {
    /// Version 1 of the ticker model: no `name`, and `price` optional.
    private static func version1() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            // Not bound to Ticker, which declares `name`, a property version 1
            // lacks: a coordinator refuses a class that disagrees with its entity.
            EntityDescription(name: "Ticker", properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            ]),
        ])
    }

    /// A store written by version 1 with `count` tickers.
    private static func makeVersion1Store(at url: URL, count: Int) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: version1())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for index in 0..<count {
                let ticker = ManagedObject(entity: try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Ticker"]),
                                           insertInto: context)
                try ticker.setValue("T\(index)", forKey: "symbol")
                try ticker.setValue(Double(index), forKey: "price")
            }
            try context.save()
        }
        try coordinator.remove(store)
    }

    /// The bytes of the store file and its sidecars.
    private static func files(at url: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: url.path + suffix) { result[suffix] = data }
        }
        return result
    }

    private static func collect(_ progress: AsyncStream<Double>) async -> [Double] {
        var fractions: [Double] = []
        for await fraction in progress { fractions.append(fraction) }
        return fractions
    }

    @Test func theStackMigratesAnOlderStoreWithItsDefaultsAndReportsProgress() async throws {
        let directory = StackDirectory()
        try Self.makeVersion1Store(at: directory.storeURL, count: 2_000)
        let stack = StackManager()
        let progress = stack.migrationProgress
        let collected = Task { await Self.collect(progress) }
        try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        let fractions = await collected.value
        #expect(fractions.first == 0 && fractions.last == 1, "\(fractions)")
        #expect(fractions == fractions.sorted(), "progress only moves forward")

        // Both coordinators use the migrated file: an importer saves, the main context reads.
        let importer = stack.importerContext()
        try await importer.perform {
            var request = FetchRequest<Ticker>()
            request.predicate = try FetchPredicate(format: "symbol == 'T7'")
            let ticker = try #require(try importer.fetch(request).first)
            ticker.name = "Seven"
            try importer.save()
        }
        let main = stack.mainContext
        let names = try await main.perform {
            var request = FetchRequest<Ticker>()
            request.predicate = try FetchPredicate(format: "name != nil")
            return try main.fetch(request).map(\.name)
        }
        #expect(names == ["Seven"])
        let count = try await main.perform { try main.count(for: FetchRequest<Ticker>()) }
        #expect(count == 2_000)
        #expect(await Self.collect(stack.migrationProgress).isEmpty, "after setup, a new progress sequence ends at once")
    }

    @Test func aStoreThatCannotBeMigratedIsLeftAsItWasAndTheErrorSaysWhy() async throws {
        let directory = StackDirectory()
        try Self.makeVersion1Store(at: directory.storeURL, count: 10)
        let before = Self.files(at: directory.storeURL)
        // A new required attribute without a default cannot be inferred for existing rows.
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Ticker", properties: [ // unbound: Ticker declares properties this model lacks
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "exchange", type: .string, isOptional: false),
            ]),
        ])
        let stack = StackManager()
        let error = try await #require(throws: PersistentStoreError.self) {
            try await stack.setup(model: model, storeURL: directory.storeURL)
        }
        #expect(error.code == .migrationFailed, "\(error)")
        #expect(error.message.contains("Ticker.exchange"), "the error names the entity and property: \(error)")
        #expect(error.message.contains("recreatesStoreWhenMigrationFails"), "the error says a cache could start over: \(error)")
        #expect(!stack.isReady)
        #expect(Self.files(at: directory.storeURL) == before, "the store is byte-identical")
    }

    @Test func aCacheStoreIsCreatedAnewWhenItCannotBeMigratedIfAsked() async throws {
        let directory = StackDirectory()
        try Self.makeVersion1Store(at: directory.storeURL, count: 10)
        let incompatible = ManagedObjectModel(entities: [
            EntityDescription(name: "Quote", properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "bid", type: .double, isOptional: false),
            ]),
        ])
        var options = StoreOptions.stackDefaults
        options.recreatesStoreWhenMigrationFails = true
        let stack = StackManager()
        try await stack.setup(model: incompatible, storeURL: directory.storeURL, options: options)
        let main = stack.mainContext
        let count = try await main.perform { try main.count(for: FetchRequest<ManagedObject>(entityName: "Quote")) }
        #expect(count == 0, "a new, empty store")
        let importer = stack.importerContext()
        try await importer.perform {
            let quote = ManagedObject(entity: try #require(importer.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Quote"]),
                                      insertInto: importer)
            try quote.setValue("ACME", forKey: "symbol")
            try quote.setValue(1.5, forKey: "bid")
            try importer.save()
        }
    }

    @Test func withoutMigrationOptionsAnOlderStoreIsRefusedSayingSo() async throws {
        let directory = StackDirectory()
        try Self.makeVersion1Store(at: directory.storeURL, count: 10)
        let before = Self.files(at: directory.storeURL)
        let stack = StackManager()
        let error = try await #require(throws: PersistentStoreError.self) {
            try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL, options: StoreOptions())
        }
        #expect(error.code == .incompatibleModel, "\(error)")
        #expect(Self.files(at: directory.storeURL) == before)
    }

    @Test func aCacheStoreIsNotRecreatedWhenMigratingFailsForAnotherReason() throws {
        let directory = StackDirectory()
        try Self.makeVersion1Store(at: directory.storeURL, count: 10)
        // Another connection holds the file: the migration cannot fold its log.
        let holder = PersistentStoreCoordinator(managedObjectModel: Self.version1())
        try holder.addPersistentStore(type: .sqlite, at: directory.storeURL)
        let holding = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: holder)
        _ = try holding.performAndWait { try holding.count(for: FetchRequest<ManagedObject>(entityName: "Ticker")) }
        var options = StoreOptions.stackDefaults
        options.recreatesStoreWhenMigrationFails = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: StackTestModel.make())
        let error = try #require(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: directory.storeURL, options: options)
        }
        #expect(error.code == .migrationFailed && !error.isModelMismatch, "\(error)")
        let rows = try Connection(path: directory.storeURL.path).prepare("SELECT count(*) FROM ZTICKER")
        _ = try rows.step()
        #expect(rows.int64(at: 0) == 10, "the store on disk was not destroyed")
    }
}
