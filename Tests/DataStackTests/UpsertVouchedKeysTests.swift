import Foundation
import Testing
@testable import DataStack

/// What an upsert of distinct keys leaves out since issue #36's fourth round
/// (second pass), and that what it leaves out changes nothing: the keys told
/// apart by a hash of their bytes (only ASCII strings and integers: strings
/// Swift holds equal may differ in bytes), the rows matched by position, and
/// the save's uniqueness check counting the objects the upsert vouched for
/// rather than grouping them — unless the body changed a key or made another
/// object of the constraint, when every object is grouped as before.
@Suite struct UpsertVouchedKeysTests {
    typealias Quote = UpsertImportTests.Quote

    static func stack(_ directory: StackDirectory) async throws -> StackManager {
        try await UpsertImportTests.stack(directory, uniqueSymbols: true)
    }

    /// The rows' symbols and prices, each row once (not merged by Swift's string equality).
    static func rows(_ stack: StackManager) async throws -> [(symbol: String, price: Double)] {
        let context = stack.importerContext()
        return try await context.perform {
            try context.fetch(FetchRequest<Ticker>(entityName: "Ticker")).map { ($0.symbol, $0.price) }
                .sorted { Array($0.symbol.utf8).lexicographicallyPrecedes($1.symbol.utf8) }
        }
    }

    @Test func keysEqualInSwiftThoughTheirBytesDifferShareOneObject() async throws {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        // KELVIN SIGN is canonically equivalent to "K": one key, as a set of the keys says.
        let quotes = [Quote(symbol: "K", price: 1), Quote(symbol: "\u{212A}", price: 2), Quote(symbol: "L", price: 3)]
        let progress = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        #expect(progress.insertedObjects == 2)
        let rows = try await Self.rows(stack)
        #expect(rows.map(\.symbol) == ["K", "L"] && rows.map(\.price) == [2, 3])
    }

    /// Stored and new keys interleaved, the stored ones out of the rows'
    /// order; in SQLite (the join returns rows in the list's order, matched by
    /// position) and in memory (a store with an order of its own: the rows are
    /// matched to their keys by value instead), with the same objects found.
    @Test(arguments: [false, true])
    func distinctKeysFindTheirRowsWhereverTheyAreInTheChunk(inMemory: Bool) async throws {
        let directory = StackDirectory()
        let stack: StackManager
        if inMemory {
            stack = StackManager()
            try await stack.setup(model: UpsertImportTests.model(uniqueSymbols: true), storeType: .inMemory)
        } else {
            stack = try await Self.stack(directory)
        }
        _ = try await importTickers(stack, count: 60)   // T0 … T59, price = index
        let quotes = (0..<80).reversed().map { Quote(symbol: $0.isMultiple(of: 2) ? "T\($0)" : "N\($0)", price: 1000 + Double($0)) }
        let progress = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, _ in
            ticker.price = quote.price
        }
        #expect(progress.insertedObjects == 50 && progress.updatedObjects == 30)
        let rows = try await Self.rows(stack)
        #expect(rows.count == 60 + 50)
        let prices = Dictionary(rows.map { ($0.symbol, $0.price) }, uniquingKeysWith: { first, _ in first })
        #expect(quotes.allSatisfy { prices[$0.symbol] == $0.price })
        #expect((0..<60).filter { !$0.isMultiple(of: 2) || $0 >= 80 }.allSatisfy { prices["T\($0)"] == Double($0) })
    }

    /// Upserts quotes A (price 1) and B (price 2) into a new store with
    /// `body` run after each quote's price is set; returns the `INSERT`s the
    /// store ran and the rows it then holds.
    private func importAB(_ body: @escaping @Sendable (Quote, Ticker, ManagedObjectContext) -> Void) async throws
        -> (inserts: [String], rows: [(symbol: String, price: Double)]) {
        let directory = StackDirectory()
        let stack = try await Self.stack(directory)
        let sql = StackStatementLog()
        let store = try UpsertSaveShortcutsTests.store(stack)
        store.traceStatements { sql.append($0) }
        defer { store.traceStatements(nil) }
        let quotes = [Quote(symbol: "A", price: 1), Quote(symbol: "B", price: 2)]
        _ = try await stack.performImport(quotes, upserting: Ticker.self, by: "symbol", key: \.symbol) { quote, ticker, context in
            ticker.price = quote.price
            body(quote, ticker, context)
        }
        return (sql.all.filter { $0.hasPrefix("INSERT INTO ZTICKER") }, try await Self.rows(stack))
    }

    /// The body gives one new object another input's key: the check groups
    /// every object, finds the two, and collapses them before the save
    /// writes (one `INSERT`, the newer object's values over the older's).
    @Test func aKeyTheBodyChangesIsCheckedAsBefore() async throws {
        let (inserts, rows) = try await importAB { quote, ticker, _ in
            if quote.symbol == "B" { ticker.symbol = "A" }
        }
        #expect(inserts.count == 1, "\(inserts)")
        #expect(rows.map(\.symbol) == ["A"] && rows.map(\.price) == [2])
    }

    /// The body makes another object of the constraint with a key of the
    /// chunk: the check counts an object the upsert did not vouch for and
    /// groups every object, collapsing the two before the save writes.
    @Test func anotherObjectTheBodyMakesIsCheckedWithTheChunks() async throws {
        let (inserts, rows) = try await importAB { quote, _, context in
            if quote.symbol == "B" {
                let extra = Ticker(context: context)
                extra.symbol = "A"
                extra.price = 7
            }
        }
        #expect(inserts.count == 2, "\(inserts)")
        #expect(rows.map(\.symbol) == ["A", "B"] && rows.map(\.price) == [7, 2])
    }
}
