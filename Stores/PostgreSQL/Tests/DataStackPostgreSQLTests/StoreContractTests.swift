import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// The store contract, run against the SQLite store and the PostgreSQL store
/// alike: what one store does, the other must do the same.
@Suite("Store contract", .serialized)
struct StoreContractTests {
    /// Saves three companies (every attribute type), two updates and two indexes in one coordinator.
    private func seed(_ kind: StoreKind) throws -> (location: URL, model: ManagedObjectModel) {
        let model = StoreTestModel.make()
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(model, at: location)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let entities = model.entitiesByName
            func company(_ symbol: String, _ name: String?, employees: Int, revenue: Double?) throws -> ManagedObject {
                let company = ManagedObject(entity: try #require(entities["Company"]), insertInto: context)
                try company.setValue(symbol, forKey: "symbol")
                try company.setValue(name, forKey: "name")
                try company.setValue(employees, forKey: "employees")
                try company.setValue(revenue, forKey: "revenue")
                return company
            }
            let acme = try company("ACME", "Acme Corp", employees: 120, revenue: 1.5e9)
            try acme.setValue(Date(timeIntervalSinceReferenceDate: 12_345.678), forKey: "founded")
            try acme.setValue(Data([0, 1, 2, 255]), forKey: "logo")
            try acme.setValue(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"), forKey: "identifier")
            try acme.setValue(URL(string: "https://acme.example/ü?q=1"), forKey: "website")
            let globex = try company("GLBX", "Globex \"quoted\" 'name'", employees: 45, revenue: -0.1)
            try globex.setValue(false, forKey: "active")
            let initech = try company("INIT", nil, employees: 7, revenue: nil)
            for (price, volume) in [(10.5, 100), (11.25, 250)] {
                let update = ManagedObject(entity: try #require(entities["StockUpdate"]), insertInto: context)
                try update.setValue(price, forKey: "price")
                try update.setValue(volume, forKey: "volume")
                try update.setValue(acme, forKey: "company")
            }
            let dow = ManagedObject(entity: try #require(entities["MarketIndex"]), insertInto: context)
            try dow.setValue("Dow", forKey: "name")
            let tech = ManagedObject(entity: try #require(entities["SectorIndex"]), insertInto: context)
            try tech.setValue("Tech", forKey: "name")
            try tech.setValue("software", forKey: "sector")
            try dow.setValue(Set([acme, globex]), forKey: "members")
            try tech.setValue(Set([acme, initech]), forKey: "members")
            try context.save()
        }
        return (location, model)
    }

    private func reader(_ kind: StoreKind, _ seeded: (location: URL, model: ManagedObjectModel)) throws -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(seeded.model, at: seeded.location))
    }

    @Test("every attribute type reads back as saved, through another coordinator", arguments: StoreKind.allCases)
    func valuesRoundTrip(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == %@", "ACME"))
            let acme = try #require(try context.fetch(request).first)
            #expect(try acme.value(forKey: "name") as? String == "Acme Corp")
            #expect(try acme.value(forKey: "employees") as? Int == 120)
            #expect(try acme.value(forKey: "revenue") as? Double == 1.5e9)
            #expect(try acme.value(forKey: "founded") as? Date == Date(timeIntervalSinceReferenceDate: 12_345.678))
            #expect(try acme.value(forKey: "active") as? Bool == true)
            #expect(try acme.value(forKey: "logo") as? Data == Data([0, 1, 2, 255]))
            #expect(try acme.value(forKey: "identifier") as? UUID == UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
            #expect(try acme.value(forKey: "website") as? URL == URL(string: "https://acme.example/ü?q=1"))
            let updates = try #require(try acme.value(forKey: "updates") as? Set<ManagedObject>)
            #expect(Set(try updates.map { try #require($0.value(forKey: "price") as? Double) }) == [10.5, 11.25])
            let indexes = try #require(try acme.value(forKey: "indexes") as? Set<ManagedObject>)
            #expect(Set(try indexes.map { try #require($0.value(forKey: "name") as? String) }) == ["Dow", "Tech"])
            #expect(indexes.contains { $0.entity.name == "SectorIndex" }, "a subentity's row keeps its entity")
        }
    }

    @Test("predicates, sorts, limits and counts give the same rows on both stores", arguments: StoreKind.allCases)
    func fetchesAgree(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        let cases: [(String, [Any?], [String])] = [
            ("employees > %@", [10], ["ACME", "GLBX"]),
            ("name == nil", [], ["INIT"]),
            ("name != nil AND active == YES", [], ["ACME"]),
            ("name BEGINSWITH[c] %@", ["acme"], ["ACME"]),
            ("name CONTAINS %@", ["\"quoted\""], ["GLBX"]),
            ("name ENDSWITH %@", ["Corp"], ["ACME"]),
            ("name LIKE %@", ["G*x ?quoted*"], ["GLBX"]),
            ("name MATCHES %@", ["Acme.*"], ["ACME"]),
            ("symbol IN %@", [["ACME", "INIT", "NOPE"]], ["ACME", "INIT"]),
            ("ANY updates.price > %@", [11.0], ["ACME"]),
            ("updates.@count == 0", [], ["GLBX", "INIT"]),
            ("updates.@sum.volume >= %@", [350], ["ACME"]),
            ("ANY indexes.name == %@", ["Tech"], ["ACME", "INIT"]),
            ("SUBQUERY(indexes, $i, $i.name == 'Dow').@count > 0", [], ["ACME", "GLBX"]),
            ("revenue < 0 OR founded > %@", [Date(timeIntervalSinceReferenceDate: 0)], ["ACME", "GLBX"]),
            ("NOT (symbol IN {'ACME'})", [], ["GLBX", "INIT"]),
            ("TRUEPREDICATE", [], ["ACME", "GLBX", "INIT"]),
        ]
        try context.performAndWait {
            for (format, arguments, expected) in cases {
                let predicate = try FetchPredicate(format: format, argumentArray: arguments)
                var request = FetchRequest<ManagedObject>(entityName: "Company", predicate: predicate,
                                                          sortDescriptors: [FetchSort(key: "symbol")])
                let symbols = try context.fetch(request).map { try $0.value(forKey: "symbol") as? String }
                #expect(symbols == expected, "\(format)")
                #expect(try context.count(for: request) == expected.count, "count of \(format)")
                request.fetchLimit = 1
                request.fetchOffset = 1
                let page = try context.fetch(request).map { try $0.value(forKey: "symbol") as? String }
                #expect(page == Array(expected.dropFirst().prefix(1)), "limit and offset of \(format)")
            }
            let descending = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil,
                                                         sortDescriptors: [FetchSort(key: "employees", ascending: false)])
            #expect(try context.fetch(descending).map { try $0.value(forKey: "symbol") as? String } == ["ACME", "GLBX", "INIT"])
            let indexes = FetchRequest<ManagedObject>(entityName: "MarketIndex")
            #expect(try context.count(for: indexes) == 2, "a fetch of an entity includes its subentities")
        }
    }

