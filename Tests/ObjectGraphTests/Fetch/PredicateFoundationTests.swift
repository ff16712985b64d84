import Foundation
import ObjectGraph
import Testing

extension Company {
    /// Not `@Managed`: a `#Predicate` on it can't be translated.
    var plainConstant: Int { 7 }
}

/// `FetchPredicate` from Foundation's `#Predicate`: the same tree as the format
/// parser's, and a clear error for what has no equivalent.
@Suite struct PredicateFoundationTests {
    let model = TestModel.make()
    var company: EntityDescription { model.entitiesByName["Company"]! }
    var update: EntityDescription { model.entitiesByName["StockUpdate"]! }

    private func expectSame(_ predicate: Predicate<Company>, _ format: String, _ arguments: Any?...,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let typed = try FetchPredicate(predicate, entity: company)
        let parsed = try FetchPredicate(format: format, argumentArray: arguments)
        #expect(typed == parsed, "\(typed) vs \(parsed)", sourceLocation: sourceLocation)
    }

    @Test func conjunctionEqualsTheParsedFormat() throws {
        try expectSame(#Predicate<Company> { $0.employees > 10 && $0.symbol == "X" }, "employees > %@ AND symbol == %@", 10, "X")
        try expectSame(#Predicate<Company> { $0.employees > 1 && $0.employees < 9 && $0.symbol != "X" },
                       "employees > 1 AND employees < 9 AND symbol != 'X'")
    }

    @Test func comparisonsAndLogic() throws {
        try expectSame(#Predicate<Company> { $0.employees <= 3 || $0.employees >= 30 }, "employees <= 3 OR employees >= 30")
        try expectSame(#Predicate<Company> { !($0.symbol == "A") }, "NOT (symbol == 'A')")
        try expectSame(#Predicate<Company> { $0.active }, "active == YES")
        try expectSame(#Predicate<Company> { !$0.active || $0.employees == 0 }, "NOT active == YES OR employees == 0")
        try expectSame(#Predicate<Company> { _ in true }, "TRUEPREDICATE")
        try expectSame(#Predicate<Company> { _ in false }, "FALSEPREDICATE")
    }

    @Test func optionalsAndNil() throws {
        try expectSame(#Predicate<Company> { $0.name == nil }, "name == nil")
        try expectSame(#Predicate<Company> { $0.name != nil }, "name != nil")
        let date = Date(timeIntervalSinceReferenceDate: 1_000)
        try expectSame(#Predicate<Company> { $0.founded! > date }, "founded > %@", date)
        let typed = try FetchPredicate(#Predicate<StockUpdate> { $0.company?.name == "Apple" }, entity: update)
        #expect(typed == (try FetchPredicate(format: "company.name == 'Apple'")))
        let mapped = try FetchPredicate(#Predicate<StockUpdate> { $0.company.flatMap { $0.employees > 3 } ?? false }, entity: update)
        #expect(mapped == (try FetchPredicate(format: "company.employees > 3")))
    }

    @Test func stringsCollectionsAndCounts() throws {
        try expectSame(#Predicate<Company> { $0.symbol.contains("AP") }, "symbol CONTAINS 'AP'")
        try expectSame(#Predicate<Company> { $0.symbol.starts(with: "A") }, "symbol BEGINSWITH 'A'")
        try expectSame(#Predicate<Company> { ["A", "B"].contains($0.symbol) }, "symbol IN {'A', 'B'}")
        try expectSame(#Predicate<Company> { $0.updates.count > 2 }, "updates.@count > 2")
    }

    @Test func unsupportedExpressionsThrowNamingThem() throws {
        let arithmetic = #expect(throws: FetchPredicateError.self) {
            try FetchPredicate(#Predicate<Company> { $0.employees + 1 > 2 }, entity: company)
        }
        #expect(arithmetic?.message.contains("Arithmetic") == true, "\(String(describing: arithmetic))")
        #expect(arithmetic?.format == "#Predicate<Company>")

        let plain = #expect(throws: FetchPredicateError.self) {
            try FetchPredicate(#Predicate<Company> { $0.plainConstant == 7 }, entity: company)
        }
        #expect(plain?.message.contains("not a @Managed property of entity Company") == true, "\(String(describing: plain))")

        let coalesce = #expect(throws: FetchPredicateError.self) {
            try FetchPredicate(#Predicate<Company> { ($0.name ?? "") == "A" }, entity: company)
        }
        #expect(coalesce?.message.contains("??") == true, "\(String(describing: coalesce))")
    }

    @Test(arguments: allStoreTypes)
    func fetchesTheSameRowsAsTheFormat(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["beta", "Alpha", "Gamma", "delta", "Epsilon"])   // employees 10, 20, 30, 40, 50
        let entity = stack.model.entitiesByName["Company"]!
        let context = stack.newContext()
        try context.performAndWait { () throws in
            func symbols(_ predicate: FetchPredicate) throws -> [String] {
                var request = FetchRequest<Company>()
                request.predicate = predicate
                request.sortDescriptors = [FetchSort(key: "symbol")]
                return try context.fetch(request).map(\.symbol)
            }
            let typed = try FetchPredicate(#Predicate<Company> { $0.employees > 15 && !$0.symbol.contains("ta") }, entity: entity)
            let parsed = try FetchPredicate(format: "employees > 15 AND NOT symbol CONTAINS 'ta'")
            #expect(typed == parsed)
            #expect(try symbols(typed) == ["Alpha", "Epsilon", "Gamma"])
            #expect(try symbols(typed) == (try symbols(parsed)))
        }
    }
}
