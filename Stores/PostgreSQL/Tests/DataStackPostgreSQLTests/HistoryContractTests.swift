import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// What persistent history records of an update, on the SQLite store and the
/// PostgreSQL store alike: the properties whose values changed (Core Data's
/// `updatedProperties`), not every property the save wrote.
@Suite("History contract", .serialized)
struct HistoryContractTests {
    private struct Fixture {
        let coordinator: PersistentStoreCoordinator
        let context: ManagedObjectContext
        let acme: ManagedObject
        let tick: ManagedObject
        let dow: ManagedObject
    }

    private func fixture(_ kind: StoreKind) throws -> Fixture {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let model = StoreTestModel.make()
        let coordinator = try kind.coordinator(model, at: try kind.makeLocation(), options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let (acme, tick, dow) = try context.performAndWait {
            let entities = model.entitiesByName
            let acme = ManagedObject(entity: try #require(entities["Company"]), insertInto: context)
            try acme.setValue("ACME", forKey: "symbol")
            try acme.setValue("Acme", forKey: "name")
            let tick = ManagedObject(entity: try #require(entities["StockUpdate"]), insertInto: context)
            try tick.setValue(1.5, forKey: "price")
            try tick.setValue(acme, forKey: "company")
            let dow = ManagedObject(entity: try #require(entities["MarketIndex"]), insertInto: context)
            try dow.setValue("Dow", forKey: "name")
            try context.save()
            return (acme, tick, dow)
        }
        return Fixture(coordinator: coordinator, context: context, acme: acme, tick: tick, dow: dow)
    }

    /// Saves what `change` does and returns each updated object's updatedProperties, by entity name.
    private func updates(_ fixture: Fixture, _ change: @escaping () throws -> Void) throws -> [String: Set<String>] {
        let token = try #require(try fixture.coordinator.currentPersistentHistoryToken())
        try fixture.context.performAndWait {
            try change()
            try fixture.context.save()
        }
        let transactions = try fixture.coordinator.fetchHistory(.fetchHistory(after: token))
        #expect(transactions.count == 1)
        var result: [String: Set<String>] = [:]
        for change in transactions.flatMap({ $0.changes ?? [] }) where change.changeType == .update {
            result[change.changedObjectID.entity.name] = change.updatedProperties ?? []
        }
        return result
    }

    @Test("an update records the attributes whose values changed, not those set to the value they had", arguments: StoreKind.allCases)
    func changedAttributes(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        #expect(try updates(fixture) {
            try fixture.acme.setValue("Acme Corporation", forKey: "name")
            try fixture.acme.setValue("ACME", forKey: "symbol")   // the value it had
        } == ["Company": ["name"]])
        #expect(try updates(fixture) {
            try fixture.acme.setValue(12, forKey: "employees")
            try fixture.acme.setValue(Date(timeIntervalSinceReferenceDate: 10), forKey: "founded")
        } == ["Company": ["employees", "founded"]])
    }

    @Test("a to-one moved is recorded on its object, and a loaded to-many unchanged is not", arguments: StoreKind.allCases)
    func relationships(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let globex = try fixture.context.performAndWait {
            let globex = ManagedObject(entity: try #require(fixture.coordinator.managedObjectModel.entitiesByName["Company"]),
                                       insertInto: fixture.context)
            try globex.setValue("GLBX", forKey: "symbol")
            try fixture.context.save()
            return globex
        }
        // Moving the update changes its company and both companies' updates.
        #expect(try updates(fixture) {
            try fixture.tick.setValue(globex, forKey: "company")
        } == ["StockUpdate": ["company"], "Company": ["updates"]])

        // The updates of ACME loaded (now empty, as stored) and its name changed: only the name.
        #expect(try updates(fixture) {
            _ = try fixture.acme.value(forKey: "updates")
            try fixture.acme.setValue("Acme again", forKey: "name")
        } == ["Company": ["name"]])

        // A many-to-many member added: both sides' relationships.
        #expect(try updates(fixture) {
            try fixture.dow.setValue(Set([fixture.acme]), forKey: "members")
        } == ["MarketIndex": ["members"], "Company": ["indexes"]])
    }
}
