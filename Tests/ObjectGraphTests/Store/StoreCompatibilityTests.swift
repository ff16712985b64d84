import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A model whose columns have the store's names but not its types, or whose
/// attributes differ in optionality, is refused with an error that names the
/// entity, the property and how they differ, instead of reading wrong values.
@Suite struct StoreCompatibilityTests {
    /// The test model with one of Company's attributes replaced.
    private func model(replacing name: String, with attribute: AttributeDescription?) throws -> ManagedObjectModel {
        let model = TestModel.make()
        // Unbound: the test classes declare the original attributes, and a
        // coordinator refuses a class that disagrees with its entity before
        // it looks at the store.
        for entity in model.entities { entity.managedObjectClass = ManagedObject.self }
        let company = try #require(model.entitiesByName["Company"])
        let index = try #require(company.properties.firstIndex { $0.name == name })
        if let attribute {
            company.properties[index] = attribute
        } else {
            company.properties.remove(at: index)
        }
        return model
    }

    private func openError(_ url: URL, model: ManagedObjectModel, options: StoreOptions = StoreOptions()) -> PersistentStoreError? {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        }
        #expect(coordinator.persistentStores.isEmpty)
        return error
    }

    // MARK: - Column types

    @Test func anIntegerColumnDeclaredAsADateIsRefused() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = try model(replacing: "employees", with: AttributeDescription(name: "employees", type: .date, isOptional: false,
                                                                                defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))))
        let error = openError(url, model: model)
        #expect(error?.code == .incompatibleModel)
        #expect(error?.url?.path == url.path)
        #expect(error?.message.contains("entity Company, attribute employees: the store has INTEGER, the model says Date") == true,
                "\(error.map { "\($0)" } ?? "")")
        try expectStoreIntact(at: url)
    }

    @Test(arguments: [
        (AttributeType.string, "VARCHAR", "String"),
        (.double, "VARCHAR", "Double"),
        (.binaryData, "VARCHAR", "Binary Data"),
        (.integer64, "VARCHAR", "Integer 64"),
        (.uuid, "VARCHAR", "UUID"),
    ] as [(AttributeType, String, String)])
    func everyMismatchOfDeclaredTypeIsRefused(type: AttributeType, storeType: String, modelName: String) throws {
        // `name` is a VARCHAR column; a String attribute matches it and opens.
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = try model(replacing: "name", with: AttributeDescription(name: "name", type: type))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        if type == .string {
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            return
        }
        let error = openError(url, model: model)
        #expect(error?.message.contains("entity Company, attribute name: the store has \(storeType), the model says \(modelName)") == true,
                "\(error.map { "\($0)" } ?? "")")
    }

    // MARK: - The set of columns

    @Test func aModelMissingAColumnTheStoreHasIsRefused() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let error = openError(url, model: try model(replacing: "name", with: nil))
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company: the store has a column ZNAME that the model has no property for") == true,
                "\(error.map { "\($0)" } ?? "")")
        try expectStoreIntact(at: url)
    }

    @Test func aModelWithAnAttributeTheStoreLacksIsRefused() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = TestModel.make()
        try #require(model.entitiesByName["Company"]).properties.append(AttributeDescription(name: "sector", type: .string))
        let error = openError(url, model: model)
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("Company.sector has no column ZSECTOR in ZCOMPANY") == true)
        try expectStoreIntact(at: url)
    }

    // MARK: - Optionality (stores written here carry comparable version hashes)

    @Test func anOptionalAttributeMadeRequiredIsRefused() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = try model(replacing: "name", with: AttributeDescription(name: "name", type: .string, isOptional: false,
                                                                           defaultValue: .string("")))
        let error = openError(url, model: model)
        #expect(error?.code == .incompatibleModel)
        #expect(error?.message.contains("entity Company, attribute name: the store was written with optional String, the model says required String") == true,
                "\(error.map { "\($0)" } ?? "")")
        try expectStoreIntact(at: url)
    }

    @Test func aRequiredAttributeMadeOptionalIsRefused() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = try model(replacing: "symbol", with: AttributeDescription(name: "symbol", type: .string))
        let error = openError(url, model: model)
        #expect(error?.message.contains("entity Company, attribute symbol: the store was written with required String, the model says optional String") == true,
                "\(error.map { "\($0)" } ?? "")")
    }

    @Test func anOptionalityChangeMigratesWithLightweightMigration() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = try model(replacing: "name", with: AttributeDescription(name: "name", type: .string, isOptional: false,
                                                                           defaultValue: .string("unnamed")))
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        #expect(try RawStore.texts(url, "SELECT ZNAME FROM ZCOMPANY") == ["unnamed"])
        // Migrated, the store now opens with the new model without migrating again.
        let again = PersistentStoreCoordinator(managedObjectModel: try self.model(
            replacing: "name", with: AttributeDescription(name: "name", type: .string, isOptional: false, defaultValue: .string("unnamed"))))
        try again.addPersistentStore(type: .sqlite, at: url)
    }

    @Test func theSameModelBuiltAgainOpensTheStore() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        try expectStoreIntact(at: url)
        try expectStoreIntact(at: url)
    }
}
