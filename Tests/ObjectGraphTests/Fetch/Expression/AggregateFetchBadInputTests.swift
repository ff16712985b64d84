import Foundation
import ObjectGraph
import Testing

/// Requests Core Data refuses: each throws a ``FetchExpressionError`` naming
/// the part of the request, on both stores, before any store runs it.
@Suite struct AggregateFetchBadInputTests {
    typealias Code = FetchExpressionError.Code

    func expectError(_ code: Code, at location: String, mentioning text: String, type: StoreType,
                     sourceLocation: SourceLocation = #_sourceLocation,
                     _ configure: (inout FetchRequest<[String: Any]>) throws -> Void) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A", "B"])
        var request = FetchRequest<[String: Any]>(entityName: "StockUpdate")
        request.resultType = .dictionary
        try configure(&request)
        let context = stack.newContext()
        let error = context.performAndWait {
            #expect(throws: FetchExpressionError.self, sourceLocation: sourceLocation) { try context.fetch(request) }
        }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.entityName == "StockUpdate", sourceLocation: sourceLocation)
        #expect(error?.location == location, sourceLocation: sourceLocation)
        #expect(error?.description.contains(text) == true, "\(String(describing: error))", sourceLocation: sourceLocation)
    }

    static func total(_ expression: FetchExpression) -> PropertyToFetch {
        .expression(ExpressionDescription(name: "total", expression: expression, resultType: .double))
    }

    @Test(arguments: allStoreTypes)
    func anUnknownKeyPathIsNamed(type: StoreType) throws {
        try expectError(.unknownKeyPath, at: "propertiesToFetch[0] 'total'", mentioning: "prize", type: type) {
            $0.propertiesToFetch = [Self.total(.sum(.keyPath("company.prize")))]
        }
        try expectError(.unknownKeyPath, at: "propertiesToGroupBy[0] 'company.nope'", mentioning: "nope", type: type) {
            $0.propertiesToFetch = [Self.total(.sum(.keyPath("price")))]
            $0.propertiesToGroupBy = ["company.nope"]
        }
    }

    @Test(arguments: allStoreTypes)
    func aToManyKeyPathIsRefused(type: StoreType) throws {
        var request = FetchRequest<[String: Any]>(entityName: "Company")
        request.resultType = .dictionary
        request.propertiesToFetch = [Self.total(.sum(.keyPath("updates.price")))]
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        let error = context.performAndWait {
            #expect(throws: FetchExpressionError.self) { try context.fetch(request) }
        }
        #expect(error?.code == .unknownKeyPath)
        #expect(error?.message.contains("to-many") == true)
    }

    @Test(arguments: allStoreTypes)
    func summingAStringIsRefused(type: StoreType) throws {
        try expectError(.needsNumbers, at: "propertiesToFetch[0] 'total'", mentioning: "company.symbol is string", type: type) {
            $0.propertiesToFetch = [Self.total(.sum(.keyPath("company.symbol")))]
        }
        try expectError(.needsNumbers, at: "propertiesToFetch[0] 'total'", mentioning: "company.symbol", type: type) {
            $0.propertiesToFetch = [Self.total(.keyPath("company.symbol") * 2)]
        }
    }

    @Test(arguments: allStoreTypes)
    func aFetchedPropertyMustBeGroupedOrAggregated(type: StoreType) throws {
        try expectError(.notGrouped, at: "propertiesToFetch[0] 'volume'", mentioning: "volume is neither in propertiesToGroupBy", type: type) {
            $0.propertiesToFetch = ["volume", Self.total(.sum(.keyPath("price")))]
            $0.propertiesToGroupBy = ["company.symbol"]
        }
        try expectError(.notGrouped, at: "propertiesToFetch[0] 'price'", mentioning: "price", type: type) {
            $0.propertiesToFetch = ["price", Self.total(.sum(.keyPath("price")))]
        }
        try expectError(.notGrouped, at: "propertiesToFetch[0] 'total'", mentioning: "inside an aggregate", type: type) {
            $0.propertiesToFetch = [Self.total(.max(.sum(.keyPath("price"))))]
        }
    }

    @Test(arguments: allStoreTypes)
    func havingNeedsGroupingAndFetchedNames(type: StoreType) throws {
        try expectError(.notGrouped, at: "havingPredicate", mentioning: "needs propertiesToGroupBy", type: type) {
            $0.propertiesToFetch = [Self.total(.sum(.keyPath("price")))]
            $0.havingPredicate = try FetchPredicate(format: "$total > 1")
        }
        try expectError(.unknownName, at: "havingPredicate", mentioning: "$sum names no fetched value", type: type) {
            $0.propertiesToFetch = ["company.symbol", Self.total(.sum(.keyPath("price")))]
            $0.propertiesToGroupBy = ["company.symbol"]
            $0.havingPredicate = try FetchPredicate(format: "$sum > 1")
        }
        try expectError(.notGrouped, at: "havingPredicate", mentioning: "volume is not in propertiesToGroupBy", type: type) {
            $0.propertiesToFetch = ["company.symbol", Self.total(.sum(.keyPath("price")))]
            $0.propertiesToGroupBy = ["company.symbol"]
            $0.havingPredicate = try FetchPredicate(format: "volume > 1")
        }
    }

    @Test(arguments: allStoreTypes)
    func sortsNameFetchedValues(type: StoreType) throws {
        try expectError(.unknownName, at: "sortDescriptors[0] 'price'", mentioning: "sorts by the names", type: type) {
            $0.propertiesToFetch = ["company.symbol", Self.total(.sum(.keyPath("price")))]
            $0.propertiesToGroupBy = ["company.symbol"]
            $0.sortDescriptors = [FetchSort(key: "price")]
        }
        try expectError(.unknownName, at: "propertiesToFetch[1] 'total'", mentioning: "already has this name", type: type) {
            $0.propertiesToFetch = [Self.total(.sum(.keyPath("price"))), Self.total(.max(.keyPath("price")))]
        }
    }

    @Test(arguments: allStoreTypes)
    func expressionsNeedDictionaryResults(type: StoreType) throws {
        let stack = try TestStack(type: type)
        var request = FetchRequest<StockUpdate>()
        request.propertiesToFetch = [Self.total(.sum(.keyPath("price")))]
        let context = stack.newContext()
        let error = context.performAndWait {
            #expect(throws: FetchExpressionError.self) { try context.fetch(request) }
        }
        #expect(error?.code == .needsDictionaryResults)
        #expect(error?.location == "propertiesToFetch")

        request.propertiesToFetch = nil
        request.propertiesToGroupBy = ["volume"]
        let grouped = context.performAndWait {
            #expect(throws: FetchExpressionError.self) { try context.fetch(request) }
        }
        #expect(grouped?.location == "propertiesToGroupBy")
    }
}
