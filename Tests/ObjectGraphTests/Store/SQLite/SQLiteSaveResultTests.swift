import Foundation
import Testing
@testable import ObjectGraph

/// The IDs a SQLite save gives its inserted objects: by position in the
/// request (what a context settles its objects from) and, derived from them,
/// by temporary ID (the public ``SaveResult/permanentIDs``).
@Suite struct SQLiteSaveResultTests {
    @Test func aSaveGivesEachTemporaryIDItsPermanentOneInTheRequestsOrder() throws {
        let stack = try TestStack()
        let company = try #require(stack.model.entitiesByName["Company"])
        let update = try #require(stack.model.entitiesByName["StockUpdate"])
        let store = try #require(stack.coordinator.persistentStores.first)
        let alreadyPermanent = try store.obtainPermanentIDs(for: [ObjectID.temporary(for: company)])[0]
        func node(_ id: ObjectID, _ values: ContiguousArray<PropertyValue>) -> IncrementalStoreNode {
            IncrementalStoreNode(objectID: id, values: values, version: 0)
        }
        func companyValues(_ symbol: String) -> ContiguousArray<PropertyValue> {
            var values = company.initialSlots
            values[company.propertiesByName["symbol"]!.index] = .string(symbol)
            return values
        }
        let temporaries = [ObjectID.temporary(for: company), .temporary(for: update), .temporary(for: company)]
        let request = SaveChangesRequest(insertedObjects: [
            node(temporaries[0], companyValues("A")),
            node(temporaries[1], update.initialSlots),
            node(alreadyPermanent, companyValues("B")),
            node(temporaries[2], companyValues("C")),
        ])
        let result = try stack.coordinator.save(request, in: nil)

        let inOrder = try #require(result.inserted?.permanentIDs)
        #expect(inOrder.count == 4)
        #expect(inOrder[2] == alreadyPermanent)
        #expect(inOrder.allSatisfy { !$0.isTemporaryID })
        #expect(inOrder.map(\.entity.name) == ["Company", "StockUpdate", "Company", "Company"])
        #expect(Set(inOrder).count == 4)
        // The mapping holds the temporary IDs only, each with its ID in order.
        #expect(result.permanentIDs == [temporaries[0]: inOrder[0], temporaries[1]: inOrder[1], temporaries[2]: inOrder[3]])

        // Each row is where its ID says.
        let context = stack.newContext()
        let symbols = try context.performAndWait {
            try [inOrder[0], inOrder[2], inOrder[3]].map { try context.existingObject(with: $0).value(forKey: "symbol") as? String }
        }
        #expect(symbols == ["A", "B", "C"])
    }

    @Test func savedObjectsTakeTheirIDsAndRelationshipsFollow() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let (companies, updates, earlyID) = try context.performAndWait {
            let companies = (0..<3).map { index in
                let company = Company(context: context)
                company.symbol = "S\(index)"
                return company
            }
            let updates = companies.map { company in
                let update = StockUpdate(context: context)
                update.company = company
                update.price = Double(company.symbol.dropFirst())!
                return update
            }
            // One object's ID is permanent before the save; the store keeps it.
            try context.obtainPermanentIDs(for: [companies[1]])
            let earlyID = companies[1].objectID
            try context.save()
            return (companies, updates, earlyID)
        }
        context.performAndWait {
            #expect(companies[1].objectID == earlyID)
            for object in companies + updates {
                #expect(!object.objectID.isTemporaryID)
                #expect(context.registeredObject(for: object.objectID) === object)
            }
            for (company, update) in zip(companies, updates) {
                #expect(update.company === company)
                #expect(update.slotValue(at: update.entity.propertiesByName["company"]!.index) == .object(company.objectID))
            }
        }
        let reader = stack.newContext()
        let read = try reader.performAndWait {
            try updates.map { update in
                let fetched = try reader.existingObject(with: update.objectID) as! StockUpdate
                return (fetched.price, fetched.company?.symbol)
            }
        }
        #expect(read.map(\.0) == [0, 1, 2])
        #expect(read.map(\.1) == ["S0", "S1", "S2"])
    }
}
