import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// The model layer: lookups, inheritance and slot layout, validation, freezing, version hashes.
@Suite struct ModelTests {
    // MARK: - Lookups

    @Test func entitiesAndPropertiesAreFoundByName() throws {
        let model = TestModel.make()
        #expect(model.entities.map(\.name) == ["Company", "StockUpdate"])
        let company = try #require(model.entitiesByName["Company"])
        let update = try #require(model.entitiesByName["StockUpdate"])
        #expect(model.entitiesByName["Nope"] == nil)

        #expect(company.propertiesByName.keys.sorted() == ["active", "employees", "founded", "name", "symbol", "updates"])
        #expect(company.attributesByName.keys.sorted() == ["active", "employees", "founded", "name", "symbol"])
        #expect(company.relationshipsByName.keys.sorted() == ["updates"])
        #expect(company.attributesByName["symbol"]?.type == .string)
        #expect(company.attributesByName["symbol"]?.isOptional == false)
        #expect(company.attributesByName["updates"] == nil)
        #expect(company.relationshipsByName["symbol"] == nil)

        let updates = try #require(company.relationshipsByName["updates"])
        #expect(updates.isToMany)
        #expect(updates.deleteRule == .cascade)
        #expect(updates.destinationEntity === update)
        #expect(updates.inverseRelationship === update.relationshipsByName["company"])
        #expect(update.relationshipsByName["company"]?.inverseRelationship === updates)
        #expect(updates.entity === company)
    }

    @Test func subentitiesInheritPropertiesInTheParentsSlots() throws {
        let model = EngineTestModel.make()
        let asset = try #require(model.entitiesByName["Asset"])
        let bond = try #require(model.entitiesByName["Bond"])
        let stock = try #require(model.entitiesByName["Stock"])

        #expect(asset.isAbstract)
        #expect(asset.subentities.map(\.name) == ["Bond", "Stock"])
        #expect(bond.superentity === asset)
        #expect(bond.rootEntity === asset)
        #expect(asset.rootEntity === asset)
        #expect(bond.isKind(of: asset))
        #expect(bond.isKind(of: bond))
        #expect(!asset.isKind(of: bond))
        #expect(!bond.isKind(of: stock))

        // The inherited property is the parent's own description, in slot 0 everywhere.
        #expect(bond.propertiesByName.keys.sorted() == ["coupon", "name"])
        #expect(stock.propertiesByName.keys.sorted() == ["name", "ticker"])
        #expect(bond.attributesByName["name"] === asset.attributesByName["name"])
        #expect(asset.propertiesByName["coupon"] == nil)
        #expect(bond.slotProperties.map(\.name) == ["name", "coupon"])
        #expect(stock.slotProperties.map(\.name) == ["name", "ticker"])
        #expect(asset.slotProperties.map(\.name) == ["name"])
        #expect(bond.slotProperties.map(\.index) == [0, 1])
        #expect(stock.slotProperties.map(\.index) == [0, 1])
    }

    @Test func slotsFollowDeclarationOrder() throws {
        let company = try #require(TestModel.make().entitiesByName["Company"])
        #expect(company.slotProperties.map(\.name) == ["symbol", "name", "employees", "founded", "active", "updates"])
        for (index, property) in company.slotProperties.enumerated() {
            #expect(property.index == index)
        }
    }

    // MARK: - Validation

    @Test func aConsistentModelValidates() throws {
        try TestModel.make().validate()
        try EngineTestModel.make().validate()
    }

