import Foundation
import ObjectGraph
import DataStackStores

/// The stock-ticker model the engine tests share: companies with price updates.
final class Company: ManagedObject {
    @Managed var symbol: String
    @Managed var name: String?
    @Managed var employees: Int
    @Managed var founded: Date?
    @Managed var active: Bool
    @Managed var updates: Set<StockUpdate>
}

final class StockUpdate: ManagedObject {
    @Managed var price: Double
    @Managed var volume: Int64
    @Managed var time: Date
    @Managed var company: Company?
}

enum TestModel {
    /// A fresh model each call: a model freezes once a coordinator uses it.
    static func make() -> ManagedObjectModel {
        let company = EntityDescription(name: "Company", managedObjectClass: Company.self, properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "employees", type: .integer32, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "founded", type: .date),
            AttributeDescription(name: "active", type: .boolean, isOptional: false, defaultValue: .bool(true)),
            RelationshipDescription(name: "updates", destination: "StockUpdate", inverse: "company",
                                    isToMany: true, deleteRule: .cascade),
        ])
        let update = EntityDescription(name: "StockUpdate", managedObjectClass: StockUpdate.self, properties: [
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "time", type: .date, isOptional: false, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            RelationshipDescription(name: "company", destination: "Company", inverse: "updates", deleteRule: .nullify),
        ])
        return ManagedObjectModel(entities: [company, update])
    }
}

/// A temporary folder, removed when the value is deinitialized.
///
/// The folder is made on first use, not at initialization: an in-memory
/// ``TestStack`` never uses it, and an exit test's child process, which ends
/// in a trap without running deinitializers, would leave it behind.
final class TemporaryDirectory {
    private let location = FileManager.default.temporaryDirectory.appendingPathComponent("DataStackTests-\(UUID().uuidString)")

    var url: URL {
        // Creating a folder that exists is not an error; a test that cannot
        // create it fails at its first file operation, naming the path.
        try? FileManager.default.createDirectory(at: location, withIntermediateDirectories: true)
        return location
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    deinit { try? FileManager.default.removeItem(at: location) }
}

/// A coordinator with one store of the given type, and a private-queue context on it.
struct TestStack {
    let directory = TemporaryDirectory()
    let model: ManagedObjectModel
    let coordinator: PersistentStoreCoordinator
    var storeURL: URL { directory.file("Test.sqlite") }

    init(type: StoreType = .sqlite, model: ManagedObjectModel = TestModel.make()) throws {
        self.model = model
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: type, at: type == .inMemory ? nil : storeURL)
    }

    func newContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }
}