    @Test("computed, grouped and filtered dictionary fetches give the same rows on both stores", arguments: StoreKind.allCases)
    func expressionFetchesAgree(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        func column(_ name: String, _ expression: FetchExpression, _ type: AttributeType) -> PropertyToFetch {
            .expression(ExpressionDescription(name: name, expression: expression, resultType: type))
        }
        var grouped = FetchRequest<[String: Any]>(entityName: "StockUpdate")
        grouped.resultType = .dictionary
        grouped.propertiesToFetch = ["company.symbol", column("volume", .sum(.keyPath("volume")), .integer64),
                                     column("average", .average(.keyPath("price")), .double), column("count", .count(), .integer64)]
        grouped.propertiesToGroupBy = ["company.symbol"]
        grouped.havingPredicate = try FetchPredicate(format: "$count > 1")
        var computed = FetchRequest<[String: Any]>(entityName: "Company")
        computed.resultType = .dictionary
        computed.propertiesToFetch = ["symbol", column("perEmployee", .keyPath("employees") / 0, .double),
                                     column("half", .keyPath("employees") / 2, .double)]
        computed.sortDescriptors = [FetchSort(key: "symbol", ascending: false)]
        try context.performAndWait {
            let groups = try context.fetch(grouped)
            #expect(groups.count == 1)
            #expect(groups.first?["company.symbol"] as? String == "ACME")
            #expect(groups.first?["volume"] as? Int == 350)
            #expect(groups.first?["average"] as? Double == 10.875)
            #expect(groups.first?["count"] as? Int == 2)
            let rows = try context.fetch(computed)
            #expect(rows.map { $0["symbol"] as? String } == ["INIT", "GLBX", "ACME"])
            #expect(rows.map { $0["half"] as? Double } == [3.5, 22.5, 60])
            #expect(rows.allSatisfy { $0["perEmployee"] is NSNull }, "a division by zero is null, not an error")
        }
    }

