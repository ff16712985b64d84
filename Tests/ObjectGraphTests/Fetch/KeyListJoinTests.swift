@_spi(StoreImplementation) @testable import DataStackStorage
@_spi(StoreImplementation) @testable import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// A fetch whose predicate is only `attribute IN {long list}`, the attribute
/// leading an index, reads the list first and seeks each key
/// (`FROM json_each(?1) kl CROSS JOIN …`, `SelectQuery+KeyList.swift`) rather
/// than building SQLite's ephemeral index of the list: it must find exactly
/// the rows the `IN` form finds, once each.
@Suite struct KeyListJoinTests {
    private let model = GraphTestModel.make()

    private func sql(_ entity: String, _ format: String, _ arguments: Any..., dialect: any SQLDialect = SQLiteDialect()) throws -> StoreLayout.Query {
        let fetch = StoreFetch(entity: model.entitiesByName[entity]!, predicate: try FetchPredicate(format: format, argumentArray: arguments),
                               sortDescriptors: [], fetchLimit: 0, fetchOffset: 0, includesSubentities: true,
                               resultType: .managedObject, propertiesToFetch: nil, returnsDistinctResults: false)
        return try StoreLayout(model: model, configurationName: nil, dialect: dialect).query(for: fetch)
    }

    @Test func aLongListOnAnIndexedAttributeDrivesTheQuery() throws {
        let symbols = (0..<40).map { "S\($0)" }
        let joined = try sql("Listing", "symbol IN %@", symbols)
        #expect(joined.sql.contains("FROM json_each(?1) kl CROSS JOIN ZLISTING t0 WHERE t0.ZSYMBOL = kl.value"), "\(joined.sql)")
        #expect(joined.bindings == [.text("[" + symbols.map { "\"\($0)\"" }.joined(separator: ",") + "]")])
        // A subentity's fetch keeps its Z_ENT test beside the join.
        let cars = try sql("Car", "plate IN %@", symbols)
        #expect(cars.sql.contains("CROSS JOIN ZVEHICLE t0 WHERE t0.Z_ENT = "), "\(cars.sql)")
    }

    @Test func otherListsKeepIN() throws {
        let symbols = (0..<40).map { "S\($0)" }
        // Repeats: the join would return a row once per repeat.
        #expect(try sql("Listing", "symbol IN %@", symbols + ["S3"]).sql.contains("IN (SELECT value FROM json_each(?1))"))
        // Strings Swift holds equal but SQLite does not (composed and decomposed é, other bytes): distinct.
        #expect(try sql("Listing", "symbol IN %@", symbols + ["caf\u{E9}", "cafe\u{301}"]).sql.contains("CROSS JOIN"))
        // No index on the column: each key would scan the table.
        #expect(try sql("Listing", "name IN %@", symbols).sql.contains("IN (SELECT"))
        // Not the attribute's family (integers against text), or a short list, or more than the list.
        #expect(try sql("Listing", "symbol IN %@", Array(0..<40)).sql.contains("IN (SELECT"))
        #expect(!(try sql("Listing", "symbol IN %@", Array(symbols.prefix(5))).sql.contains("json_each")))
        #expect(try sql("Listing", "symbol IN %@ AND price > 1", symbols).sql.contains("IN (SELECT"))
        #expect(try sql("Listing", "NOT symbol IN %@", symbols).sql.contains("IN (SELECT"))
        // A dialect without a table of a JSON array's elements.
        #expect(try sql("Listing", "symbol IN %@", symbols, dialect: DefaultSpellingsDialect()).sql.contains("IN (SELECT"))
    }

    @Test(arguments: allStoreTypes)
    func theJoinFindsWhatINFinds(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let odd = ["it's", "back\\slash", "new\nline", "naïve", "🙂", "\"quoted\"", "7", "007", "1.0"]
        try context.performAndWait {
            for (index, symbol) in ((0..<200).map { "L\($0)" } + odd).enumerated() {
                let listing = Listing(context: context)
                listing.symbol = symbol
                listing.price = Double(index)
            }
            for (index, plate) in (0..<60).map({ "P\($0)" }).enumerated() {
                let vehicle: Vehicle = index.isMultiple(of: 2) ? Car(context: context) : Truck(context: context)
                vehicle.plate = plate
            }
            try context.save()
        }
        let reader = graph.context()
        let wanted = (0..<200).filter { $0 % 3 == 0 }.map { "L\($0)" } + odd + ["absent", "L999", "7.0", "1"]
        let predicate = try FetchPredicate(format: "symbol IN %@", wanted)
        try reader.performAndWait {
            let symbols = try reader.fetch(FetchRequest<Listing>(entityName: "Listing", predicate: predicate)).map(\.symbol)
            #expect(symbols.count == 67 + odd.count)
            #expect(Set(symbols) == Set(wanted).subtracting(["absent", "L999", "7.0", "1"]))

            // Sorted, limited, offset, counted: as before.
            var sorted = FetchRequest<Listing>(entityName: "Listing", predicate: predicate)
            sorted.sortDescriptors = [FetchSort(key: "price", ascending: false)]
            sorted.fetchLimit = 5
            sorted.fetchOffset = 2
            #expect(try reader.fetch(sorted).map(\.price) == [206, 205, 204, 203, 202])
            #expect(try reader.count(for: FetchRequest<Listing>(entityName: "Listing", predicate: predicate)) == 67 + odd.count)
            #expect(try reader.count(for: sorted) == 5)

            // A subentity's fetch: its own rows of the shared table only.
            let plates = (0..<80).map { "P\($0)" }
            let cars = try reader.fetch(FetchRequest<Car>(entityName: "Car", predicate: try FetchPredicate(format: "plate IN %@", plates)))
            #expect(Set(cars.map(\.plate)) == Set((0..<60).filter { $0.isMultiple(of: 2) }.map { "P\($0)" }))
            #expect(try reader.count(for: FetchRequest<Vehicle>(entityName: "Vehicle", predicate: try FetchPredicate(format: "plate IN %@", plates))) == 60)
        }
    }
}
