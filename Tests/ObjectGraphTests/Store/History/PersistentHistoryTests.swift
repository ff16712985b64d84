import Foundation
@testable import ObjectGraph
import Synchronization
import Testing
@testable import DataStackStores

/// Persistent history in Core Data's tables: what a save records, how it reads
/// back, purging, and the errors of bad tokens and stores without history.
@Suite struct PersistentHistoryTests {
    static func tracking() -> StoreOptions {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        return options
    }

    /// A store with tracking at `url` (a new one unless the file exists).
    static func open(_ url: URL, model: ManagedObjectModel = TestModel.make(),
                     options: StoreOptions = tracking()) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        return coordinator
    }

    static func context(_ coordinator: PersistentStoreCoordinator, author: String? = "importer",
                        name: String? = "ImportContext") -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.transactionAuthor = author
        context.name = name
        return context
    }

    /// Three saves: two companies and an update inserted; the name and
    /// employees of one company changed; the stock update deleted.
    static func threeSaves(_ context: ManagedObjectContext) throws -> (acme: ObjectID, beta: ObjectID, update: ObjectID) {
        try context.performAndWait {
            let acme = Company(context: context)
            acme.symbol = "ACME"
            let beta = Company(context: context)
            beta.symbol = "BETA"
            let update = StockUpdate(context: context)
            update.price = 10
            update.company = acme
            try context.save()
            acme.name = "Acme Corp."
            acme.employees = 12
            try context.save()
            context.delete(update)
            try context.save()
            return (acme.objectID, beta.objectID, update.objectID)
        }
    }

    /// The history tables and indexes of a new store are, statement for
    /// statement, those of stores Apple's Core Data wrote: the CoreDataPlus
    /// test store (framework 1344), the macOS 26 Notes store (1513), and, with
    /// four tombstone columns, the Screen Time store (a model with four
    /// preserved attributes).
    @Test(arguments: [("coredataplus-samplemodel2-programmatic/stores/SampleModel2_V1.sqlite", 0),
                      ("apple-notes-notestore/stores/NoteStore-macOS-26-Tahoe.sqlite", 0),
                      ("plaso-apple-stores/stores/ios-RMAdminStore-Local.sqlite", 4)])
    func aNewStoreHasApplesHistoryTablesAndIndexes(_ fixture: String, tombstones: Int) throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        for attribute in company.properties.compactMap({ $0 as? AttributeDescription }).prefix(tombstones) {
            attribute.preservesValueInHistoryOnDeletion = true
        }
        _ = try Self.open(url, model: model)
        let workspace = try FixtureWorkspace()
        let apple = try SQLiteReference(try workspace.copyStore(fixture))
        let ours = try SQLiteReference(url)
        let ddl = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE tbl_name IN ('ACHANGE', 'ATRANSACTION', 'ATRANSACTIONSTRING') ORDER BY name"
        #expect(try ours.rows(ddl) == apple.rows(ddl))
        #expect(try ours.rows(ddl).count == 11)
        let keys = "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY WHERE Z_ENT > 16000 ORDER BY Z_ENT"
        #expect(try ours.rows(keys) == apple.rows(keys))
    }

    @Test func savesWriteHistoryAsSQLiteShowsItAndTheAPIReadsItBack() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try Self.open(url)
        let before = Date()
        let ids = try Self.threeSaves(Self.context(coordinator))
        let raw = try SQLiteReference(url)

        // One interned string per distinct name: on Linux the bundle ID is the process name.
        let process = ProcessInfo.processInfo.processName
        #expect(try raw.rows("SELECT ZNAME FROM ATRANSACTIONSTRING ORDER BY Z_PK") == [["importer"], [process], ["ImportContext"]])
        #expect(try raw.rows("SELECT Z_PK, Z_ENT, Z_OPT, ZAUTHORTS, ZBUNDLEIDTS, ZCONTEXTNAMETS, ZPROCESSIDTS, ZAUTHOR, ZQUERYGEN FROM ATRANSACTION ORDER BY Z_PK")
                == (1...3).map { [String($0), "16002", nil, "1", "2", "3", "2", nil, nil] })
        #expect(try raw.rows("SELECT Z_ENT, Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT > 16000 ORDER BY Z_ENT")
                == [["16001", "6"], ["16002", "3"], ["16003", "3"]])
        // Company = 1, StockUpdate = 2. Company's ZCOLUMNS slots: active, employees,
        // founded, name, symbol, updates → employees and name are 0x40 | 0x10;
        // deleting the stock update changes ACME's `updates` (0x04), as Core Data
        // records a to-many membership change on the owner.
        let changeRows = try raw.rows("SELECT Z_PK, Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, nullif(hex(ZCOLUMNS), '') FROM ACHANGE ORDER BY Z_PK")
        let acme = String(try #require(ids.acme.primaryKey))
        let beta = String(try #require(ids.beta.primaryKey))
        // The inserts come in the context's order; keys and rows by object.
        #expect(Set(changeRows.prefix(3).map { Array($0.dropFirst()) }) == [
            ["16001", "0", "1", acme, "1", nil], ["16001", "0", "1", beta, "1", nil], ["16001", "0", "2", "1", "1", nil],
        ])
        #expect(Array(changeRows.dropFirst(3)) == [
            ["4", "16001", "1", "1", acme, "2", "50"],
            ["5", "16001", "1", "1", acme, "3", "04"],
            ["6", "16001", "2", "2", "1", "3", nil],
        ])

        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.map(\.transactionNumber) == [1, 2, 3])
        let stamps = try raw.rows("SELECT ZTIMESTAMP FROM ATRANSACTION ORDER BY Z_PK").map { Double($0[0] ?? "") }
        #expect(history.map(\.timestamp.timeIntervalSinceReferenceDate) == stamps)
        #expect(history.allSatisfy { $0.timestamp >= before.addingTimeInterval(-1) && $0.timestamp <= Date() })
        #expect(history.allSatisfy { $0.author == "importer" && $0.contextName == "ImportContext" && $0.processID == process && $0.bundleID == process })
        #expect(history[0].changes?.map(\.changeType) == [.insert, .insert, .insert])
        #expect(history[0].contextDidSave() == ContextDidSave(insertedObjectIDs: [ids.acme, ids.beta, ids.update]))
        #expect(history[1].changes == [PersistentHistoryChange(changeID: 4, changedObjectID: ids.acme, changeType: .update,
                                                                 updatedProperties: ["name", "employees"], transactionNumber: 2)])
        #expect(history[2].contextDidSave() == ContextDidSave(updatedObjectIDs: [ids.acme], deletedObjectIDs: [ids.update]))
        #expect(history[2].changes?.first?.updatedProperties == ["updates"])
        #expect(history[2].changes?.last?.updatedProperties == nil && history[2].changes?.last?.tombstone == nil)
        #expect(try coordinator.currentPersistentHistoryToken() == history[2].token)

        // Bounds are exclusive; a limit keeps the oldest; a date bound; a filter on author and name.
        #expect(try coordinator.fetchHistory(.fetchHistory(after: history[0].token)).map(\.transactionNumber) == [2, 3])
        var limited = PersistentHistoryRequest.fetchHistory(after: nil)
        limited.fetchLimit = 2
        limited.includesChanges = false
        #expect(try coordinator.fetchHistory(limited).map(\.transactionNumber) == [1, 2])
        #expect(try coordinator.fetchHistory(limited).allSatisfy { $0.changes == nil })
        #expect(try coordinator.fetchHistory(.fetchHistory(after: history[1].timestamp)).map(\.transactionNumber) == [3])
        var others = PersistentHistoryRequest.fetchHistory(after: nil)
        others.filter = .not(.author("importer"))
        #expect(try coordinator.fetchHistory(others).isEmpty)
        others.filter = .and([.author("importer"), .contextName("ImportContext")])
        #expect(try coordinator.fetchHistory(others).count == 3)
    }

    @Test func aSecondAuthorAddsOnlyItsNewStringsAndAnUnnamedContextRecordsNulls() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try Self.open(url)
        _ = try Self.threeSaves(Self.context(coordinator))
        let viewer = Self.context(coordinator, author: nil, name: nil)
        try viewer.performAndWait {
            Company(context: viewer).symbol = "GAMMA"
            try viewer.save()
        }
        let raw = try SQLiteReference(url)
        #expect(try raw.rows("SELECT count(*) FROM ATRANSACTIONSTRING") == [["3"]])
        #expect(try raw.rows("SELECT ZAUTHORTS, ZCONTEXTNAMETS, ZBUNDLEIDTS, ZPROCESSIDTS FROM ATRANSACTION WHERE Z_PK = 4") == [[nil, nil, "2", "2"]])
        let last = try #require(try coordinator.fetchHistory(.fetchHistory(after: nil)).last)
        #expect(last.author == nil && last.contextName == nil)
    }

    @Test func deletedObjectsKeepTheirPreservedAttributesAsTombstones() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        for name in ["symbol", "founded"] {
            (company.properties.first { $0.name == name } as? AttributeDescription)?.preservesValueInHistoryOnDeletion = true
        }
        let coordinator = try Self.open(url, model: model)
        let founded = Date(timeIntervalSinceReferenceDate: 1000)
        let context = Self.context(coordinator)
        try context.performAndWait {
            let acme = Company(context: context)
            acme.symbol = "ACME"
            acme.founded = founded
            try context.save()
            context.delete(acme)
            try context.save()
        }
        let raw = try SQLiteReference(url)
        #expect(try raw.rows("SELECT name FROM pragma_table_info('ACHANGE') WHERE name LIKE 'ZTOMBSTONE%'") == [["ZTOMBSTONE0"], ["ZTOMBSTONE1"]])
        // Slot order: founded before symbol.
        #expect(try raw.rows("SELECT ZCHANGETYPE, ZTOMBSTONE0, ZTOMBSTONE1 FROM ACHANGE ORDER BY Z_PK") == [["0", nil, nil], ["2", "1000.0", "ACME"]])
        let deletion = try #require(try coordinator.fetchHistory(.fetchHistory(after: nil)).last?.changes?.first)
        #expect(deletion.tombstone == ["symbol": .string("ACME"), "founded": .date(founded)])
    }

    @Test func aSaveThatFailsInTheStoreWritesNoHistory() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try Self.open(url)
        let ids = try Self.threeSaves(Self.context(coordinator))
        let stale = Self.context(coordinator)
        try stale.performAndWait {
            let acme = try stale.existingObject(with: ids.acme) as? Company
            _ = acme?.symbol
        }
        // Another coordinator moves the row on: the stale context's save conflicts in the store.
        let other = try Self.open(url)
        let otherContext = Self.context(other, author: "other")
        try otherContext.performAndWait {
            (try otherContext.existingObject(with: ids.acme) as? Company)?.employees = 99
            try otherContext.save()
        }
        let raw = try SQLiteReference(url)
        let rows = "SELECT (SELECT count(*) FROM ATRANSACTION), (SELECT count(*) FROM ACHANGE), (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = 16002)"
        let before = try raw.rows(rows)
        #expect(before == [["4", "7", "4"]])
        try stale.performAndWait {
            (try stale.existingObject(with: ids.acme) as? Company)?.employees = 1
            Company(context: stale).symbol = "NEW"
            #expect(throws: ObjectGraphError.self) { try stale.save() }
        }
        #expect(try raw.rows(rows) == before)
    }

    @Test func purgeDeletesExactlyTheTransactionsBeforeTheToken() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try Self.open(url)
        _ = try Self.threeSaves(Self.context(coordinator))
        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(try coordinator.deleteHistory(.deleteHistory(before: history[0].token)) == 0)
        #expect(try coordinator.deleteHistory(.deleteHistory(before: history[2].token)) == 2)
        let raw = try SQLiteReference(url)
        #expect(try raw.rows("SELECT Z_PK FROM ATRANSACTION") == [["3"]])
        #expect(try raw.rows("SELECT Z_PK, ZTRANSACTIONID FROM ACHANGE ORDER BY Z_PK") == [["5", "3"], ["6", "3"]])
        #expect(try raw.rows("SELECT count(*) FROM ATRANSACTIONSTRING") == [["3"]], "strings stay, as Core Data leaves them")
        #expect(try coordinator.fetchHistory(.fetchHistory(after: history[1].token)).map(\.transactionNumber) == [3])

        let expired = #expect(throws: PersistentStoreError.self) {
            try coordinator.fetchHistory(.fetchHistory(after: history[0].token))
        }
        #expect(expired?.code == .historyExpired)
        #expect(expired?.message.contains("refetch") == true)
        // History deleted up to the latest leaves nothing to read after the last token.
        #expect(try coordinator.deleteHistory(.deleteHistory(before: Date.distantFuture)) == 1)
        #expect(try coordinator.fetchHistory(.fetchHistory(after: history[2].token)).isEmpty)
        #expect(throws: PersistentStoreError.self) { try coordinator.fetchHistory(.fetchHistory(after: history[1].token)) }
    }

    @Test func badTokensAndStoresWithoutHistoryThrowSayingWhat() throws {
        let directory = TemporaryDirectory()
        let coordinator = try Self.open(directory.file("A.sqlite"))
        let otherStore = try Self.open(directory.file("B.sqlite"))
        _ = try Self.threeSaves(Self.context(otherStore))
        let foreign = try #require(try otherStore.currentPersistentHistoryToken())

        func code(_ body: () throws -> Void) -> PersistentStoreError.Code? {
            do { try body() } catch let error as PersistentStoreError { return error.code } catch { return nil }
            return nil
        }
        #expect(code { _ = try coordinator.fetchHistory(.fetchHistory(after: foreign)) } == .historyTokenMismatch)
        #expect(code { _ = try coordinator.deleteHistory(.deleteHistory(before: foreign)) } == .historyTokenMismatch)
        let own = try #require(try coordinator.currentPersistentHistoryToken())
        #expect(own.transactionNumber == 0)
        let future = PersistentHistoryToken(storeIdentifier: own.storeIdentifier, transactionNumber: 7)
        #expect(code { _ = try coordinator.fetchHistory(.fetchHistory(after: future)) } == .historyTokenMismatch)

        let untracked = try Self.open(directory.file("C.sqlite"), options: StoreOptions())
        #expect(try untracked.currentPersistentHistoryToken() == nil)
        #expect(code { _ = try untracked.fetchHistory(.fetchHistory(after: nil)) } == .historyNotTracked)
        #expect(code { _ = try untracked.deleteHistory(.deleteHistory(before: Date())) } == .historyNotTracked)
        let memory = try TestStack(type: .inMemory)
        #expect(code { _ = try memory.coordinator.fetchHistory(.fetchHistory(after: nil)) } == .historyNotTracked)

        // A request of one kind given to the other call is refused, and deletes nothing.
        _ = try Self.threeSaves(Self.context(coordinator))
        let latest = try #require(try coordinator.currentPersistentHistoryToken())
        #expect(code { _ = try coordinator.deleteHistory(.fetchHistory(after: latest)) } == .invalidHistoryRequest)
        #expect(code { _ = try coordinator.fetchHistory(.deleteHistory(before: latest)) } == .invalidHistoryRequest)
        #expect(try coordinator.fetchHistory(.fetchHistory(after: nil)).count == 3)
    }

    @Test func tokensSurviveCodingAndOrderByTransaction() throws {
        let token = PersistentHistoryToken(storeIdentifier: "S", transactionNumber: 4)
        let decoded = try JSONDecoder().decode(PersistentHistoryToken.self, from: JSONEncoder().encode(token))
        #expect(decoded == token)
        #expect(token < PersistentHistoryToken(storeIdentifier: "S", transactionNumber: 5))
        #expect(token.description == "{ \"S\" = 4; }")
    }

    @Test func aStoreWithHistoryOpenedWithoutTrackingRefusesSavesUntilItsHistoryIsDeleted() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        do {
            let coordinator = try Self.open(url)
            _ = try Self.threeSaves(Self.context(coordinator))
        }
        let untracked = try Self.open(url, options: StoreOptions())
        let context = Self.context(untracked)
        let error = context.performAndWait { () -> PersistentStoreError? in
            Company(context: context).symbol = "NOPE"
            do { try context.save() } catch let error as PersistentStoreError { return error } catch { return nil }
            return nil
        }
        #expect(error?.code == .readOnly)
        #expect(error?.message.contains("persistentHistoryTracking") == true)

        let tracked = try Self.open(url)
        #expect(try tracked.deleteHistory(.deleteHistory(before: Date.distantFuture)) == 3)
        let reopened = try Self.open(url, options: StoreOptions())
        let writer = Self.context(reopened)
        try writer.performAndWait {
            Company(context: writer).symbol = "OK"
            try writer.save()
        }
    }

    /// History tables in neither of Core Data's layouts (the older one is
    /// ACHANGE and ATRANSACTION alone) cannot be read whole: opened with
    /// tracking, the store is refused, saying what is missing, rather than read
    /// in part or added to.
    @Test func historyTablesInNeitherLayoutAreRefusedSayingWhatIsMissing() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        _ = try Self.open(url)
        try RawStore.execute(url, "DROP TABLE ATRANSACTION")
        let error = #expect(throws: PersistentStoreError.self) { try Self.open(url) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains("has ACHANGE, ATRANSACTIONSTRING but not ATRANSACTION") == true)
        #expect(try SQLiteReference(url).rows("SELECT count(*) FROM sqlite_master WHERE name = 'ATRANSACTION'") == [["0"]])
    }

    @Test func trackingTurnedOnForAnExistingStoreAddsTheTables() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        do {
            let plain = try Self.open(url, options: StoreOptions())
            let context = Self.context(plain)
            try context.performAndWait {
                Company(context: context).symbol = "OLD"
                try context.save()
            }
        }
        #expect(try SQLiteReference(url).rows("SELECT count(*) FROM sqlite_master WHERE name = 'ATRANSACTION'") == [["0"]])
        let coordinator = try Self.open(url)
        #expect(try coordinator.fetchHistory(.fetchHistory(after: nil)).isEmpty)
        _ = try Self.threeSaves(Self.context(coordinator))
        #expect(try coordinator.fetchHistory(.fetchHistory(after: nil)).count == 3)
    }
}