    @Test("an update and a delete bump and check the row's version; a stale save is a merge conflict", arguments: StoreKind.allCases)
    func optimisticLocking(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let first = try reader(kind, seeded)
        let second = try reader(kind, seeded)
        let predicate = try FetchPredicate(format: "symbol == 'GLBX'")
        let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: predicate)
        let objectID = try first.performAndWait {
            let company = try #require(try first.fetch(request).first)
            try company.setValue(46, forKey: "employees")
            return company.objectID
        }
        try second.performAndWait {
            let company = try #require(try second.fetch(request).first)
            try company.setValue(99, forKey: "employees")
            try second.save()
        }
        first.mergePolicy = .error
        let conflict = first.performAndWait { #expect(throws: ObjectGraphError.self) { try first.save() } }
        #expect(conflict != nil)
        first.mergePolicy = .mergeByPropertyObjectTrump
        try first.performAndWait { try first.save() }
        let third = try reader(kind, seeded)
        try third.performAndWait {
            let company = try third.existingObject(with: objectID)
            #expect(try company.value(forKey: "employees") as? Int == 46, "the object's change won under object trump")
            third.delete(company)
            try third.save()
            #expect(try third.count(for: request) == 0)
        }
    }

    @Test("a refetch that refreshes brings loaded objects to the store's values and keeps their unsaved changes", arguments: StoreKind.allCases)
    func refetchRefreshes(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let first = try reader(kind, seeded)
        let second = try reader(kind, seeded)
        var request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
        let (acme, globex) = try first.performAndWait {
            let companies = try first.fetch(request)
            #expect(try companies.map { try $0.value(forKey: "employees") as? Int } == [120, 45, 7])
            try companies[1].setValue("Globex, renamed here", forKey: "name")
            return (companies[0], companies[1])
        }
        try addEmployee(toEach: request, in: second)
        try first.performAndWait {
            _ = try first.fetch(request)
            #expect(try acme.value(forKey: "employees") as? Int == 120, "without the option, a loaded object keeps its values")
            request.shouldRefreshRefetchedObjects = true
            _ = try first.fetch(request)
            #expect(!acme.isFault && !acme.hasChanges)
            #expect(try acme.value(forKey: "employees") as? Int == 121)
            #expect(try globex.value(forKey: "employees") as? Int == 46)
            #expect(try globex.value(forKey: "name") as? String == "Globex, renamed here")
            #expect(globex.hasChanges)
            // Saved over the store's new version: no conflict, both changes kept.
            first.mergePolicy = .error
            try first.save()
        }
        let third = try reader(kind, seeded)
        try third.performAndWait {
            let stored = try third.existingObject(with: globex.objectID)
            #expect(try stored.value(forKey: "employees") as? Int == 46)
            #expect(try stored.value(forKey: "name") as? String == "Globex, renamed here")
        }
    }

    /// Gives each company `request` fetches one more employee, and saves.
    private func addEmployee(toEach request: FetchRequest<ManagedObject>, in context: ManagedObjectContext) throws {
        try context.performAndWait {
            for company in try context.fetch(request) {
                let employees = try #require(try company.value(forKey: "employees") as? Int)
                try company.setValue(employees + 1, forKey: "employees")
            }
            try context.save()
        }
    }

    @Test("a context pinned to a query generation keeps reading it on SQLite; PostgreSQL refuses to pin, saying so", arguments: StoreKind.allCases)
    func queryGenerations(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let first = try reader(kind, seeded)
        let second = try reader(kind, seeded)
        let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
        guard kind == .sqlite else {
            first.performAndWait {
                let error = #expect(throws: ObjectGraphError.self) { try first.setQueryGenerationFrom(.current) }
                #expect(error?.code == .unsupportedStore)
                #expect(error?.message.contains("PostgreSQL store") == true)
                #expect(first.queryGenerationToken == nil)
            }
            return
        }
        try first.performAndWait {
            try first.setQueryGenerationFrom(.current)
            #expect(try first.count(for: request) == 3)
        }
        try addEmployee(toEach: request, in: second)
        try first.performAndWait {
            let companies = try first.fetch(request)
            #expect(try companies.map { try $0.value(forKey: "employees") as? Int } == [120, 45, 7])
            try first.setQueryGenerationFrom(nil)
            for company in companies { first.refresh(company, mergeChanges: false) }
            #expect(try companies.map { try $0.value(forKey: "employees") as? Int } == [121, 46, 8])
        }
    }

