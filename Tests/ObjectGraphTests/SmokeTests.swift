import Foundation
import Testing
import ObjectGraph
import DataStackStores

@Suite struct SmokeTests {
    @Test(arguments: [StoreType.sqlite, .inMemory])
    func insertSaveFetch(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let acme = Company(context: context)
            acme.symbol = "ACME"
            acme.employees = 12
            let update = StockUpdate(context: context)
            update.price = 10.5
            update.company = acme
            #expect(acme.updates.count == 1)
            try context.save()
            #expect(!acme.objectID.isTemporaryID)
        }
        let other = stack.newContext()
        try other.performAndWait {
            let companies = try other.fetch(FetchRequest<Company>())
            #expect(companies.count == 1)
            #expect(companies[0].isFault)
            #expect(companies[0].symbol == "ACME")
            #expect(companies[0].employees == 12)
            #expect(companies[0].updates.first?.price == 10.5)
        }
    }
}
