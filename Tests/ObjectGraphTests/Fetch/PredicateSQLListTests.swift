import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStorage
@testable import DataStackStores

/// Long `IN` lists of integers or strings are bound as one JSON array
/// (`IN (SELECT value FROM json_each(?N))`) rather than a parameter each, which
/// SQLite compiles in quadratic time; they must select exactly what the
/// parameter-per-element form and the in-memory store select.
@Suite struct PredicateSQLListTests {
    private func compile(_ format: String, _ arguments: Any?...) throws -> (sql: String, bindings: [PropertyValue], predicate: FetchPredicate) {
        let predicate = try FetchPredicate(format: format, argumentArray: arguments)
        let compiled = try predicate.sql(for: predicateEntity("Company"), schema: PredicateTestSchema(), rootAlias: "t0")
        return (compiled.where, compiled.bindings, predicate)
    }

    @Test func aLongListOfIntegersOrStringsIsOneJSONParameter() throws {
        let numbers = try compile("price > %@ AND volume IN %@", 1, Array(0..<40))
        #expect(numbers.sql == "(t0.ZPRICE > ?1 AND t0.ZVOLUME IN (SELECT value FROM json_each(?2)))")
        #expect(numbers.bindings == [.integer(1), .string("[" + (0..<40).map(String.init).joined(separator: ",") + "]")])
        #expect(numbers.bindings == numbers.predicate.sqlBindings)

        let names = try compile("name IN %@", (0..<40).map { "n\"\\\n\($0)é" })
        #expect(names.sql == "t0.ZNAME IN (SELECT value FROM json_each(?1))")
        #expect(names.bindings == names.predicate.sqlBindings)
        guard case .string(let json)? = names.bindings.first else {
            Issue.record("no JSON binding: \(names.bindings)")
            return
        }
        let decoded = try JSONDecoder().decode([String].self, from: Data(json.utf8))
        #expect(decoded == (0..<40).map { "n\"\\\n\($0)é" })
    }

    @Test func shortMixedOrFoldedListsKeepAParameterEach() throws {
        #expect(try compile("volume IN %@", Array(0..<31)).bindings.count == 31)
        #expect(try compile("volume IN %@", Array(0..<39).map { $0 as Any } + ["x"]).bindings.count == 40)
        #expect(try compile("price IN %@", (0..<40).map(Double.init)).bindings.count == 40)
        #expect(try compile("name IN[c] %@", (0..<40).map(String.init)).bindings.count == 40)
        // SQLite's JSON ends a string at `\u0000`: "a\0b" would match "a".
        #expect(try compile("name IN %@", (0..<40).map { "n\($0)\u{0}x" }).bindings.count == 40)
        let plain = try compile("name IN %@", (0..<40).map { "n\($0)" } + ["tab\there"])
        #expect(plain.bindings.count == 1, "other control characters are escaped: still one JSON parameter")
        // Text compared with integers: affinity switched off, as for a short list.
        #expect(try compile("name IN %@", Array(0..<40)).sql == "+t0.ZNAME IN (SELECT value FROM json_each(?1))")
    }

    @Test(arguments: allStoreTypes)
    func aLongListSelectsWhatTheStoresAgreeOn(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let odd = ["it's", "back\\slash", "new\nline", "naïve", "🙂", "\"quoted\"", "7"]
        try context.performAndWait {
            for (index, symbol) in ((0..<200).map { "L\($0)" } + odd).enumerated() {
                let listing = Listing(context: context)
                listing.symbol = symbol
                listing.price = Double(index)
            }
            for number in 0..<100 {
                let seat = Seat(context: context)
                seat.row = "A"
                seat.number = number
            }
            try context.save()
        }
        let reader = graph.context()
        let wanted = (0..<200).filter { $0 % 3 == 0 }.map { "L\($0)" } + odd + ["absent", "L999"]
        let symbols = try reader.performAndWait {
            try reader.fetch(FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "symbol IN %@", wanted)))
                .map(\.symbol)
        }
        #expect(Set(symbols) == Set(wanted).subtracting(["absent", "L999"]))
        #expect(symbols.count == 67 + odd.count)

        let even = Array(stride(from: 0, to: 200, by: 2))
        let numbers = try reader.performAndWait {
            try reader.fetch(FetchRequest<Seat>(entityName: "Seat", predicate: try FetchPredicate(format: "number IN %@", even))).map(\.number)
        }
        #expect(Set(numbers) == Set(stride(from: 0, to: 100, by: 2)))
        // Integers against text: no symbol equals a number, in either store ("7" is text).
        let crossed = try reader.performAndWait {
            try reader.count(for: FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "symbol IN %@", Array(0..<40))))
        }
        #expect(crossed == 0)
    }
}