/// What a save tells about its history transaction, and a filtered fetch
/// reading the changes of the transactions it keeps and no others.
@Suite struct SaveHistoryTokenTests {
    /// Saves `count` new companies and returns the did-save payload.
    static func save(_ count: Int, in context: ManagedObjectContext) throws -> ContextDidSave {
        let saves = Mutex<[ContextDidSave]>([])
        let observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context,
                                                              queue: nil) { note in
            if let save = try? ContextDidSave(note) { saves.withLock { $0.append(save) } }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try context.performAndWait {
            for index in 0..<count { Company(context: context).symbol = "C\(index)" }
            try context.save()
        }
        return try #require(saves.withLock { $0.first })
    }

    @Test func eachSaveTellsItsTransactionAndAFilteredFetchReadsOnlyItsChanges() throws {
        let directory = TemporaryDirectory()
        let coordinator = try PersistentHistoryTests.open(directory.file("Tokens.sqlite"))
        let a = PersistentHistoryTests.context(coordinator, author: "a")
        let b = PersistentHistoryTests.context(coordinator, author: "b")
        let saves = [try Self.save(2, in: a), try Self.save(300, in: b), try Self.save(1, in: a)]
        #expect(saves.map { $0.historyTokens.map(\.transactionNumber) } == [[1], [2], [3]])
        #expect(saves.last?.historyTokens.first == (try coordinator.currentPersistentHistoryToken()))

        var request = PersistentHistoryRequest.fetchHistory(after: nil)
        request.filter = .author("a")
        let kept = try coordinator.fetchHistory(request)
        #expect(kept.map(\.transactionNumber) == [1, 3])
        #expect(kept.map { Set(($0.changes ?? []).map(\.changedObjectID)) } == [saves[0].insertedObjectIDs, saves[2].insertedObjectIDs])
        request.filter = .author("b")
        #expect(try coordinator.fetchHistory(request).first?.changes?.count == 300)
    }

    @Test func savesWithoutATrackedStoreTellNoTransaction() throws {
        let directory = TemporaryDirectory()
        let untracked = try PersistentHistoryTests.open(directory.file("Untracked.sqlite"), options: StoreOptions())
        #expect(try Self.save(1, in: PersistentHistoryTests.context(untracked)).historyTokens.isEmpty)

        let tracked = try PersistentHistoryTests.open(directory.file("Tracked.sqlite"))
        let parent = PersistentHistoryTests.context(tracked)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        #expect(try Self.save(1, in: child).historyTokens.isEmpty)
        #expect(try Self.save(0, in: parent).historyTokens.map(\.transactionNumber) == [1])
    }
}
