import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// The people model's four versions and a staged migration manager through
/// them (see ``StagedMigrationContractTests``), each chain with model objects
/// of its own (a model freezes once a coordinator uses it) and a record of
/// what its handlers saw.
final class PeopleChain: Sendable {
    /// Versions 1 … 4, oldest first.
    let versions: [ManagedObjectModel]
    let manager: StagedMigrationManager
    /// What the handlers saw, in order: "willMigrate: model 2, privateQueue", "didMigrate: model 3".
    let seen = SharedValue<[String]>([])
    /// Each person's fullName by personID, kept by `willMigrate` for `didMigrate`.
    let fullNames = SharedValue<[String: String]>([:])

    struct HandlerError: Error, CustomStringConvertible {
        var description: String { "the people are not ready" }
    }

    /// - Parameters:
    ///   - failure: how the custom stage fails: "throws in willMigrate",
    ///     "throws in didMigrate" (each after saving a change), "has no
    ///     didMigrate" (which leaves firstName and lastName empty); nil for a stage that succeeds.
    ///   - beforeWillMigrate: what the custom stage's `willMigrate` does first.
    init(failure: String? = nil, beforeWillMigrate: (@Sendable () throws -> Void)? = nil) {
        let versions = (1...4).map { Self.people(version: $0) }
        self.versions = versions
        let seen = self.seen, fullNames = self.fullNames
        let willMigrate: MigrationStage.Handler = { context in
            try beforeWillMigrate?()
            let model = context.persistentStoreCoordinator?.managedObjectModel
            seen.withLock { $0.append("willMigrate: model \(model === versions[1] ? "2" : "?"), \(context.concurrencyType == .privateQueue ? "privateQueue" : "?")") }
            for (id, name) in try Self.readNames(context) { fullNames.withLock { $0[id] = name } }
            // Writes too: a nickname, from the first name, for those without one (saved when the handler returns).
            for person in try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
                guard try person.value(forKey: "nickname") == nil else { continue }
                let fullName = try person.value(forKey: "fullName") as? String ?? ""
                try person.setValue(fullName.split(separator: " ").first.map { $0.lowercased() }, forKey: "nickname")
            }
            if failure == "throws in willMigrate" {
                try context.save()
                throw HandlerError()
            }
        }
        let didMigrate: MigrationStage.Handler = { context in
            let model = context.persistentStoreCoordinator?.managedObjectModel
            seen.withLock { $0.append("didMigrate: model \(model === versions[2] ? "3" : "?")") }
            for person in try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
                let id = try person.value(forKey: "personID") as? String ?? ""
                let words = (fullNames.withLock { $0[id] } ?? "").split(separator: " ")
                try person.setValue(words.first.map(String.init), forKey: "firstName")
                try person.setValue(words.dropFirst().joined(separator: " "), forKey: "lastName")
            }
            if failure == "throws in didMigrate" {
                try context.save()
                throw HandlerError()
            }
        }
        manager = StagedMigrationManager(stages: [
            .lightweight([versions[0], versions[1]]),
            .custom(from: versions[1], to: versions[2], label: "split names", willMigrate: willMigrate,
                    didMigrate: failure == "has no didMigrate" ? nil : didMigrate),
            .lightweight([versions[2], versions[3]]),
        ])
    }

    /// `migratesAutomatically` with the chain's manager.
    var options: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.stagedMigrationManager = manager
        return options
    }

    /// Each person's fullName by personID (a version 2 context).
    @discardableResult
    static func readNames(_ context: ManagedObjectContext) throws -> [String: String] {
        var names: [String: String] = [:]
        for person in try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
            names[try person.value(forKey: "personID") as? String ?? ""] = try person.value(forKey: "fullName") as? String
        }
        return names
    }

    /// Version 1: Person(personID, fullName required, nickname); 2 adds email;
    /// 3 replaces fullName with firstName and lastName, both required without
    /// a default (lightweight migration cannot fill them); 4 adds visits,
    /// required with default 0.
    static func people(version: Int) -> ManagedObjectModel {
        var properties: [PropertyDescription] = [
            AttributeDescription(name: "personID", type: .string, isOptional: false),
            AttributeDescription(name: "nickname", type: .string),
        ]
        if version < 3 {
            properties.append(AttributeDescription(name: "fullName", type: .string, isOptional: false))
        } else {
            properties += [
                AttributeDescription(name: "firstName", type: .string, isOptional: false),
                AttributeDescription(name: "lastName", type: .string, isOptional: false),
            ]
        }
        if version >= 2 { properties.append(AttributeDescription(name: "email", type: .string)) }
        if version >= 4 { properties.append(AttributeDescription(name: "visits", type: .integer32, isOptional: false, defaultValue: .integer(0))) }
        return ManagedObjectModel(entities: [EntityDescription(name: "Person", properties: properties)])
    }

    /// A people model none of the chain's versions is: Person(personID, age).
    static func stranger() -> ManagedObjectModel {
        ManagedObjectModel(entities: [EntityDescription(name: "Person", properties: [
            AttributeDescription(name: "personID", type: .string, isOptional: false),
            AttributeDescription(name: "age", type: .integer32),
        ])])
    }
}

