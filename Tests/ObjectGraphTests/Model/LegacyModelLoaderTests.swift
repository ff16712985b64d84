import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStores

/// Xcode 3 models, whose versions hold only the binary `elements` file: the two
/// of the fixture corpus load, and the stores they wrote open with them and
/// read back as SQLite holds them. The oracle is Apple's: the stores' tables,
/// columns, `Z_PRIMARYKEY` and `NSStoreModelVersionHashes` were written by Core
/// Data from these very models.
@Suite struct LegacyModelLoaderTests {
    static let recipesModel = "magicalrecord-recipes/Recipes.xcdatamodeld"
    static let twitterModel = "restkit-twitter-seed/RKTwitterCoreData.xcdatamodel"

    /// Each Xcode 3 model with the store Core Data wrote with it.
    static let pairs = [
        CoreDataFixtures.Manifest.Pair(store: "magicalrecord-recipes/stores/Recipes.sqlite", model: recipesModel),
        CoreDataFixtures.Manifest.Pair(store: "restkit-twitter-seed/stores/RKSeedDatabase.sqlite", model: twitterModel),
    ]

    // MARK: - Loading

    @Test func theCorpusHasThreeXcode3Models() {
        #expect(CoreDataFixtures.legacyBinaryModels.count == 3)
    }

    @Test(arguments: CoreDataFixtures.legacyBinaryModels)
    func everyXcode3ModelLoadsFromItsElementsFile(path: String) throws {
        let folder = CoreDataFixtures.url(path)
        let loaded = try XcodeModelLoader.load(folder)
        #expect(loaded.contentsURL == folder.appendingPathComponent("elements"))
        #expect(!loaded.model.entities.isEmpty)
        for entity in loaded.model.entities {
            #expect(!entity.properties.isEmpty, "\(entity.name) has no properties")
        }
        // The file itself loads too, as the same model.
        let direct = try ManagedObjectModel(contentsOf: folder.appendingPathComponent("elements"))
        #expect(ModelDifferences.between(loaded.model, direct).isEmpty)
    }

