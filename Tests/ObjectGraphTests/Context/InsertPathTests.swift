import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// The insert path's shortcuts keep their results: the entity a class's
/// objects get, a new object's defaults, the keys a save hands out and the
/// text of rows bound one after another.
@Suite struct InsertPathTests {
    @Test func objectsOfTwoClassesMadeInTurnGetEachTheirEntity() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let companyEntity = try #require(stack.model.entitiesByName["Company"])
        let updateEntity = try #require(stack.model.entitiesByName["StockUpdate"])
        context.performAndWait {
            for _ in 0..<3 {
                #expect(Company(context: context).entity === companyEntity)
                #expect(Company(context: context).entity === companyEntity)
                #expect(StockUpdate(context: context).entity === updateEntity)
            }
        }
    }

    @Test func aContextGivenAnotherCoordinatorMakesObjectsOfThatCoordinatorsModel() throws {
        let first = try TestStack()
        let second = try TestStack()
        let context = first.newContext()
        try context.performAndWait {
            #expect(Company(context: context).entity === first.model.entitiesByName["Company"])
            context.reset()
            context.persistentStoreCoordinator = second.coordinator
            let company = Company(context: context)
            #expect(company.entity === second.model.entitiesByName["Company"])
            company.symbol = "ACME"
            try context.save()
        }
        let reader = second.newContext()
        let symbols = try reader.performAndWait { try reader.fetch(FetchRequest<Company>()).map(\.symbol) }
        #expect(symbols == ["ACME"])
    }

    @Test func aChildContextFollowsItsParentToAnotherCoordinatorsModel() throws {
        let first = try TestStack()
        let second = try TestStack()
        let parent = first.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        child.performAndWait {
            #expect(Company(context: child).entity === first.model.entitiesByName["Company"])
            child.reset()
        }
        // The child's own coordinator never changes: the class it made last
        // must not keep the first model's entity.
        parent.performAndWait { parent.persistentStoreCoordinator = second.coordinator }
        child.performAndWait {
            #expect(Company(context: child).entity === second.model.entitiesByName["Company"])
            #expect(StockUpdate(context: child).entity === second.model.entitiesByName["StockUpdate"])
        }
    }

    @Test func aNewObjectHoldsTheDefaultsAndItsWritesLeaveThemForTheNext() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        context.performAndWait {
            let first = Company(context: context)
            #expect(first.employees == 0 && first.active && first.name == nil)
            first.employees = 12
            first.active = false
            first.name = "Acme"
            let second = Company(context: context)
            #expect(second.employees == 0 && second.active && second.name == nil)
            #expect(first.employees == 12 && !first.active && first.name == "Acme")
        }
    }

    @Test(arguments: [StoreType.sqlite, .inMemory])
    func newObjectsOfOneEntityTakeConsecutiveKeysAfterTheStoredOnes(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let stored = (0..<3).map { index in
                let company = Company(context: context)
                company.symbol = "S\(index)"
                return company
            }
            try context.save()
            let storedKeys = stored.compactMap(\.objectID.primaryKey)
            #expect(storedKeys.count == 3 && Set(storedKeys).count == 3)
            let more = (0..<5).map { index in
                let company = Company(context: context)
                company.symbol = "M\(index)"
                return company
            }
            try context.save()
            let keys = more.compactMap(\.objectID.primaryKey)
            #expect(keys.count == 5)
            if type == .sqlite {
                // One block of keys after the stored ones, in the order of the inserts.
                #expect(keys == Array((storedKeys.max() ?? 0) + 1 ... (storedKeys.max() ?? 0) + 5))
            }
            #expect(Set(keys).isDisjoint(with: storedKeys))
            #expect(more.allSatisfy { !$0.objectID.isTemporaryID && context.registeredObject(for: $0.objectID) === $0 })
        }
    }

    @Test func aSaveOfTwoEntitiesGivesEachKeysOfItsOwnCounter() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        var ids: [(ObjectID, String)] = []
        try context.performAndWait {
            // Held here: the context keeps no unchanged object alive by itself.
            var companies: [Company] = []
            var updates: [StockUpdate] = []
            for index in 0..<4 {
                let company = Company(context: context)
                company.symbol = "C\(index)"
                let update = StockUpdate(context: context)
                update.price = Double(index)
                update.company = company
                companies.append(company)
                updates.append(update)
            }
            try context.save()
            #expect(Set(companies.compactMap(\.objectID.primaryKey)) == [1, 2, 3, 4])
            #expect(Set(updates.compactMap(\.objectID.primaryKey)) == [1, 2, 3, 4])
            ids = companies.map { ($0.objectID, $0.symbol) }
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            for (id, symbol) in ids {
                let company = try #require(try reader.existingObject(with: id) as? Company)
                #expect(company.symbol == symbol)
                #expect(company.updates.count == 1)
                #expect(company.updates.first.map { "C\(Int($0.price))" } == symbol)
            }
        }
    }

    /// Rows of one INSERT bound one after another: each row's text is its
    /// own, short or long (past the statement's text buffer, which grows),
    /// and a nil binds NULL after a row that bound text there.
    @Test func rowsSavedOneAfterAnotherKeepTheirOwnText() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let names: [String?] = ["a", nil, String(repeating: "long ", count: 120), "", "é ü ✓", nil, "z"]
        try context.performAndWait {
            for (index, name) in names.enumerated() {
                let company = Company(context: context)
                company.symbol = "S\(index)-" + String(repeating: "x", count: index * 40)
                company.name = name
            }
            try context.save()
            // A second save through the same statement, with the bindings cleared in between.
            let last = Company(context: context)
            last.symbol = "LAST"
            try context.save()
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            let companies = try reader.fetch(request)
            #expect(companies.count == names.count + 1)
            for (index, name) in names.enumerated() {
                let symbol = "S\(index)-" + String(repeating: "x", count: index * 40)
                let company = try #require(companies.first { $0.symbol == symbol })
                #expect(company.name == name)
            }
            #expect(companies.first { $0.symbol == "LAST" }?.name == nil)
        }
    }
}
