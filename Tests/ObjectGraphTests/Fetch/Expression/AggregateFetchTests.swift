import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Aggregate and computed dictionary fetches (`ExpressionDescription`,
/// `propertiesToGroupBy`, `havingPredicate`) on both stores. Every expected
/// value is computed here from the seed, never copied from a fetch's output.
@Suite struct AggregateFetchTests {
    /// A company as seeded: symbol, optional name, employees, active.
    struct SeedCompany {
        var symbol: String
        var name: String?
        var employees: Int
        var active: Bool
    }

    /// A price update as seeded; `company` is an index into `companies`, nil for none.
    struct SeedUpdate {
        var company: Int?
        var price: Double
        var volume: Int64
    }

    // Prices are sums of powers of two, so every sum is exact in any order.
    static let companies = [
        SeedCompany(symbol: "A", name: "Alpha", employees: 10, active: true),
        SeedCompany(symbol: "B", name: nil, employees: 20, active: false),
        SeedCompany(symbol: "C", name: "Gamma", employees: 30, active: true),
        SeedCompany(symbol: "D", name: nil, employees: 40, active: false),
    ]
    static let updates = [
        SeedUpdate(company: 0, price: 10.5, volume: 100), SeedUpdate(company: 0, price: 12.25, volume: 200),
        SeedUpdate(company: 0, price: 8, volume: 100), SeedUpdate(company: 1, price: 20, volume: 300),
        SeedUpdate(company: 1, price: 21.5, volume: 300), SeedUpdate(company: 2, price: 5, volume: 100),
        SeedUpdate(company: nil, price: 3, volume: 50),
    ]

    func seeded(_ type: StoreType) throws -> TestStack {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let made = Self.companies.map { seed in
                let company = Company(context: context)
                company.symbol = seed.symbol
                company.name = seed.name
                company.employees = seed.employees
                company.active = seed.active
                return company
            }
            for seed in Self.updates {
                let update = StockUpdate(context: context)
                update.price = seed.price
                update.volume = seed.volume
                update.company = seed.company.map { made[$0] }
            }
            try context.save()
        }
        return stack
    }

    func dictionaries(_ entity: String, _ properties: [PropertyToFetch], groupBy: [String] = [],
                      configure: (inout FetchRequest<[String: Any]>) throws -> Void = { _ in }) throws -> FetchRequest<[String: Any]> {
        var request = FetchRequest<[String: Any]>(entityName: entity)
        request.resultType = .dictionary
        request.propertiesToFetch = properties
        request.propertiesToGroupBy = groupBy
        try configure(&request)
        return request
    }

    static func column(_ name: String, _ expression: FetchExpression, _ type: AttributeType) -> PropertyToFetch {
        .expression(ExpressionDescription(name: name, expression: expression, resultType: type))
    }

    // MARK: - Functions

    @Test(arguments: allStoreTypes)
    func eachFunctionOverAllObjectsGivesOneResult(type: StoreType) throws {
        let stack = try seeded(type)
        let prices = Self.updates.map(\.price)
        let volumes = Self.updates.map(\.volume)
        let request = try dictionaries("StockUpdate", [
            Self.column("sum", .sum(.keyPath("price")), .double),
            Self.column("average", .average(.keyPath("price")), .double),
            Self.column("min", .min(.keyPath("price")), .double),
            Self.column("max", .max(.keyPath("volume")), .integer64),
            Self.column("count", .count(), .integer64),
            Self.column("volumes", .countDistinct(.keyPath("volume")), .integer64),
            Self.column("companies", .countDistinct(.keyPath("company.symbol")), .integer64),
            Self.column("withCompany", .count(.keyPath("company")), .integer64),
        ])
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row["sum"] as? Double == prices.reduce(0, +))
        #expect(row["average"] as? Double == prices.reduce(0, +) / Double(prices.count))
        #expect(row["min"] as? Double == prices.min())
        #expect(row["max"] as? Int == volumes.max().map(Int.init))
        #expect(row["count"] as? Int == Self.updates.count)
        #expect(row["volumes"] as? Int == Set(volumes).count)
        #expect(row["companies"] as? Int == Set(Self.updates.compactMap(\.company)).count)
        #expect(row["withCompany"] as? Int == Self.updates.filter { $0.company != nil }.count)
    }

    @Test(arguments: allStoreTypes)
    func arithmeticIsComputedForEachObject(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("StockUpdate", [
            "price",
            Self.column("doubled", .keyPath("price") * 2 + 1, .double),
            Self.column("quarter", .keyPath("volume") / 4, .double),
            Self.column("perNothing", .keyPath("volume") / 0, .double),
            Self.column("lots", .keyPath("volume") - 50, .integer64),
        ]) { $0.sortDescriptors = [FetchSort(key: "price")] }
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        let sorted = Self.updates.sorted { $0.price < $1.price }
        #expect(rows.map { $0["price"] as? Double } == sorted.map(\.price))
        #expect(rows.map { $0["doubled"] as? Double } == sorted.map { $0.price * 2 + 1 })
        #expect(rows.map { $0["quarter"] as? Double } == sorted.map { Double($0.volume) / 4 })
        #expect(rows.allSatisfy { $0["perNothing"] is NSNull })
        #expect(rows.map { $0["lots"] as? Int } == sorted.map { Int($0.volume) - 50 })

        let distinct = try dictionaries("StockUpdate", [Self.column("lots", .keyPath("volume") - 50, .integer64)]) {
            $0.returnsDistinctResults = true
            $0.sortDescriptors = [FetchSort(key: "lots", ascending: false)]
            $0.fetchOffset = 1
        }
        let lots = try context.performAndWait { try context.fetch(distinct) }
        let volumes: [Int64] = Set(Self.updates.map(\.volume)).sorted(by: >)
        let expected: [Int?] = volumes.dropFirst().map { Int($0) - 50 }
        #expect(lots.map { $0["lots"] as? Int } == expected)
    }

    @Test(arguments: allStoreTypes)
    func anExpressionEvaluatesOnOneObjectInMemory(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<StockUpdate>()
            request.predicate = try FetchPredicate(format: "company.symbol == 'B'")
            for update in try context.fetch(request) {
                let value = try (FetchExpression.keyPath("price") * 1.5).evaluate(with: update, as: .double)
                #expect(value == .double(update.price * 1.5))
                // Into an integer, a real is truncated and clamped as SQLite's CAST does, never trapping.
                #expect(try (FetchExpression.keyPath("price") * 1e300).evaluate(with: update, as: .integer64) == .integer(.max))
                #expect(try (FetchExpression.keyPath("price") * -1.5).evaluate(with: update, as: .integer64)
                    == .integer(Int64((update.price * -1.5).rounded(.towardZero))))
                #expect(try (FetchExpression.keyPath("price") + nil).evaluate(with: update, as: .double) == .null)
            }
        }
    }

    // MARK: - Grouping

    @Test(arguments: allStoreTypes)
    func groupingByAnAttributeGivesOneResultPerValue(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("Company", [
            "active",
            Self.column("companies", .count(), .integer64),
            Self.column("staff", .sum(.keyPath("employees")), .integer64),
        ], groupBy: ["active"]) { $0.sortDescriptors = [FetchSort(key: "active")] }
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        let expected = [false, true].map { active in
            (active, Self.companies.filter { $0.active == active })
        }
        #expect(rows.map { $0["active"] as? Bool } == expected.map(\.0))
        #expect(rows.map { $0["companies"] as? Int } == expected.map(\.1.count))
        #expect(rows.map { $0["staff"] as? Int } == expected.map { $0.1.map(\.employees).reduce(0, +) })
    }

    @Test(arguments: allStoreTypes)
    func groupingByAToOnePathJoinsAndKeepsTheGroupWithoutADestination(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("StockUpdate", [
            "company.symbol",
            Self.column("total", .sum(.keyPath("price")), .double),
            Self.column("updates", .count(), .integer64),
            Self.column("turnover", .sum(.keyPath("price") * .keyPath("volume")), .double),
        ], groupBy: ["company.symbol"]) { $0.sortDescriptors = [FetchSort(key: "company.symbol")] }
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        // Nil sorts first, then the symbols of companies that have updates.
        let keys: [Int?] = [nil] + Self.companies.indices.filter { index in Self.updates.contains { $0.company == index } }
        #expect(rows.map { $0["company.symbol"] as? String } == keys.map { $0.map { Self.companies[$0].symbol } })
        #expect(rows.first?["company.symbol"] is NSNull)
        #expect(rows.map { $0["total"] as? Double } == keys.map { key in
            Self.updates.filter { $0.company == key }.map(\.price).reduce(0, +)
        })
        #expect(rows.map { $0["updates"] as? Int } == keys.map { key in Self.updates.filter { $0.company == key }.count })
        #expect(rows.map { $0["turnover"] as? Double } == keys.map { key in
            Self.updates.filter { $0.company == key }.map { $0.price * Double($0.volume) }.reduce(0, +)
        })
    }

    @Test(arguments: allStoreTypes)
    func havingKeepsTheGroupsWhoseAggregatesMatch(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("StockUpdate", [
            "company.symbol",
            Self.column("total", .sum(.keyPath("price")), .double),
        ], groupBy: ["company.symbol"]) {
            $0.havingPredicate = try FetchPredicate(format: "$total > %@ AND company.symbol != %@", 20, "C")
            $0.predicate = try FetchPredicate(format: "volume >= 100")
            $0.sortDescriptors = [FetchSort(key: "company.symbol")]
        }
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        let totals = Dictionary(grouping: Self.updates.filter { $0.volume >= 100 && $0.company != nil }, by: { $0.company! })
            .mapValues { $0.map(\.price).reduce(0, +) }
        let kept = totals.filter { $0.value > 20 && Self.companies[$0.key].symbol != "C" }
            .map { (Self.companies[$0.key].symbol, $0.value) }.sorted { $0.0 < $1.0 }
        #expect(!kept.isEmpty)
        #expect(rows.map { $0["company.symbol"] as? String } == kept.map(\.0))
        #expect(rows.map { $0["total"] as? Double } == kept.map(\.1))
    }

    @Test(arguments: allStoreTypes)
    func sortingByAnAggregateAndALimitGiveTheTopGroups(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("StockUpdate", [
            "company.symbol",
            Self.column("total", .sum(.keyPath("price")), .double),
        ], groupBy: ["company.symbol"]) {
            $0.sortDescriptors = [FetchSort(key: "total", ascending: false)]
            $0.fetchLimit = 2
        }
        let context = stack.newContext()
        let rows = try context.performAndWait { try context.fetch(request) }
        let totals = Dictionary(grouping: Self.updates, by: { $0.company.map { Self.companies[$0].symbol } ?? "-" })
            .mapValues { $0.map(\.price).reduce(0, +) }
        let top = totals.sorted { $0.value > $1.value }.prefix(2)
        #expect(rows.map { $0["total"] as? Double } == top.map(\.value))
        #expect(rows.map { $0["company.symbol"] as? String } == top.map(\.key))
    }

    // MARK: - Nil

    @Test(arguments: allStoreTypes)
    func countSkipsNilValuesAndAggregatesOfNothingFollowSQL(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        let everything = try dictionaries("Company", [
            Self.column("companies", .count(), .integer64),
            Self.column("named", .count(.keyPath("name")), .integer64),
        ])
        let row = try #require(try context.performAndWait { try context.fetch(everything) }.first)
        #expect(row["companies"] as? Int == Self.companies.count)
        #expect(row["named"] as? Int == Self.companies.filter { $0.name != nil }.count)

        let nothing = try dictionaries("Company", [
            Self.column("sum", .sum(.keyPath("employees")), .double),
            Self.column("average", .average(.keyPath("employees")), .double),
            Self.column("max", .max(.keyPath("employees")), .integer64),
            Self.column("count", .count(), .integer64),
        ]) { $0.predicate = try FetchPredicate(format: "employees > 1000") }
        let rows = try context.performAndWait { try context.fetch(nothing) }
        #expect(rows.count == 1)
        #expect(rows.first?["sum"] as? Double == 0)
        #expect(rows.first?["average"] is NSNull)
        #expect(rows.first?["max"] is NSNull)
        #expect(rows.first?["count"] as? Int == 0)

        var grouped = nothing
        grouped.propertiesToFetch = ["active", Self.column("count", .count(), .integer64)]
        grouped.propertiesToGroupBy = ["active"]
        #expect(try context.performAndWait { try context.fetch(grouped) }.isEmpty)
    }

    /// Results no integer or decimal can hold are clamped, or NaN, alike on
    /// both stores — never a trap (SQLite returns infinity for `price * 1e308`).
    @Test(arguments: allStoreTypes)
    func resultsBeyondWhatTheTypeHoldsAreClampedNotTrapped(type: StoreType) throws {
        let stack = try seeded(type)
        let request = try dictionaries("StockUpdate", [
            Self.column("huge", .max(.keyPath("price") * 1e300 * 1e300), .integer64),
            Self.column("tiny", .min(.keyPath("price") * -1e300 * 1e300), .integer64),
            Self.column("decimal", .max(.keyPath("price") * 1e300 * 1e300), .decimal),
        ])
        let context = stack.newContext()
        let row = try #require(try context.performAndWait { try context.fetch(request) }.first)
        #expect(row["huge"] as? Int == Int.max)
        #expect(row["tiny"] as? Int == Int.min)
        #expect((row["decimal"] as? Decimal)?.isNaN == true, "\(String(describing: row["decimal"]))")
    }

    // MARK: - Pending changes

    @Test(arguments: allStoreTypes)
    func aggregatesReflectSavedStateOnlyAsInCoreData(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        let request = try dictionaries("StockUpdate", [Self.column("total", .sum(.keyPath("price")), .double)])
        let saved = Self.updates.map(\.price).reduce(0, +)
        try context.performAndWait {
            let extra = StockUpdate(context: context)
            extra.price = 1000
            #expect(request.includesPendingChanges)
            #expect(try context.fetch(request).first?["total"] as? Double == saved)
            try context.save()
            #expect(try context.fetch(request).first?["total"] as? Double == saved + 1000)
        }
    }

    @Test(arguments: allStoreTypes)
    func aChildContextCountsNeitherItsOwnNorItsParentsUnsavedObjects(type: StoreType) throws {
        let stack = try seeded(type)
        let parent = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let request = try dictionaries("StockUpdate", [Self.column("updates", .count(), .integer64)])
        func count() throws -> Int? { try child.performAndWait { try child.fetch(request).first?["updates"] as? Int } }
        parent.performAndWait { StockUpdate(context: parent).price = 1 }
        child.performAndWait { StockUpdate(context: child).price = 2 }
        #expect(try count() == Self.updates.count)
        try child.performAndWait { try child.save() }
        #expect(try count() == Self.updates.count)
        try parent.performAndWait { try parent.save() }
        #expect(try count() == Self.updates.count + 2)
    }

    // MARK: - SQL

    @Test func theSQLiteStoreRunsOneStatementForAGroupedAggregate() throws {
        let stack = try seeded(.sqlite)
        let store = try #require(stack.coordinator.persistentStores.first as? SQLiteStore)
        let request = try dictionaries("StockUpdate", [
            "company.symbol",
            Self.column("total", .sum(.keyPath("price") * 2), .double),
        ], groupBy: ["company.symbol"]) {
            $0.predicate = try FetchPredicate(format: "company.employees > 5")
            $0.havingPredicate = try FetchPredicate(format: "$total > 1")
            $0.sortDescriptors = [FetchSort(key: "total", ascending: false)]
            $0.fetchLimit = 2
        }
        let context = stack.newContext()
        let log = StatementLog()
        store.traceStatements { log.append($0) }
        defer { store.traceStatements(nil) }
        let rows = try context.performAndWait { try context.fetch(request) }
        #expect(rows.count == 2)
        #expect(log.statements.count == 1)
        let sql = try #require(log.statements.first)
        #expect(sql.contains("GROUP BY") && sql.contains("HAVING") && sql.contains("ORDER BY") && sql.contains("LIMIT 2"))
        #expect(sql.components(separatedBy: "JOIN").count == 2, "company is joined once for the predicate, the value and the group")
    }
}