    @Test func theRecipesModelReadsAsItsEditorSavedIt() throws {
        let loaded = try XcodeModelLoader.load(CoreDataFixtures.url(Self.recipesModel))
        // .xccurrentversion names Recipes.xcdatamodel.
        #expect(loaded.contentsURL.deletingLastPathComponent().lastPathComponent == "Recipes.xcdatamodel")
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
        let model = loaded.model
        #expect(model.entitiesByName.mapValues { Set($0.propertiesByName.keys) } == [
            "Image": ["image", "recipe"],
            "Ingredient": ["amount", "displayOrder", "name", "recipe"],
            "Recipe": ["image", "ingredients", "instructions", "name", "overview", "prepTime", "thumbnailImage", "type"],
            "RecipeType": ["name", "recipes"],
        ])
        #expect(model.versionIdentifiers.isEmpty && model.configurations.isEmpty)
        let recipe = try #require(model.entitiesByName["Recipe"])
        let ingredient = try #require(model.entitiesByName["Ingredient"])
        #expect(recipe.managedObjectClassName == "Recipe")
        #expect(model.entitiesByName["RecipeType"]?.managedObjectClassName == "NSManagedObject")

        let thumbnail = try #require(recipe.attributesByName["thumbnailImage"])
        #expect(thumbnail.type == .transformable && thumbnail.valueTransformerName == "ImageToDataTransformer")
        #expect(model.entitiesByName["Image"]?.attributesByName["image"]?.type == .transformable)
        #expect(recipe.attributesByName["prepTime"]?.type == .string)
        let order = try #require(ingredient.attributesByName["displayOrder"])
        #expect(order.type == .integer16 && order.defaultValue == .integer(0) && !order.isOptional)
        let name = try #require(ingredient.attributesByName["name"])
        #expect(name.type == .string && name.defaultValue == .string("Ingredient Name") && !name.isOptional)
        #expect(ingredient.attributesByName["amount"]?.isOptional == true)

        let ingredients = try #require(recipe.relationshipsByName["ingredients"])
        #expect(ingredients.isToMany && !ingredients.isOrdered && ingredients.deleteRule == .cascade)
        #expect(ingredients.destinationEntity === ingredient && ingredients.inverseName == "recipe")
        #expect(ingredients.minCount == 0 && ingredients.maxCount == 0)
        let image = try #require(recipe.relationshipsByName["image"])
        #expect(!image.isToMany && image.deleteRule == .cascade && image.inverseName == "recipe")
        let owner = try #require(model.entitiesByName["Image"]?.relationshipsByName["recipe"])
        #expect(!owner.isToMany && !owner.isOptional && owner.deleteRule == .nullify)
        #expect(model.entitiesByName["RecipeType"]?.relationshipsByName["recipes"]?.inverseName == "type")
    }

    @Test func theTwitterModelReadsAsItsEditorSavedIt() throws {
        let loaded = try XcodeModelLoader.load(CoreDataFixtures.url(Self.twitterModel))
        let model = loaded.model
        let tweet = try #require(model.entitiesByName["Tweet"])
        let user = try #require(model.entitiesByName["User"])
        #expect(tweet.managedObjectClassName == "RKTweet")
        #expect(tweet.attributesByName.mapValues(\.type) == [
            "createdAt": .date, "inReplyToScreenName": .string, "isFavorited": .boolean, "statusID": .integer64,
            "text": .string, "urlString": .string,
        ])
        #expect(user.attributesByName.mapValues(\.type) == ["name": .string, "screenName": .string, "userID": .integer64])
        #expect(tweet.attributesByName["statusID"]?.defaultValue == .integer(0))
        let author = try #require(tweet.relationshipsByName["user"])
        #expect(!author.isToMany && author.destinationEntity === user && author.inverseName == "status")
        let statuses = try #require(user.relationshipsByName["status"])
        #expect(statuses.isToMany && statuses.destinationEntity === tweet && statuses.deleteRule == .nullify)

        // Xcode 3 gave every element Sync Services' user info: the strings load,
        // the dictionaries and arrays are one warning per element.
        #expect(tweet.userInfo == ["com.apple.syncservices.Syncable": "NO", "com.apple.syncservices.ExcludeFromDataChangeAlert": "NO"])
        #expect(tweet.attributesByName["text"]?.userInfo["com.apple.syncservices.Syncable"] == "NO")
        #expect(loaded.warnings.count == 2 + 11, "\(loaded.warnings)")
        #expect(loaded.warnings.allSatisfy { $0.contains("user info com.apple.syncservices.") && $0.contains("not strings") })
        #expect(loaded.warnings.allSatisfy { $0.hasPrefix(loaded.contentsURL.path + ": root.") })
    }

    @Test func bothRecipesVersionsAreTheSameModel() throws {
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url(Self.recipesModel))
        #expect(versions.keys.sorted() == ["Recipes", "Recipes 2"])
        let first = try ManagedObjectModel(contentsOf: try #require(versions["Recipes"]))
        let second = try ManagedObjectModel(contentsOf: try #require(versions["Recipes 2"]))
        let differences = ModelDifferences.between(first, second)
        #expect(differences.isEmpty, "\(differences)")
    }

    // MARK: - The stores they wrote

    @Test(arguments: pairs)
    func aStoreWrittenWithAnXcode3ModelReadsAsSQLiteHoldsIt(pair: CoreDataFixtures.Manifest.Pair) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(pair.store)
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(pair.model))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.isReadOnly = true
        try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
        let reference = try FixtureSQLite(path: storeURL.path, model: model)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let mismatches = try context.performAndWait {
            try StoreReadback.stringMismatches(in: context, with: reference)
                + StoreReadback.attributeMismatches(in: context, with: reference)
                + StoreReadback.relationshipMismatches(in: context, with: reference)
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) differences, first: \(mismatches.prefix(8).joined(separator: "; "))")
    }

    /// Every table's columns are the ones the model's entities make, with the
    /// types Core Data declares for them (the fixture README's table): the
    /// bookkeeping three, a column per persistent attribute and per to-one.
    @Test(arguments: pairs)
    func theModelMakesExactlyTheStoresTablesAndColumns(pair: CoreDataFixtures.Manifest.Pair) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(pair.store)
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(pair.model))
        let reference = try FixtureSQLite(path: storeURL.path, model: model)
        #expect(Set(try reference.primaryKeyTable().map(\.name)) == Set(model.entitiesByName.keys))
        for entity in model.entities {
            var expected = ["Z_PK": "INTEGER", "Z_ENT": "INTEGER", "Z_OPT": "INTEGER"]
            for property in entity.propertiesByName.values where !property.isTransient {
                let column = reference.column(for: property, in: entity)
                if let attribute = property as? AttributeDescription {
                    expected[column] = Self.declaredType[attribute.type]
                } else if let relationship = property as? RelationshipDescription, !relationship.isToMany {
                    expected[column] = "INTEGER"
                }
            }
            #expect(try reference.declaredTypes(of: reference.table(for: entity)) == expected, "\(entity.name)")
        }
    }

    /// The column type Core Data declares for each attribute type.
    static let declaredType: [AttributeType: String] = [
        .integer16: "INTEGER", .integer32: "INTEGER", .integer64: "INTEGER", .boolean: "INTEGER", .date: "TIMESTAMP",
        .double: "FLOAT", .float: "FLOAT", .decimal: "DECIMAL", .string: "VARCHAR", .uri: "VARCHAR",
        .binaryData: "BLOB", .uuid: "BLOB", .transformable: "BLOB",
    ]

    @Test(arguments: pairs)
    func theModelNamesTheEntitiesTheStoreKeepsVersionHashesFor(pair: CoreDataFixtures.Manifest.Pair) throws {
        let workspace = try FixtureWorkspace()
        let storeURL = try workspace.copyStore(pair.store)
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url(pair.model))
        let plist = try #require(try FixtureSQLite(path: storeURL.path, model: model).metadataRow().plist)
        let metadata = try #require(try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any])
        let hashes = try #require(metadata["NSStoreModelVersionHashes"] as? [String: Data])
        #expect(Set(hashes.keys) == Set(model.entityVersionHashesByName.keys))
        #expect(model.entityVersionHashesByName.values.allSatisfy { $0.count == 32 })
    }
}
