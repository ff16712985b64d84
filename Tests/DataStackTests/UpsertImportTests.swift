import Foundation
import Synchronization
import Testing
@testable import DataStack

/// `performImport(_:upserting:by:key:_:)`: an import that updates what exists,
/// finding it with one query per chunk, and settles racing importers with a
/// uniqueness constraint.
@Suite struct UpsertImportTests {
    struct Quote: Sendable {
        var symbol: String
        var price: Double
    }

    /// The stack tests' model, with `Ticker.symbol` unique when asked.
    static func model(uniqueSymbols: Bool) -> ManagedObjectModel {
        let model = StackTestModel.make()
        if uniqueSymbols { model.entitiesByName["Ticker"]?.uniquenessConstraints = [["symbol"]] }
        return model
    }

    static func stack(_ directory: StackDirectory, uniqueSymbols: Bool = false) async throws -> StackManager {
        let stack = StackManager()
        try await stack.setup(model: model(uniqueSymbols: uniqueSymbols), storeURL: directory.storeURL)
        return stack
    }

    static func tickers(_ stack: StackManager) async throws -> [String: Double] {
        let context = stack.importerContext()
        return try await context.perform {
            let tickers = try context.fetch(FetchRequest<Ticker>(entityName: "Ticker"))
            #expect(Set(tickers.map(\.symbol)).count == tickers.count, "one row per symbol")
            return Dictionary(tickers.map { ($0.symbol, $0.price) }, uniquingKeysWith: { first, _ in first })
        }
    }

    @Test func existingObjectsAreUpdatedAndNewOnesInsertedWithOneQueryPerChunk() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        let existing = try await importTickers(stack, count: 50)   // T0 … T49, price = index
        let store = try #require(stack.writerCoordinator.persistentStores.first as? SQLiteStore)
        let sql = StackStatementLog()
        store.traceStatements { sql.append($0) }
        defer { store.traceStatements(nil) }

        let quotes = (25..<125).map { Quote(symbol: "T\($0)", price: 1_000 + Double($0)) }   // 25 exist, 75 new
        let progress = try await stack.performImport(quotes, chunkSize: 30, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        #expect(progress.savedChunks == 4)
        #expect(progress.insertedObjects == 75 && progress.updatedObjects == 25)
        let lookups = sql.selects.filter { $0.contains("ZSYMBOL IN") }
        #expect(lookups.count == 4, "one lookup per chunk: \(lookups)")

        let tickers = try await Self.tickers(stack)
        #expect(tickers.count == 125)
        for index in 0..<125 {
            #expect(tickers["T\(index)"] == (index < 25 ? Double(index) : 1_000 + Double(index)), "T\(index)")
        }
        // The updated ones are the objects that were there, not replacements.
        let context = stack.importerContext()
        let kept = try await context.perform { try existing.filter { try context.existingObject(with: $0) is Ticker }.count }
        #expect(kept == 50)
    }

