import Foundation
import Testing
import ObjectGraph
import DataStackStores

@Suite struct AffectedStoresTests {
    @Test func fetchSearchesOnlyTheAffectedStores() throws {
        let model = TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let first = try coordinator.addPersistentStore(type: .inMemory, at: nil)
        let second = try coordinator.addPersistentStore(type: .inMemory, at: nil)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for index in 0..<3 {
                let company = Company(context: context)
                company.symbol = "S\(index)"
            }
            try context.save()   // new objects go to the first store that holds their entity
            var request = FetchRequest<Company>()
            #expect(try context.count(for: request) == 3)
            request.affectedStores = [second]
            #expect(try context.count(for: request) == 0)
            request.affectedStores = [first]
            #expect(try context.fetch(request).count == 3)
        }
    }
}
