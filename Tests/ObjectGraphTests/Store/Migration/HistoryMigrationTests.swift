import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Persistent history across a lightweight migration: what was recorded
/// before it names entities and properties by the old model's numbers and
/// bits, so it is not read with the new one; the migration restarts the
/// history with a transaction of its own, and readers behind it are told.
@Suite struct HistoryMigrationTests {
    static func options(tracking: Bool = true, migrating: Bool) -> StoreOptions {
        var options = StoreOptions()
        options.persistentHistoryTracking = tracking
        options.migratesAutomatically = migrating
        options.infersMappingModel = migrating
        return options
    }

    /// A version 1 library store with two transactions; returns the first one's token.
    static func makeStore(at url: URL) throws -> PersistentHistoryToken {
        let v1 = MigrationTests.libraryV1()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v1)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(migrating: false))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.transactionAuthor = "importer"
        try context.performAndWait {
            let author = ManagedObject(entity: v1.entitiesByName["Author"]!, insertInto: context)
            try author.setValue("Ann", forKey: "name")
            let book = ManagedObject(entity: v1.entitiesByName["Book"]!, insertInto: context)
            try book.setValue("Tome", forKey: "title")
            try book.setValue(author, forKey: "author")
            try context.save()
            try book.setValue("Tome II", forKey: "title")
            try context.save()
        }
        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.count == 2)
        return try #require(history.first?.token)
    }

    @Test func aMigrationRestartsTheHistoryWithItsOwnTransaction() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Migrated.sqlite")
        let old = try Self.makeStore(at: url)
        let digest = try #require(try PersistentStoreCoordinator.metadataForPersistentStore(at: url)[StoreMetadataKey.modelVersionHashesDigest] as? String)

        let coordinator = PersistentStoreCoordinator(managedObjectModel: MigrationTests.libraryV2())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(migrating: true))
        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.map(\.transactionNumber) == [3], "numbers continue after the deleted transactions")
        #expect(history.first?.author == "com.apple.coredata.schemamigrator: lightweight migration from model with digest { \(digest) }")
        #expect(history.first?.changes?.isEmpty == true)
        #expect(try SQLiteReference(url).rows("SELECT count(*) FROM ACHANGE") == [["0"]])

        let error = try #require(throws: PersistentStoreError.self) { _ = try coordinator.fetchHistory(.fetchHistory(after: old)) }
        #expect(error.code == .historyExpired, "\(error)")

        // Saves go on recording after the migration's transaction, their change
        // keys continuing from Z_MAX although the rows before them are gone.
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let book = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
            try book.setValue("Tome III", forKey: "heading")
            _ = ManagedObject(entity: try #require(coordinator.managedObjectModel.entitiesByName["Writer"]), insertInto: context)
            try context.save()
        }
        let changes = try coordinator.fetchHistory(.fetchHistory(after: history.first?.token)).first?.changes ?? []
        #expect(changes.map { "\($0.changedObjectID.entity.name) \($0.changeType) \($0.updatedProperties?.sorted() ?? [])" }.sorted()
                == ["Book update [\"heading\"]", "Writer insert []"])
        #expect(try SQLiteReference(url).rows("SELECT Z_PK FROM ACHANGE ORDER BY Z_PK") == [["4"], ["5"]])
    }

    /// Migrated without tracking, the old history still goes (it cannot be
    /// read right), no transaction is recorded, and the store takes saves.
    @Test func aMigrationWithoutTrackingLeavesNoHistory() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Untracked.sqlite")
        _ = try Self.makeStore(at: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: MigrationTests.libraryV2())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(tracking: false, migrating: true))
        #expect(try SQLiteReference(url).rows("SELECT (SELECT count(*) FROM ATRANSACTION) + (SELECT count(*) FROM ACHANGE)") == [["0"]])
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let book = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
            try book.setValue("Tome III", forKey: "heading")
            try context.save()
        }
    }

    /// A store with Core Data's older history layout (names inline, no
    /// `ATRANSACTIONSTRING`) is read-only with tracking; migrated, its history
    /// is gone, so the layout goes too and the store takes recorded saves.
    @Test func aMigratedStoreOfTheOlderLayoutTakesRecordedSaves() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Inline.sqlite")
        _ = try Self.makeStore(at: url)
        try RawStore.execute(url, "DROP TABLE ATRANSACTIONSTRING")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: MigrationTests.libraryV2())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.options(migrating: true))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let book = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
            try book.setValue("Tome III", forKey: "heading")
            try context.save()
        }
        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.map(\.transactionNumber) == [3], "numbers go on from Z_MAX")
        #expect(history.first?.changes?.count == 1)
    }
}