/// A value the handlers of a stage share with each other and the test, as an
/// app captures one in both handlers to carry values across the schema change.
final class SharedValue<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) {
        storage = Mutex(value)
    }

    func withLock<Result: Sendable>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock { try body(&$0) }
    }
}

extension StagedMigrationContractTests {
    /// The seeded people, by personID: fullName and nickname (version 1).
    static let seededPeople: [(id: String, fullName: String, nickname: String?)] = [
        ("p1", "Ada Lovelace", nil),
        ("p2", "Alan Turing", "turing"),
        ("p3", "Grace Brewster Hopper", nil),
    ]

    /// A person as version 4 reads it.
    struct PersonRow: Equatable, CustomStringConvertible {
        var personID: String?
        var firstName: String?
        var lastName: String?
        var nickname: String?
        var visits: Int?

        var description: String {
            "\(personID ?? "nil") \(firstName ?? "nil")|\(lastName ?? "nil") (\(nickname ?? "nil")) visits=\(visits.map(String.init) ?? "nil")"
        }
    }

    /// The seeded people after the chain: names split, nicknames filled in, visits 0.
    static let splitPeople = [
        PersonRow(personID: "p1", firstName: "Ada", lastName: "Lovelace", nickname: "ada", visits: 0),
        PersonRow(personID: "p2", firstName: "Alan", lastName: "Turing", nickname: "turing", visits: 0),
        PersonRow(personID: "p3", firstName: "Grace", lastName: "Brewster Hopper", nickname: "grace", visits: 0),
    ]

    /// A new store with ``seededPeople`` saved with version 1; its coordinator is closed.
    func seedPeople(_ kind: StoreKind, options: StoreOptions = StoreOptions()) throws -> URL {
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(PeopleChain.people(version: 1), at: location, options: options)
        let context = makeContext(coordinator)
        context.transactionAuthor = "seeder"
        try context.performAndWait {
            let entity = try #require(coordinator.managedObjectModel.entitiesByName["Person"])
            for seeded in Self.seededPeople {
                let person = ManagedObject(entity: entity, insertInto: context)
                try person.setValue(seeded.id, forKey: "personID")
                try person.setValue(seeded.fullName, forKey: "fullName")
                try person.setValue(seeded.nickname, forKey: "nickname")
            }
            try context.save()
        }
        try close(coordinator)
        return location
    }

    /// The people, by personID, as version 4 (or 3: no visits) reads them.
    func people(in context: ManagedObjectContext) throws -> [PersonRow] {
        try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Person", predicate: nil, sortDescriptors: [FetchSort(key: "personID")])
            let hasVisits = context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Person"]?.propertiesByName["visits"] != nil
            return try context.fetch(request).map { person in
                PersonRow(personID: try person.value(forKey: "personID") as? String,
                          firstName: try person.value(forKey: "firstName") as? String,
                          lastName: try person.value(forKey: "lastName") as? String,
                          nickname: try person.value(forKey: "nickname") as? String,
                          visits: hasVisits ? try person.value(forKey: "visits") as? Int : 0)
            }
        }
    }

    /// Opens the store with version 1 and no options and checks that every
    /// seeded row is there as it was: what a failed migration must leave.
    func expectPeopleUnchanged(_ kind: StoreKind, at location: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let coordinator = try kind.coordinator(PeopleChain.people(version: 1), at: location)
        let context = makeContext(coordinator)
        let rows = try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Person", predicate: nil, sortDescriptors: [FetchSort(key: "personID")])
            return try context.fetch(request).map { person in
                "\(try person.value(forKey: "personID") as? String ?? "nil") \(try person.value(forKey: "fullName") as? String ?? "nil") "
                    + "\(try person.value(forKey: "nickname") as? String ?? "nil")"
            }
        }
        #expect(rows == Self.seededPeople.map { "\($0.id) \($0.fullName) \($0.nickname ?? "nil")" }, sourceLocation: sourceLocation)
        try close(coordinator)
    }

    // MARK: - Helpers

    func close(_ coordinator: PersistentStoreCoordinator) throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    func makeContext(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    /// Opens with `model` and `options` and expects a `PersistentStoreError`;
    /// returns it, or nil (recorded as an issue) when the open succeeded or threw something else.
    func expectRefusal(_ kind: StoreKind, _ model: ManagedObjectModel, at location: URL, options: StoreOptions,
                       sourceLocation: SourceLocation = #_sourceLocation) -> PersistentStoreError? {
        do {
            let coordinator = try kind.coordinator(model, at: location, options: options)
            Issue.record("the store opened but was expected to be refused", sourceLocation: sourceLocation)
            // The test has already failed; a store that does not close adds nothing.
            try? close(coordinator)
            return nil
        } catch let error as PersistentStoreError {
            return error
        } catch {
            Issue.record("expected a PersistentStoreError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }
}