    /// A chunk's keys are bound as one JSON array (32 keys or more): keys that
    /// JSON must escape, and keys it carries as they are, all find their rows.
    @Test func keysThatJSONEscapesFindTheirRowsInALongLookup() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory, uniqueSymbols: true)
        let symbols = (0..<40).flatMap { number in
            ["plain\(number)", "quote\"\(number)", "back\\slash\(number)", "tab\t\(number)", "nul\u{0}\(number)", "bell\u{7}\(number)",
             "é\(number)", "e\u{301}x\(number)", "日本\(number)", "🙂\(number)"]
        }
        for round in 0..<2 {
            let quotes = symbols.enumerated().map { Quote(symbol: $0.element, price: Double(round * 1_000 + $0.offset)) }
            let progress = try await stack.performImport(quotes, chunkSize: 100, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
                ticker.price = quote.price
            }
            #expect(round == 0 ? progress.insertedObjects == symbols.count : progress.updatedObjects == symbols.count,
                    "round \(round): \(progress)")
        }
        let tickers = try await Self.tickers(stack)
        #expect(tickers.count == symbols.count)
        for (offset, symbol) in symbols.enumerated() { #expect(tickers[symbol] == Double(1_000 + offset), "\(symbol.debugDescription)") }
    }

    @Test func inputsWithTheSameKeyInAChunkShareOneObject() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        let quotes = [Quote(symbol: "A", price: 1), Quote(symbol: "B", price: 2), Quote(symbol: "A", price: 3)]
        let progress = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        #expect(progress.insertedObjects == 2)
        #expect(try await Self.tickers(stack) == ["A": 3, "B": 2])
    }

    /// Two importers upsert the same new symbols at once; with `symbol` unique
    /// both finish without an error and each symbol has one row.
    @Test func racingImportersEndWithOneRowPerKey() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory, uniqueSymbols: true)
        let quotes = (0..<400).map { Quote(symbol: "R\($0)", price: Double($0)) }
        async let first = stack.performImport(quotes, chunkSize: 50, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        async let second = stack.performImport(quotes.reversed(), chunkSize: 50, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        _ = try await (first, second)
        let tickers = try await Self.tickers(stack)
        #expect(tickers.count == 400)
        #expect(tickers.allSatisfy { $0.value == Double($0.key.dropFirst())! })
    }

    /// Two stacks on one file (as two processes are) both add 1 to each
    /// ticker's price for each of their inputs, with
    /// `onConflict: .rebuildChunk`: a chunk that meets the other's save is
    /// built again at once on the committed rows, and no increment is lost.
    /// The first chunk of one is held, after reading its rows, until the other
    /// saved a chunk, so at least one conflict and rebuild happens; the rest
    /// race freely.
    @Test func racingImportersThatRebuildOnAConflictLoseNoIncrement() async throws {
        let directory = StackDirectory()
        let first = try await Self.stack(directory)
        let second = try await Self.stack(directory)
        _ = try await importTickers(first, count: 5)   // T0 … T4, price = index
        let symbols = (0..<600).map { "T\($0 % 5)" }
        let secondSaved = Signal()
        let calls = Mutex(0)
        async let one = first.performImport(symbols, chunkSize: 10, upserting: Ticker.self, by: "symbol", key: { $0 },
                                            onConflict: .rebuildChunk(attempts: 1_000)) { _, ticker, _ in
            ticker.price += 1
            let call = calls.withLock { $0 += 1; return $0 }
            // The first chunk's rows are read: hold it until the other importer's save committed.
            if call == 10 { secondSaved.waitBlocking(for: "the other importer's first save") }
        }
        async let two = second.performImport(symbols.reversed(), chunkSize: 10, upserting: Ticker.self, by: "symbol", key: { $0 },
                                             onConflict: .rebuildChunk(attempts: 1_000)) { _, ticker, _ in
            ticker.price += 1
        } progress: { _ in secondSaved.fire() }
        let (progressOne, progressTwo) = try await (one, two)
        #expect(progressOne.processedInputs == 600 && progressTwo.processedInputs == 600)
        #expect(calls.withLock { $0 } > 600, "the held chunk met the other's save and was built again")
        let tickers = try await Self.tickers(first)
        #expect(tickers == Dictionary(uniqueKeysWithValues: (0..<5).map { ("T\($0)", Double($0) + 240) }),
                "each ticker got its 120 increments from each importer")
    }

    @Test func aKeyTheModelDoesNotHaveThrowsAndImportsNothing() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        _ = try await importTickers(stack, count: 3)
        let quotes = [Quote(symbol: "T1", price: 9)]
        let unknown = await #expect(throws: StackError.self) {
            try await stack.performImport(quotes, upserting: Ticker.self, by: "ticker", key: \.symbol) { _, _, _ in }
        }
        #expect(unknown?.code == .notInModel && unknown?.message.contains("Ticker has no attribute ticker") == true, "\(String(describing: unknown))")
        // Keys of another type than the attribute's: a new object refuses the key…
        let unmatched = await #expect(throws: (any Error).self) {
            try await stack.performImport([1], upserting: Ticker.self, by: "symbol", key: { $0 }) { _, _, _ in }
        }
        #expect("\(unmatched.map { "\($0)" } ?? "")".contains("Ticker.symbol takes a String, not Int"), "\(String(describing: unmatched))")
        // …and a stored one SQLite matches as a number of another Swift type is
        // refused, not taken for absent (which would insert it again).
        let converted = await #expect(throws: StackError.self) {
            try await stack.performImport([1], upserting: Ticker.self, by: "price", key: { $0 }) { _, _, _ in }
        }
        #expect(converted?.message.contains("Ticker.price holds Double values, not the import's keys of type Int") == true,
                "\(String(describing: converted))")
        #expect(try await Self.tickers(stack) == ["T0": 0, "T1": 1, "T2": 2])

        let notSetUp = await #expect(throws: StackError.self) {
            try await StackManager().performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { _, _, _ in }
        }
        #expect(notSetUp?.code == .notSetUp)
    }

    /// Key-value coding reads every integer attribute as `Int`; an `Int64` key still finds its row.
    @Test func integerKeysOfAnotherWidthFindTheirRows() async throws {
        let directory = StackDirectory()
        let stack = StackManager()
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Counter", properties: [AttributeDescription(name: "number", type: .integer64, isOptional: false)]),
        ])
        try await stack.setup(model: model, storeURL: directory.storeURL)
        for keys in [[Int64(1), 2, 3], [2, 3, 4]] {
            try await stack.performImport(keys, upserting: ManagedObject.self, by: "number", key: { $0 }) { _, _, _ in }
        }
        let context = stack.importerContext()
        let numbers = try await context.perform {
            try context.fetch(FetchRequest<ManagedObject>(entityName: "Counter")).map { try $0.value(forKey: "number") as? Int }
        }
        #expect(numbers.compactMap { $0 }.sorted() == [1, 2, 3, 4])

        // Two entities with one class: which one is meant cannot be told.
        let shared = StackManager()
        let sharedDirectory = StackDirectory()
        try await shared.setup(model: ManagedObjectModel(entities: [
            EntityDescription(name: "A", properties: [AttributeDescription(name: "number", type: .integer64)]),
            EntityDescription(name: "B", properties: [AttributeDescription(name: "number", type: .integer64)]),
        ]), storeURL: sharedDirectory.storeURL)
        let error = await #expect(throws: StackError.self) {
            try await shared.performImport([Int64(1)], upserting: ManagedObject.self, by: "number", key: { $0 }) { _, _, _ in }
        }
        #expect(error?.message.contains("entities A, B all have the class ManagedObject") == true, "\(String(describing: error))")
    }
}
