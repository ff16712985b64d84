import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

// The fixtures of the migration contract: its options, the inventory model
// most scenarios change, and the checks that a refused migration lost nothing.
extension MigrationContractTests {
    // MARK: - Options

    static var migrating: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        return options
    }

    // MARK: - Inventory: Gadget → Depot

    /// Version 1 of the inventory: Gadget (to-one `depot`) ↔ Depot (to-many
    /// `gadgets`). `edit` changes Gadget to make a version 2.
    static func inventory(_ edit: (EntityDescription) -> Void = { _ in }) -> ManagedObjectModel {
        let gadget = EntityDescription(name: "Gadget", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
            AttributeDescription(name: "quantity", type: .integer16),
            AttributeDescription(name: "weight", type: .integer64),
            AttributeDescription(name: "serial", type: .string),
            AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "depot", destination: "Depot", inverse: "gadgets"),
        ])
        edit(gadget)
        let depot = EntityDescription(name: "Depot", properties: [
            AttributeDescription(name: "city", type: .string, isOptional: false),
            RelationshipDescription(name: "gadgets", destination: "Gadget", inverse: "depot", isToMany: true),
        ])
        return ManagedObjectModel(entities: [gadget, depot])
    }

    /// Version 2 with three new attributes: `color` (optional, no default),
    /// `stock` (required, default 7) and `origin` (optional, default "unknown").
    static func inventoryWithNewAttributes() -> ManagedObjectModel {
        inventory { gadget in
            gadget.properties += [
                AttributeDescription(name: "color", type: .string),
                AttributeDescription(name: "stock", type: .integer32, isOptional: false, defaultValue: .integer(7)),
                AttributeDescription(name: "origin", type: .string, defaultValue: .string("unknown")),
            ]
        }
    }

    /// A gadget as read back: every version 1 attribute and its depot's city.
    struct GadgetRow: Equatable, CustomStringConvertible {
        var name: String?
        var quantity: Int?
        var weight: Int?
        var serial: String?
        var label: String?
        var depot: String?

        var description: String {
            "\(name ?? "nil") q=\(quantity.map(String.init) ?? "nil") w=\(weight.map(String.init) ?? "nil") "
                + "s=\(serial ?? "nil") l=\(label ?? "nil") @\(depot ?? "nil")"
        }
    }

    /// The seeded gadgets, sorted by name: an Integer 16 near its top and a
    /// negative one, an Integer 64 beyond Integer 16, NULLs in each optional column.
    static let seededGadgets = [
        GadgetRow(name: "bolt", quantity: 5, weight: 100_000, serial: "S-1", label: "red", depot: "Oslo"),
        GadgetRow(name: "gear", quantity: 32_000, weight: nil, serial: nil, label: "blue", depot: "Lima"),
        GadgetRow(name: "nut", quantity: -300, weight: 20, serial: "S-2", label: nil, depot: "Oslo"),
    ]

    /// A seeded store and the primary keys its objects were saved with.
    struct Seeded {
        var location: URL
        var gadgetKeys: Set<Int64>
        var depotKeys: Set<Int64>
    }

    /// Saves ``seededGadgets`` and two depots (Oslo, Lima) with version 1, then
    /// removes the store from its coordinator.
    func seedInventory(_ kind: StoreKind, options: StoreOptions = StoreOptions()) throws -> Seeded {
        let model = Self.inventory()
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(model, at: location, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.transactionAuthor = "seeder"
        let keys = try context.performAndWait {
            let entities = model.entitiesByName
            var depots: [String: ManagedObject] = [:]
            for city in ["Oslo", "Lima"] {
                let depot = ManagedObject(entity: try #require(entities["Depot"]), insertInto: context)
                try depot.setValue(city, forKey: "city")
                depots[city] = depot
            }
            var gadgets: [ManagedObject] = []
            for row in Self.seededGadgets {
                let gadget = ManagedObject(entity: try #require(entities["Gadget"]), insertInto: context)
                try gadget.setValue(row.name, forKey: "name")
                try gadget.setValue(row.quantity, forKey: "quantity")
                try gadget.setValue(row.weight, forKey: "weight")
                try gadget.setValue(row.serial, forKey: "serial")
                try gadget.setValue(row.label, forKey: "label")
                try gadget.setValue(row.depot.flatMap { depots[$0] }, forKey: "depot")
                gadgets.append(gadget)
            }
            try context.save()
            return (Set(gadgets.compactMap(\.objectID.primaryKey)), Set(depots.values.compactMap(\.objectID.primaryKey)))
        }
        try close(coordinator)
        #expect(keys.0.count == 3 && keys.1.count == 2, "the seeded objects have permanent keys")
        return Seeded(location: location, gadgetKeys: keys.0, depotKeys: keys.1)
    }

    /// The gadgets, sorted by name, with their version 1 attributes.
    func gadgets(in context: ManagedObjectContext) throws -> [GadgetRow] {
        try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Gadget", predicate: nil, sortDescriptors: [FetchSort(key: "name")])
            return try context.fetch(request).map { gadget in
                GadgetRow(name: try gadget.value(forKey: "name") as? String,
                          quantity: try gadget.value(forKey: "quantity") as? Int,
                          weight: try gadget.value(forKey: "weight") as? Int,
                          serial: try gadget.value(forKey: "serial") as? String,
                          label: try gadget.value(forKey: "label") as? String,
                          depot: try (gadget.value(forKey: "depot") as? ManagedObject)?.value(forKey: "city") as? String)
            }
        }
    }

    /// The depots' cities, each with its gadgets' names, sorted.
    func depots(in context: ManagedObjectContext) throws -> [String: [String]] {
        try context.performAndWait {
            var result: [String: [String]] = [:]
            for depot in try context.fetch(FetchRequest<ManagedObject>(entityName: "Depot")) {
                let city = try #require(try depot.value(forKey: "city") as? String)
                let gadgets = try #require(try depot.value(forKey: "gadgets") as? Set<ManagedObject>)
                result[city] = try gadgets.compactMap { try $0.value(forKey: "name") as? String }.sorted()
            }
            return result
        }
    }

    static let seededDepots = ["Oslo": ["bolt", "nut"], "Lima": ["gear"]]

    /// Opens the store with version 1 and no options and checks that every
    /// seeded row is there with its values: what a refused migration must leave.
    func expectInventoryUnchanged(_ kind: StoreKind, at location: URL,
                                          sourceLocation: SourceLocation = #_sourceLocation) throws {
        let coordinator = try kind.coordinator(Self.inventory(), at: location)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        #expect(try gadgets(in: context) == Self.seededGadgets, "the version 1 rows are as they were", sourceLocation: sourceLocation)
        #expect(try depots(in: context) == Self.seededDepots, "the version 1 relationships are as they were", sourceLocation: sourceLocation)
        try close(coordinator)
    }

    // MARK: - Helpers

    /// Removes every store from `coordinator`: its connections close, as when an app drops it.
    func close(_ coordinator: PersistentStoreCoordinator) throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    func makeContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    func count(_ entity: String, in context: ManagedObjectContext) throws -> Int {
        try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: entity)) }
    }

    /// Opens with `model` and migration options and expects a `PersistentStoreError`;
    /// returns it, or nil (recorded as an issue) when the open succeeded or threw something else.
    func expectRefusal(_ kind: StoreKind, _ model: ManagedObjectModel, at location: URL,
                               options: StoreOptions = MigrationContractTests.migrating,
                               sourceLocation: SourceLocation = #_sourceLocation) -> PersistentStoreError? {
        do {
            let coordinator = try kind.coordinator(model, at: location, options: options)
            Issue.record("the store opened with \(coordinator.persistentStores.count) store(s) but was expected to be refused",
                         sourceLocation: sourceLocation)
            try? close(coordinator)
            return nil
        } catch let error as PersistentStoreError {
            return error
        } catch {
            Issue.record("expected a PersistentStoreError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Opening the seeded store with `model` and `options` is refused with
    /// `code`, in a message that names each of `words`.
    func expectRefused(_ kind: StoreKind, _ model: ManagedObjectModel, at location: URL,
                       options: StoreOptions = MigrationContractTests.migrating, code: PersistentStoreError.Code,
                       naming words: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let error = try #require(expectRefusal(kind, model, at: location, options: options, sourceLocation: sourceLocation),
                                 sourceLocation: sourceLocation)
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(words.allSatisfy(error.message.contains), "the message names \(words): \(error)", sourceLocation: sourceLocation)
    }
}

extension EntityDescription {
    /// Replaces the property called `name` with `property` (for a version 2 of a model).
    func replaceProperty(named name: String, with property: PropertyDescription) {
        properties = properties.map { $0.name == name ? property : $0 }
    }
}