    @Test func validateNamesAnUnknownDestination() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [RelationshipDescription(name: "boss", destination: "Person")]),
        ])
        let problems = try invalidModelProblems { try model.validate() }
        #expect(problems == ["Company.boss: no entity named Person"])
    }

    @Test func validateNamesAnUnknownInverse() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                RelationshipDescription(name: "staff", destination: "Person", inverse: "employer", isToMany: true),
            ]),
            EntityDescription(name: "Person", properties: [AttributeDescription(name: "employer", type: .string)]),
        ])
        let problems = try invalidModelProblems { try model.validate() }
        #expect(problems == ["Company.staff: Person has no relationship named employer"])
    }

    @Test func validateNamesDuplicateEntityAndPropertyNames() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "symbol", type: .string),
                AttributeDescription(name: "symbol", type: .integer32),
            ]),
            EntityDescription(name: "Company"),
        ])
        let problems = try invalidModelProblems { try model.validate() }
        #expect(problems.contains("Company has two properties named symbol"))
        #expect(problems.contains("two entities are named Company"))
    }

    @Test func validateNamesAPropertyThatRepeatsAnInheritedOne() throws {
        let parent = EntityDescription(name: "Asset", properties: [AttributeDescription(name: "name", type: .string)])
        let child = EntityDescription(name: "Bond", properties: [AttributeDescription(name: "name", type: .string)])
        parent.subentities = [child]
        let problems = try invalidModelProblems { try ManagedObjectModel(entities: [parent, child]).validate() }
        #expect(problems == ["Bond has two properties named name"])
    }

    @Test func validateNamesADefaultValueOfTheWrongType() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "employees", type: .integer16, defaultValue: .string("many")),
            ]),
        ])
        let problems = try invalidModelProblems { try model.validate() }
        #expect(problems.count == 1)
        #expect(problems[0].hasPrefix("Company.employees:"))
        #expect(problems[0].contains("a string"))
        #expect(problems[0].contains("integer16"))
    }

    @Test func validateNamesAnUnknownUniquenessKeyAndABadRegularExpression() throws {
        let code = AttributeDescription(name: "code", type: .string)
        code.regularExpression = "[unclosed"
        let company = EntityDescription(name: "Company", properties: [code])
        company.uniquenessConstraints = [["ticker"]]
        let problems = try invalidModelProblems { try ManagedObjectModel(entities: [company]).validate() }
        #expect(problems.contains("Company.code: the regular expression does not compile"))
        #expect(problems.contains("Company: the uniqueness constraint names ticker, which the entity does not have"))
    }

    @Test func validateRefusesNamesThatAreNotIdentifiers() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Bad Name", properties: [AttributeDescription(name: "value", type: .string)]),
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "x INTEGER); DROP TABLE Z_PRIMARYKEY; --", type: .string),
                AttributeDescription(name: "2fast", type: .string),
                AttributeDescription(name: "naïve_ok", type: .string),
            ]),
        ])
        let problems = try invalidModelProblems { try model.validate() }
        #expect(problems.count == 3)
        #expect(problems.contains { $0.contains("'Bad Name'") })
        #expect(problems.contains { $0.hasPrefix("Company.x INTEGER);") })
        #expect(problems.contains { $0.hasPrefix("Company.2fast") })

        // A store is never created from such a model.
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        _ = try invalidModelProblems { try coordinator.addPersistentStore(type: .sqlite, at: directory.file("Bad.sqlite")) }
        #expect(!FileManager.default.fileExists(atPath: directory.file("Bad.sqlite").path))
    }

    @Test func validateListsEveryProblemInOneError() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                RelationshipDescription(name: "boss", destination: "Person"),
                AttributeDescription(name: "size", type: .boolean, defaultValue: .integer(3)),
            ]),
        ])
        let error = #expect(throws: ObjectGraphError.self) { try model.validate() }
        guard error?.code == .invalidModel, let problems = error?.modelProblems else { Issue.record("expected invalidModel, got \(String(describing: error))"); return }
        #expect(problems.count == 2)
        let description = "\(try #require(error))"
        #expect(description.contains("Company.boss"))
        #expect(description.contains("Company.size"))
    }

    @Test func addingAStoreRefusesAnInvalidModelAndLeavesItEditable() throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [RelationshipDescription(name: "boss", destination: "Person")]),
        ])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        _ = try invalidModelProblems { try coordinator.addPersistentStore(type: .inMemory, at: nil) }
        #expect(!model.isFrozen)
        #expect(coordinator.persistentStores.isEmpty)

        // Fixed, the same model is accepted.
        model.entities.append(EntityDescription(name: "Person"))
        try coordinator.addPersistentStore(type: .inMemory, at: nil)
        #expect(model.isFrozen)
    }

    // MARK: - Freezing

    @Test(arguments: allStoreTypes)
    func addingAStoreFreezesTheModel(type: StoreType) throws {
        let model = TestModel.make()
        #expect(!model.isFrozen)
        let stack = try TestStack(type: type, model: model)
        #expect(model.isFrozen)
        // A frozen model still answers every lookup, and serves a second coordinator.
        #expect(model.entitiesByName["Company"]?.propertiesByName.count == 6)
        let second = PersistentStoreCoordinator(managedObjectModel: stack.model)
        try second.addPersistentStore(type: .inMemory, at: nil)
        #expect(model.isFrozen)
    }

    // MARK: - Version hashes

    @Test func versionHashesAreStable32ByteDigests() {
        let first = TestModel.make().entityVersionHashesByName
        let second = TestModel.make().entityVersionHashesByName
        #expect(first.keys.sorted() == ["Company", "StockUpdate"])
        #expect(first == second)
        for hash in first.values { #expect(hash.count == 32) }
        #expect(first["Company"] != first["StockUpdate"])
    }

    @Test func versionHashesDoNotDependOnPropertyOrder() throws {
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        let before = company.versionHash
        company.properties = company.properties.reversed()
        #expect(company.versionHash == before)
    }

    /// Each change to the Company entity that must show in its version hash.
    static let hashChanges: [(String, @Sendable (EntityDescription) -> Void)] = [
        ("attribute type", { $0.attributesByName["employees"]?.type = .integer64 }),
        ("optionality", { $0.attributesByName["name"]?.isOptional = false }),
        ("property name", { $0.attributesByName["name"]?.name = "title" }),
        ("added property", { $0.properties.append(AttributeDescription(name: "sector", type: .string)) }),
        ("removed property", { entity in entity.properties.removeAll { $0.name == "founded" } }),
        ("transient", { $0.attributesByName["name"]?.isTransient = true }),
        ("relationship cardinality", { $0.relationshipsByName["updates"]?.isToMany = false }),
        ("hash modifier", { $0.versionHashModifier = "v2" }),
    ]

    @Test(arguments: hashChanges.indices)
    func versionHashChangesWhenTheEntityChanges(change: Int) throws {
        let original = TestModel.make().entityVersionHashesByName
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        Self.hashChanges[change].1(company)
        let changed = model.entityVersionHashesByName
        #expect(changed["Company"] != original["Company"], "\(Self.hashChanges[change].0)")
        #expect(changed["Company"]?.count == 32)
        #expect(changed["StockUpdate"] == original["StockUpdate"])
    }

    // MARK: - Helpers

    /// The problems of the `invalidModel` error `body` must throw.
    private func invalidModelProblems(_ body: () throws -> Void) throws -> [String] {
        let error = #expect(throws: ObjectGraphError.self) { try body() }
        guard error?.code == .invalidModel, let problems = error?.modelProblems else {
            Issue.record("expected invalidModel, got \(String(describing: error))")
            return []
        }
        return problems
    }
}
