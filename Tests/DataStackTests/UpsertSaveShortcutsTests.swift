import Foundation
import Synchronization
import Testing
@testable import DataStack

/// What an upsert's save leaves out since issue #36's fourth round, and that
/// what it leaves out changes nothing: the store's uniqueness lookup of keys
/// the chunk's query found in no row (a row another writer saves with one in
/// between is refused by the unique index and settled at save as the check
/// settles it), and in an `UPDATE` the columns the object did not change
/// (with the history's changed columns taken from the context's snapshot).
@Suite struct UpsertSaveShortcutsTests {
    typealias Quote = UpsertImportTests.Quote

    static func stack(_ directory: StackDirectory) async throws -> StackManager {
        try await UpsertImportTests.stack(directory, uniqueSymbols: true)
    }

    static func store(_ stack: StackManager) throws -> SQLiteStore {
        try #require(stack.writerCoordinator.persistentStores.first as? SQLiteStore)
    }

    /// The rows of the file, by symbol: price and name.
    static func rows(_ stack: StackManager) async throws -> [String: (price: Double, name: String?)] {
        let context = stack.importerContext()
        return try await context.perform {
            let tickers = try context.fetch(FetchRequest<Ticker>(entityName: "Ticker"))
            #expect(Set(tickers.map(\.symbol)).count == tickers.count, "one row per symbol")
            return Dictionary(tickers.map { ($0.symbol, (price: $0.price, name: $0.name)) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Saves a ticker through another stack on the same file, as another process would.
    static func saveTicker(_ symbol: String, price: Double, name: String?, through stack: StackManager) throws -> ObjectID {
        let context = stack.importerContext()
        return try context.performAndWait {
            let ticker = Ticker(context: context)
            ticker.symbol = symbol
            ticker.price = price
            ticker.name = name
            try context.save()
            return ticker.objectID
        }
    }

    @Test func keysTheChunksQueryFoundAbsentAreNotLookedUpAgainAtSave() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        _ = try await importTickers(stack, count: 5)   // T0 … T4
        let sql = StackStatementLog()
        let store = try Self.store(stack)
        store.traceStatements { sql.append($0) }
        defer { store.traceStatements(nil) }

        let quotes = (0..<10).map { Quote(symbol: "T\($0)", price: 100 + Double($0)) }   // 5 stored, 5 new
        let progress = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        #expect(progress.insertedObjects == 5 && progress.updatedObjects == 5)
        let pointLookups = sql.selects.filter { $0.hasPrefix("SELECT Z_PK, Z_ENT FROM ZTICKER WHERE ZSYMBOL") }
        #expect(pointLookups.isEmpty, "\(pointLookups)")
        let rows = try await Self.rows(stack)
        #expect(rows.count == 10 && (0..<10).allSatisfy { rows["T\($0)"]?.price == 100 + Double($0) })
    }

    /// Another writer saves one of the chunk's new keys after the chunk's
    /// query found it absent: the unique index refuses the chunk's row, and
    /// the save settles it as the check does — the default policy merges
    /// the chunk's object into the other writer's row; a chunk rebuilt on a
    /// conflict finds that row the second time.
    @Test(arguments: [ImportConflictResolution.mergeByPropertyObjectTrump, .rebuildChunk(attempts: 3)])
    func aKeyAnotherWriterSavesBetweenTheLookupAndTheSaveEndsAsOneRow(onConflict: ImportConflictResolution) async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        let other = try await Self.stack(directory)
        let inserted = Mutex(false)
        let quotes = [Quote(symbol: "N1", price: 1), Quote(symbol: "N2", price: 2)]
        let progress = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol,
                                                     onConflict: onConflict) { quote, ticker, _ in
            ticker.price = quote.price
            // After the chunk's query, before its save: once.
            if !inserted.withLock({ let was = $0; $0 = true; return was }) {
                _ = try Self.saveTicker("N1", price: 50, name: "other", through: other)
            }
        }
        #expect(progress.savedChunks == 1)
        let rows = try await Self.rows(stack)
        #expect(rows.count == 2)
        #expect(rows["N1"]?.price == 1 && rows["N1"]?.name == "other", "the chunk's price over the other writer's row")
        #expect(rows["N2"]?.price == 2)
    }

    /// Each merge policy settles a key another writer saved after the
    /// lookup found it absent just as the check before the save settles a
    /// row it finds: the same rows, and under `.error` the same conflict
    /// (naming the other writer's row).
    @Test(arguments: [MergePolicy.mergeByPropertyObjectTrump, .overwrite, .mergeByPropertyStoreTrump, .rollback, .error])
    func eachPolicySettlesARowTheIndexRefusedAsTheCheckWould(policy: MergePolicy) async throws {
        var outcomes: [String] = []
        for skipsLookup in [false, true] {
            let directory = StackDirectory()
            let stack = try await Self.stack(directory)
            let other = try await Self.stack(directory)
            let context = stack.importerContext()
            context.mergePolicy = policy
            let outcome: String = try await context.perform {
                let ticker = Ticker(context: context)
                ticker.symbol = "N1"
                ticker.price = 1
                if skipsLookup {
                    let entity = try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Ticker"])
                    context.uniqueValuesFoundAbsent = UniqueValuesFoundAbsent(entity: entity, key: "symbol", values: [.string("N1")])
                }
                let otherID = try Self.saveTicker("N1", price: 50, name: "other", through: other)
                do {
                    try context.save()
                    return "saved"
                } catch let error as ObjectGraphError where error.code == .uniquenessConflict {
                    let conflicts = error.uniquenessConflicts
                    #expect(conflicts.count == 1)
                    #expect(conflicts.first?.databaseObjectID == otherID, "the conflict names the other writer's row")
                    #expect(conflicts.first?.objectIDs == [ticker.objectID])
                    return "conflict \(conflicts.first?.constraint ?? [])"
                }
            }
            let rows = try await Self.rows(stack)
            outcomes.append("\(outcome); \(rows.map { "\($0.key) \($0.value.price) \($0.value.name ?? "nil")" }.sorted())")
        }
        let expected = switch policy {
        case .mergeByPropertyObjectTrump, .overwrite: "saved; [\"N1 1.0 other\"]"
        case .mergeByPropertyStoreTrump, .rollback: "saved; [\"N1 50.0 other\"]"
        case .error: "conflict [\"symbol\"]; [\"N1 50.0 other\"]"
        }
        #expect(outcomes == [expected, expected], "without the lookup skipped, then with it")
    }

    @Test func anUpdateWritesOnlyTheColumnsItChangedAndRecordsThemInTheHistory() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        _ = try await importTickers(stack, count: 3)   // T0 … T2, price = index
        let sql = StackStatementLog()
        let store = try Self.store(stack)
        store.traceStatements { sql.append($0) }
        let quotes = (0..<3).map { Quote(symbol: "T\($0)", price: 10 + Double($0)) }
        _ = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
            if quote.symbol == "T2" { ticker.name = "two" }
        }
        store.traceStatements(nil)
        let updates = Set(sql.all.filter { $0.hasPrefix("UPDATE ZTICKER") })
        #expect(updates == ["UPDATE ZTICKER SET Z_OPT = ?, ZPRICE = ? WHERE Z_PK = ? AND Z_OPT = ?",
                            "UPDATE ZTICKER SET Z_OPT = ?, ZPRICE = ?, ZNAME = ? WHERE Z_PK = ? AND Z_OPT = ?"],
                "the unchanged key is not written: \(updates)")
        let rows = try await Self.rows(stack)
        #expect(rows["T0"]?.price == 10 && rows["T1"]?.price == 11 && rows["T2"]?.price == 12 && rows["T2"]?.name == "two")
        #expect(rows["T0"]?.name == nil)

        let history = try stack.writerCoordinator.fetchHistory(.fetchHistory(after: nil))
        let changes = try #require(history.last?.changes)
        let changed: [Set<String>] = changes.map { $0.updatedProperties ?? [] }.sorted { $0.count < $1.count }
        let expected: [Set<String>] = [["price"], ["price"], ["price", "name"]]
        #expect(changed == expected)
    }

    /// A row that another writer changed since the fetch: the save meets the
    /// version conflict, the policy merges, and the merged values are
    /// written with the columns that differ from the row as it is now, which
    /// the history records.
    @Test(arguments: [MergePolicy.mergeByPropertyObjectTrump, .overwrite])
    func anUpdateOfARowThatMovedSinceTheFetchIsMergedAsBefore(policy: MergePolicy) async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        let other = try await Self.stack(directory)
        let ids = try await importTickers(stack, count: 1)   // T0, price 0, no name
        let context = stack.importerContext()
        context.mergePolicy = policy
        try await context.perform {
            let ticker = try #require(try context.existingObject(with: ids[0]) as? Ticker)
            ticker.price = 5
            let otherContext = other.importerContext()
            try otherContext.performAndWait {
                // By its key: the other stack's model is another instance, and so are its IDs' entities.
                let same = try #require(try otherContext.fetch(FetchRequest<Ticker>(entityName: "Ticker")).first { $0.symbol == "T0" })
                same.name = "renamed"
                try otherContext.save()
            }
            try context.save()
        }
        let rows = try await Self.rows(stack)
        #expect(rows["T0"]?.price == 5)
        #expect(rows["T0"]?.name == (policy == .overwrite ? nil : "renamed"))
        let history = try stack.writerCoordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.last?.changes?.first?.updatedProperties == (policy == .overwrite ? ["price", "name"] : ["price"]))
    }
}
