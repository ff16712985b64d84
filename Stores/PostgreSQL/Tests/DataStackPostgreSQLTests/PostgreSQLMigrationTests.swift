@testable import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// What migrating in place means on a shared server: the tables a rebuild
/// leaves, a failure rolled back by PostgreSQL, other machines told through
/// the history. (What both stores do alike is in MigrationContractTests.)
@Suite("PostgreSQL migration", .serialized)
struct PostgreSQLMigrationTests {
    private static func model(renamed: Bool = false, uniqueNames: Bool = false) -> ManagedObjectModel {
        let item = EntityDescription(name: renamed ? "Article" : "Item", properties: [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "rank", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "items", isToMany: true, deleteRule: .nullify),
        ])
        if renamed { item.renamingIdentifier = "Item" }
        if uniqueNames { item.uniquenessConstraints = [["name"]] }
        let tag = EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "items", destination: renamed ? "Article" : "Item", inverse: "tags", isToMany: true, deleteRule: .nullify),
        ])
        return ManagedObjectModel(entities: [item, tag])
    }

    private static var migrating: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        return options
    }

    /// Items named `names`, every one tagged "all".
    private func seed(_ url: URL, names: [String], options: StoreOptions = StoreOptions()) throws {
        let model = Self.model()
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try StoreKind.postgreSQL.coordinator(model, at: url, options: options))
        try context.performAndWait {
            let tag = ManagedObject(entity: try #require(model.entitiesByName["Tag"]), insertInto: context)
            try tag.setValue("all", forKey: "label")
            for (rank, name) in names.enumerated() {
                let item = ManagedObject(entity: try #require(model.entitiesByName["Item"]), insertInto: context)
                try item.setValue(name, forKey: "name")
                try item.setValue(rank, forKey: "rank")
                try item.setValue(Set([tag]), forKey: "tags")
            }
            try context.save()
        }
    }

    // MARK: - The session a staged migration lends its handlers

    private struct Abort: Error {}

    @Test("a session lent to a staged migration's handlers runs their transactions as savepoints: one that throws, fails or restarts undoes only its own rows")
    func lentSessionNestsTransactions() throws {
        let db = try PostgreSQLConnection(url: PostgreSQLTestServer.shared.get().makeDatabase())
        defer { db.close() }
        try db.executeScript("CREATE TABLE t (a int)")
        func values() throws -> [Int64] {
            let result = try db.execute("SELECT a FROM t ORDER BY a")
            return try (0..<result.rowCount).map { try result.requiredInt64(row: $0, column: 0) }
        }
        try db.transaction {
            try db.execute("INSERT INTO t VALUES (1)")
            db.nestsTransactions = true
            defer { db.nestsTransactions = false }
            #expect(throws: Abort.self) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES (2)")
                    throw Abort()
                }
            }
            // A failed statement aborts the savepoint only; the outer transaction goes on.
            #expect(throws: PostgreSQLError.self) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES (5)")
                    try db.execute("INSERT INTO nowhere VALUES (1)")
                }
            }
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (3)")
                // As a save whose first attempt met a conflict: that attempt is undone, not the outer transaction.
                try db.restartTransaction()
                try db.execute("INSERT INTO t VALUES (4)")
            }
            #expect(try values() == [1, 4])
            #expect(db.savepointDepth == 0)
        }
        #expect(try values() == [1, 4], "committed with the outer transaction")
        // Without the flag, nesting is refused as before.
        #expect(throws: PostgreSQLError.self) { try db.transaction { try db.transaction {} } }
    }

    private func tables(_ url: URL) throws -> [String] {
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        let result = try connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
        return (0..<result.rowCount).compactMap { result.string(row: $0, column: 0) }
    }

    @Test("a renamed entity rebuilds its table under the new name, twice over, and leaves no table aside")
    func rebuildsLeaveNothingAside() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        try seed(url, names: ["a", "b", "c"])
        let renamed = try StoreKind.postgreSQL.coordinator(Self.model(renamed: true), at: url, options: Self.migrating)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: renamed)
        try context.performAndWait {
            let articles = try context.fetch(FetchRequest<ManagedObject>(entityName: "Article"))
            #expect(Set(try articles.map { try $0.value(forKey: "name") as? String }) == ["a", "b", "c"])
            for article in articles {
                let tags = try #require(try article.value(forKey: "tags") as? Set<ManagedObject>)
                #expect(try tags.map { try $0.value(forKey: "label") as? String } == ["all"])
            }
            let added = ManagedObject(entity: try #require(renamed.managedObjectModel.entitiesByName["Article"]), insertInto: context)
            try added.setValue("d", forKey: "name")
            try context.save()
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Article")) == 4)
        }
        #expect(try tables(url) == ["z_1tags", "z_metadata", "z_primarykey", "zarticle", "ztag"])

        // While a coordinator has the store open with its model, another model does not migrate it.
        #expect {
            _ = try StoreKind.postgreSQL.coordinator(Self.model(), at: url, options: Self.migrating)
        } throws: { error in
            let error = error as? PersistentStoreError
            return error?.code == .migrationFailed && error?.message.contains("other coordinators have had the store open") == true
        }
        try renamed.remove(try #require(renamed.persistentStores.first))

        // Back to the old name: the new table's primary key and indexes are in the way only if the first rebuild left them misnamed.
        let back = try StoreKind.postgreSQL.coordinator(Self.model(), at: url, options: Self.migrating)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: back)
        let (items, tags) = try reader.performAndWait {
            (try reader.count(for: FetchRequest<ManagedObject>(entityName: "Item")), try reader.count(for: FetchRequest<ManagedObject>(entityName: "Tag")))
        }
        #expect(items == 0)   // Item is not renamed from Article: a new entity, and Article's rows go with it
        #expect(tags == 1)
        #expect(try tables(url) == ["z_1tags", "z_metadata", "z_primarykey", "zitem", "ztag"])
    }

    @Test("a uniqueness constraint the stored rows break fails in PostgreSQL, which rolls every table back")
    func aFailedMigrationIsRolledBack() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        try seed(url, names: ["same", "same", "other"])
        let before = try tables(url)
        #expect {
            _ = try StoreKind.postgreSQL.coordinator(Self.model(renamed: true, uniqueNames: true), at: url, options: Self.migrating)
        } throws: { error in
            let error = error as? PersistentStoreError
            return error?.code == .migrationFailed && error?.message.contains("uniqueness constraint") == true
                && error?.message.contains("was not changed") == true
        }
        #expect(try tables(url) == before)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try StoreKind.postgreSQL.coordinator(Self.model(), at: url))
        try context.performAndWait {
            let names = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item")).map { try $0.value(forKey: "name") as? String }
            #expect(names.sorted { ($0 ?? "") < ($1 ?? "") } == ["other", "same", "same"])
        }
    }

    @Test("a store whose connection dropped while another machine migrated refuses to read on with its old model")
    func aReconnectAfterAMigrationIsRefused() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        try seed(url, names: ["a", "b"])
        let old = try StoreKind.postgreSQL.coordinator(Self.model(), at: url)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: old)
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<ManagedObject>(entityName: "Item")) } == 2)

        // The old store's connection drops (and with it its open-store lock); another machine migrates meanwhile.
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        _ = try admin.execute("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
            """)
        let migrated = try StoreKind.postgreSQL.coordinator(Self.model(renamed: true), at: url, options: Self.migrating)
        #expect(migrated.persistentStores.count == 1)

        // The old store reconnects, finds the store migrated, and throws: its statements would name the wrong tables.
        var codes: [PersistentStoreError.Code] = []
        for _ in 0..<2 {
            do {
                let count = try reader.performAndWait { try reader.count(for: FetchRequest<ManagedObject>(entityName: "Item")) }
                Issue.record("the old model read \(count) items from a migrated store")
            } catch let error as PersistentStoreError {
                codes.append(error.code)
            }
        }
        #expect(codes.last == .incompatibleModel)
    }

    @Test("with history, the migration is the only transaction left, and a machine holding an older token is told its history expired")
    func historyRestartsAndOthersAreTold() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        var tracking = StoreOptions()
        tracking.persistentHistoryTracking = true
        try seed(url, names: ["a"], options: tracking)
        let old = try StoreKind.postgreSQL.coordinator(Self.model(), at: url, options: tracking)
        let token = try #require(try old.currentPersistentHistoryToken())
        try old.remove(try #require(old.persistentStores.first))

        var options = Self.migrating
        options.persistentHistoryTracking = true
        let migrated = try StoreKind.postgreSQL.coordinator(Self.model(renamed: true), at: url, options: options)
        let history = try migrated.fetchHistory(.fetchHistory(after: nil))
        #expect(history.count == 1)
        #expect(history.first?.author?.hasPrefix("com.apple.coredata.schemamigrator: lightweight migration") == true)
        #expect(history.first?.changes?.isEmpty ?? true)
        #expect {
            _ = try migrated.fetchHistory(.fetchHistory(after: PersistentHistoryToken(storeIdentifier: token.storeIdentifier,
                                                                                       transactionNumber: token.transactionNumber - 1)))
        } throws: { ($0 as? PersistentStoreError)?.code == .historyExpired }
    }
}
