import Foundation
import ObjectGraph
import Testing

/// Fetch requests without predicates: entities and subentities, sorting,
/// limits, result types, pending changes and bad requests.
@Suite struct FetchRequestTests {
    /// Symbols whose byte order differs from their case-insensitive order.
    static let symbols = ["beta", "Alpha", "Gamma", "delta", "Epsilon"]

    private func seeded(_ type: StoreType) throws -> TestStack {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(Self.symbols)   // employees 10, 20, 30, 40, 50
        return stack
    }

    private func symbols(_ context: ManagedObjectContext, _ configure: (inout FetchRequest<Company>) -> Void) throws -> [String] {
        var request = FetchRequest<Company>()
        configure(&request)
        return try context.fetch(request).map(\.symbol)
    }

    // MARK: - Sorting

    @Test(arguments: allStoreTypes)
    func sortsAscendingDescendingAndWithoutCase(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol")] }
                    == ["Alpha", "Epsilon", "Gamma", "beta", "delta"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol", ascending: false)] }
                    == ["delta", "beta", "Gamma", "Epsilon", "Alpha"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol", caseInsensitive: true)] }
                    == ["Alpha", "beta", "delta", "Epsilon", "Gamma"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol", ascending: false, caseInsensitive: true)] }
                    == ["Gamma", "Epsilon", "delta", "beta", "Alpha"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "employees", ascending: false)] }
                    == ["Epsilon", "delta", "Gamma", "Alpha", "beta"])
        }
    }

    @Test(arguments: allStoreTypes)
    func sortsBySeveralKeysAndPutsNilFirst(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait {
            let companies = try context.fetch(FetchRequest<Company>())
            for company in companies { company.active = company.employees > 20 }
            companies.first { $0.symbol == "Gamma" }?.name = "G"
            try context.save()
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "active"), FetchSort(key: "symbol", caseInsensitive: true)] }
                    == ["Alpha", "beta", "delta", "Epsilon", "Gamma"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "active", ascending: false), FetchSort(key: "employees")] }
                    == ["Gamma", "delta", "Epsilon", "beta", "Alpha"])
            let byName = try symbols(context) { $0.sortDescriptors = [FetchSort(key: "name", ascending: false)] }
            #expect(byName.first == "Gamma", "nil sorts first ascending, so last descending")
        }
    }

    @Test(arguments: allStoreTypes)
    func sortsThroughAToOneKeyPath(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait {
            let companies = try context.fetch(FetchRequest<Company>())
            for (index, company) in companies.enumerated() {
                let update = StockUpdate(context: context)
                update.price = Double(index)
                update.company = company
            }
            let orphan = StockUpdate(context: context)
            orphan.price = 100
            try context.save()

            var request = FetchRequest<StockUpdate>()
            request.sortDescriptors = [FetchSort(key: "company.symbol", caseInsensitive: true)]
            let updates = try context.fetch(request)
            #expect(updates.map { $0.company?.symbol ?? "-" } == ["-", "Alpha", "beta", "delta", "Epsilon", "Gamma"])

            request.sortDescriptors = [FetchSort(key: "company.employees", ascending: false)]
            #expect(try context.fetch(request).map { $0.company?.employees ?? 0 } == [50, 40, 30, 20, 10, 0])
        }
    }

    @Test(arguments: allStoreTypes)
    func sortsPendingChangesTheSameWayAsTheStore(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let fresh = Company(context: context)
            fresh.symbol = "charlie"
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol")] }
                    == ["Alpha", "Epsilon", "Gamma", "beta", "charlie", "delta"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "symbol", caseInsensitive: true)] }
                    == ["Alpha", "beta", "charlie", "delta", "Epsilon", "Gamma"])
        }
    }

    // MARK: - Limits

    @Test(arguments: allStoreTypes)
    func limitAndOffsetApplyAfterSorting(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let sort = [FetchSort(key: "employees")]
            #expect(try symbols(context) { $0.sortDescriptors = sort; $0.fetchLimit = 2 } == ["beta", "Alpha"])
            #expect(try symbols(context) { $0.sortDescriptors = sort; $0.fetchOffset = 3 } == ["delta", "Epsilon"])
            #expect(try symbols(context) { $0.sortDescriptors = sort; $0.fetchOffset = 1; $0.fetchLimit = 2 } == ["Alpha", "Gamma"])
            #expect(try symbols(context) { $0.sortDescriptors = sort; $0.fetchOffset = 10 } == [])
            #expect(try symbols(context) { $0.sortDescriptors = sort; $0.fetchLimit = -1; $0.fetchOffset = -5 }.count == 5,
                    "negative limits mean none")

            var request = FetchRequest<Company>()
            request.fetchLimit = 2
            #expect(try context.count(for: request) == 2)
            request.fetchOffset = 4
            #expect(try context.count(for: request) == 1)
        }
    }

    @Test(arguments: allStoreTypes)
    func limitAndOffsetApplyToPendingChangesToo(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let fresh = Company(context: context)
            fresh.symbol = "Zulu"
            fresh.employees = 5
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "employees")]; $0.fetchLimit = 2 } == ["Zulu", "beta"])
            #expect(try symbols(context) { $0.sortDescriptors = [FetchSort(key: "employees")]; $0.fetchOffset = 5 } == ["Epsilon"])
        }
    }

    // MARK: - Result types

    @Test(arguments: allStoreTypes)
    func objectIDResultsMatchTheObjects(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let ids = try stack.seedCompanies(Self.symbols)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            var request = FetchRequest<ObjectID>(entityName: "Company")
            request.resultType = .managedObjectID
            request.sortDescriptors = [FetchSort(key: "employees")]
            #expect(try context.fetch(request) == ids)
            #expect(context.registeredObjects.isEmpty, "IDs register no objects")
        }
    }

    @Test(arguments: allStoreTypes)
    func countResultsAndCountForAgree(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            var request = FetchRequest<Int>(entityName: "Company")
            request.resultType = .count
            #expect(try context.fetch(request) == [5])
            #expect(try context.count(for: FetchRequest<Company>()) == 5)
            #expect(try context.count(for: FetchRequest<StockUpdate>()) == 0)
        }
    }

    @Test(arguments: allStoreTypes)
    func dictionaryResultsHoldTheFetchedPropertiesAndCanBeDistinct(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait {
            let companies = try context.fetch(FetchRequest<Company>())
            for company in companies { company.active = company.employees >= 30 }
            try context.save()

            var request = FetchRequest<[String: Any]>(entityName: "Company")
            request.resultType = .dictionary
            request.propertiesToFetch = ["symbol", "employees"]
            request.sortDescriptors = [FetchSort(key: "employees")]
            let rows = try context.fetch(request)
            #expect(rows.count == 5)
            #expect(rows.allSatisfy { Set($0.keys) == ["symbol", "employees"] })
            #expect(rows.map { $0["symbol"] as? String } == ["beta", "Alpha", "Gamma", "delta", "Epsilon"])
            #expect(rows.map { $0["employees"] as? Int } == [10, 20, 30, 40, 50])

            request.propertiesToFetch = ["active"]
            request.sortDescriptors = [FetchSort(key: "active")]
            #expect(try context.fetch(request).count == 5)
            request.returnsDistinctResults = true
            let distinct = try context.fetch(request)
            #expect(distinct.map { $0["active"] as? Bool } == [false, true])
        }
    }

    @Test(arguments: allStoreTypes)
    func dictionaryResultsWithoutPropertiesHoldEveryAttribute(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A"])
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<[String: Any]>(entityName: "Company")
            request.resultType = .dictionary
            let row = try #require(try context.fetch(request).first)
            #expect(row["symbol"] as? String == "A")
            #expect(row["employees"] as? Int == 10)
            #expect(row["active"] as? Bool == true)
            #expect(row["updates"] == nil)
        }
    }

    // MARK: - Pending changes

    @Test(arguments: allStoreTypes)
    func unsavedInsertsAppearAndUnsavedDeletesVanish(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        try context.performAndWait {
            let all = try context.fetch(FetchRequest<Company>())
            let doomed = try #require(all.first { $0.symbol == "Gamma" })
            context.delete(doomed)
            let fresh = Company(context: context)
            fresh.symbol = "Zulu"

            let pending = try context.fetch(FetchRequest<Company>())
            #expect(Set(pending.map(\.symbol)) == ["beta", "Alpha", "delta", "Epsilon", "Zulu"])
            #expect(pending.contains { $0 === fresh })
            #expect(try context.count(for: FetchRequest<Company>()) == 5)

            var ids = FetchRequest<ObjectID>(entityName: "Company")
            ids.resultType = .managedObjectID
            #expect(try context.fetch(ids).contains(fresh.objectID))
            #expect(try !context.fetch(ids).contains(doomed.objectID))

            var storeOnly = FetchRequest<Company>()
            storeOnly.includesPendingChanges = false
            #expect(Set(try context.fetch(storeOnly).map(\.objectID)) == Set(all.map(\.objectID)))
            #expect(try context.count(for: storeOnly) == 5)
            #expect(try context.count(for: FetchRequest<StockUpdate>()) == 0)
        }
    }

    // MARK: - Entities and subentities

    @Test(arguments: allStoreTypes)
    func subentitiesAreIncludedUnlessAskedNotTo(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let bond = try #require(stack.model.entitiesByName["Bond"])
        let stock = try #require(stack.model.entitiesByName["Stock"])
        let context = stack.newContext()
        try context.performAndWait {
            for (entity, name) in [(bond, "b1"), (stock, "s1"), (bond, "b2")] {
                try ManagedObject(entity: entity, insertInto: context).setValue(name, forKey: "name")
            }
            try context.save()

            func names(_ entity: String, sub: Bool) throws -> [String] {
                var request = FetchRequest<ManagedObject>(entityName: entity)
                request.includesSubentities = sub
                request.sortDescriptors = [FetchSort(key: "name")]
                return try context.fetch(request).map { try $0.value(forKey: "name") as? String ?? "?" }
            }
            #expect(try names("Asset", sub: true) == ["b1", "b2", "s1"])
            #expect(try names("Asset", sub: false) == [], "the abstract parent has no objects of its own")
            #expect(try names("Bond", sub: true) == ["b1", "b2"])
            #expect(try names("Stock", sub: false) == ["s1"])

            var request = FetchRequest<ManagedObject>(entityName: "Asset")
            request.sortDescriptors = [FetchSort(key: "name")]
            #expect(try context.fetch(request).map(\.entity.name) == ["Bond", "Bond", "Stock"])
            #expect(try context.count(for: request) == 3)
            request.includesSubentities = false
            #expect(try context.count(for: request) == 0)

            // Pending inserts follow the same rule.
            try ManagedObject(entity: stock, insertInto: context).setValue("s2", forKey: "name")
            #expect(try names("Asset", sub: true) == ["b1", "b2", "s1", "s2"])
            #expect(try names("Bond", sub: true) == ["b1", "b2"])
            #expect(try names("Asset", sub: false) == [])
        }
    }

    // MARK: - Bad requests

    @Test(arguments: allStoreTypes)
    func anUnknownEntityThrows(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        context.performAndWait {
            #expect(throws: ObjectGraphError.unknownEntity("Nope")) { try context.fetch(FetchRequest<ManagedObject>(entityName: "Nope")) }
            #expect(throws: ObjectGraphError.unknownEntity("company")) { try context.count(for: FetchRequest<ManagedObject>(entityName: "company")) }
            #expect("\(ObjectGraphError.unknownEntity("Nope"))" == "the model has no entity named 'Nope'")
        }
    }

    @Test(arguments: allStoreTypes)
    func anUnknownSortKeyOrPropertyToFetchThrows(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "nope")]
            #expect(throws: ObjectGraphError.unknownKey("nope", entity: "Company")) { try context.fetch(request) }
            request.sortDescriptors = [FetchSort(key: "updates.price")]
            #expect(throws: ObjectGraphError.unknownKey("updates.price", entity: "Company")) { try context.fetch(request) }
            request.sortDescriptors = [FetchSort(key: "")]
            #expect(throws: ObjectGraphError.unknownKey("", entity: "Company")) { try context.fetch(request) }
            request.sortDescriptors = [FetchSort(key: "symbol.length")]
            #expect(throws: ObjectGraphError.unknownKey("symbol.length", entity: "Company")) { try context.fetch(request) }

            var updates = FetchRequest<StockUpdate>()
            updates.sortDescriptors = [FetchSort(key: "company.nope")]
            #expect(throws: ObjectGraphError.unknownKey("nope", entity: "Company")) { try context.fetch(updates) }

            var dictionaries = FetchRequest<[String: Any]>(entityName: "Company")
            dictionaries.resultType = .dictionary
            dictionaries.propertiesToFetch = ["symbol", "ticker"]
            #expect(throws: ObjectGraphError.unknownKey("ticker", entity: "Company")) { try context.fetch(dictionaries) }
        }
    }

    @Test(arguments: allStoreTypes)
    func aResultTypeThatDoesNotMatchTheRequestThrows(type: StoreType) throws {
        let stack = try seeded(type)
        let context = stack.newContext()
        context.performAndWait {
            #expect(throws: ObjectGraphError.self) { try context.fetch(FetchRequest<StockUpdate>(entityName: "Company")) }
            let error = #expect(throws: ObjectGraphError.self) { try context.fetch(FetchRequest<StockUpdate>(entityName: "Company")) }
            #expect(error?.code == .wrongResultType, "\(String(describing: error))")
            #expect(error?.message.contains("Company") == true)
            #expect(error?.message.hasSuffix(", not StockUpdate") == true)

            #expect(throws: ObjectGraphError.self) { try context.fetch(FetchRequest<ObjectID>(entityName: "Company")) }
            var ids = FetchRequest<Company>()
            ids.resultType = .managedObjectID
            #expect(throws: ObjectGraphError.self) { try context.fetch(ids) }
            var counts = FetchRequest<String>(entityName: "Company")
            counts.resultType = .count
            #expect(throws: ObjectGraphError.self) { try context.fetch(counts) }
        }
    }

    @Test(arguments: allStoreTypes)
    func aResultTypeThatDoesNotMatchThrowsEvenWhenNothingMatches(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        context.performAndWait {
            #expect(throws: ObjectGraphError.self) { try context.fetch(FetchRequest<StockUpdate>(entityName: "Company")) }
            var ids = FetchRequest<Company>()
            ids.resultType = .managedObjectID
            #expect(throws: ObjectGraphError.self) { try context.fetch(ids) }
            // A superclass of the entity's class is fine.
            #expect(throws: Never.self) { try context.fetch(FetchRequest<ManagedObject>(entityName: "Company")) }
        }
    }
}