    @Test("a save of many updates names exactly the rows whose versions moved on, and writes none of them", arguments: StoreKind.allCases)
    func conflictsAmongManyUpdates(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let stale = try reader(kind, seeded)
        stale.mergePolicy = .error
        let all = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
        try stale.performAndWait {
            for company in try stale.fetch(all) { try company.setValue(1_000, forKey: "employees") }
        }
        let other = try reader(kind, seeded)
        let moved = try other.performAndWait {
            let glbx = try #require(try other.fetch(all).first { try $0.value(forKey: "symbol") as? String == "GLBX" })
            try glbx.setValue(46, forKey: "employees")
            try other.save()
            return glbx.objectID
        }
        let error = stale.performAndWait { #expect(throws: ObjectGraphError.self) { try stale.save() } }
        guard error?.code == .mergeConflict, let conflicts = error?.mergeConflicts else {
            Issue.record("expected a merge conflict, got \(String(describing: error))")
            return
        }
        #expect(conflicts.map { $0.objectID.uriRepresentation() } == [moved.uriRepresentation()])
        #expect(conflicts.first?.persistedSnapshotVersion == 2)
        let check = try reader(kind, seeded)
        let employees = try check.performAndWait { try check.fetch(all).map { try $0.value(forKey: "employees") as? Int } }
        #expect(employees == [120, 46, 7], "the save wrote none of its updates")
    }

    @Test("a uniqueness constraint refuses a second row with the same key, and the save changes nothing", arguments: StoreKind.allCases)
    func uniqueness(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        context.mergePolicy = .error
        try context.performAndWait {
            let duplicate = ManagedObject(entity: try #require(seeded.model.entitiesByName["Company"]), insertInto: context)
            try duplicate.setValue("ACME", forKey: "symbol")
            let other = ManagedObject(entity: try #require(seeded.model.entitiesByName["Company"]), insertInto: context)
            try other.setValue("NEW", forKey: "symbol")
            #expect(throws: ObjectGraphError.self) { try context.save() }
            return ()
        }
        let check = try reader(kind, seeded)
        let count = try check.performAndWait { try check.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(count == 3, "nothing of the failed save stands")
    }

    @Test("under an object-trump policy a new object with a stored object's unique key becomes an update of it", arguments: StoreKind.allCases)
    func uniquenessMerges(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.performAndWait {
            let again = ManagedObject(entity: try #require(seeded.model.entitiesByName["Company"]), insertInto: context)
            try again.setValue("ACME", forKey: "symbol")
            try again.setValue(121, forKey: "employees")
            try context.save()
        }
        let check = try reader(kind, seeded)
        try check.performAndWait {
            let companies = try check.fetch(FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'")))
            #expect(companies.count == 1, "one ACME, not two")
            #expect(try companies.first?.value(forKey: "employees") as? Int == 121)
            #expect(try companies.first?.value(forKey: "name") as? String == "Acme Corp", "what the new object did not set is kept")
        }
    }

    @Test("prefetching loads a to-many and a many-to-many of every fetched owner with their rows", arguments: StoreKind.allCases)
    func prefetching(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        var request = FetchRequest<ManagedObject>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
        request.relationshipKeyPathsForPrefetching = ["updates", "indexes"]
        try context.performAndWait {
            let companies = try context.fetch(request)
            let counts = try companies.map { company -> [Int] in
                let updates = try #require(try company.value(forKey: "updates") as? Set<ManagedObject>)
                let indexes = try #require(try company.value(forKey: "indexes") as? Set<ManagedObject>)
                #expect(updates.allSatisfy { !$0.isFault }, "the updates' rows came with the prefetch")
                return [updates.count, indexes.count]
            }
            #expect(counts == [[2, 2], [0, 1], [0, 1]])
        }
    }

    @Test("a to-many change and a cascade delete are stored", arguments: StoreKind.allCases)
    func relationshipsChange(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let context = try reader(kind, seeded)
        let acmeRequest = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'"))
        try context.performAndWait {
            let acme = try #require(try context.fetch(acmeRequest).first)
            try acme.setValue(Set<ManagedObject>(), forKey: "indexes")
            try context.save()
            context.delete(acme)
            try context.save()
        }
        let check = try reader(kind, seeded)
        try check.performAndWait {
            #expect(try check.count(for: FetchRequest<ManagedObject>(entityName: "StockUpdate")) == 0, "the cascade deleted the updates")
            let tech = try #require(try check.fetch(FetchRequest<ManagedObject>(entityName: "SectorIndex")).first)
            let members = try #require(try tech.value(forKey: "members") as? Set<ManagedObject>)
            #expect(try members.map { try $0.value(forKey: "symbol") as? String } == ["INIT"])
        }
    }
}
