import DataStackStores
import Foundation
import ObjectGraph
import Testing

/// Three fixture models declared as classes (``DeclaredFixtureClasses``) equal
/// the models loaded from their Xcode files, property by property and hash by
/// hash, and open the stores Apple's Core Data wrote with them.
@Suite struct ClassDeclaredFixtureTests {
    static let sampleModel = "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"
    static let bookmarksModel = "ddg-bookmarks/BookmarksModel.xcdatamodeld/BookmarksModel 5.xcdatamodel"
    static let sample2Model = "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel2.xcdatamodel"

    /// Every difference between two models, as `Entity.property: field a ≠ b`.
    /// `ignoring` lists `Entity.property.field`s known to differ.
    static func differences(_ declared: ManagedObjectModel, _ loaded: ManagedObjectModel, ignoring: Set<String> = []) -> [String] {
        var found: [String] = []
        func compare<T: Equatable>(_ place: String, _ field: String, _ a: T, _ b: T) {
            if a != b && !ignoring.contains("\(place).\(field)") { found.append("\(place): \(field) \(a) ≠ \(b)") }
        }
        let names = Set(declared.entitiesByName.keys).union(loaded.entitiesByName.keys)
        for name in names.sorted() {
            guard let a = declared.entitiesByName[name], let b = loaded.entitiesByName[name] else {
                found.append("\(name): in one model only")
                continue
            }
            compare(name, "isAbstract", a.isAbstract, b.isAbstract)
            compare(name, "superentity", a.superentity?.name, b.superentity?.name)
            compare(name, "subentities", Set(a.subentities.map(\.name)), Set(b.subentities.map(\.name)))
            compare(name, "renamingIdentifier", a.renamingIdentifier, b.renamingIdentifier)
            compare(name, "versionHashModifier", a.versionHashModifier, b.versionHashModifier)
            compare(name, "uniquenessConstraints", Set(a.uniquenessConstraints), Set(b.uniquenessConstraints))
            compare(name, "indexes", Set(a.indexes), Set(b.indexes))
            compare(name, "properties", a.properties.map(\.name).sorted(), b.properties.map(\.name).sorted())
            compare(name, "versionHash", a.versionHash, b.versionHash)
            for property in a.properties {
                guard let other = b.properties.first(where: { $0.name == property.name }) else { continue }
                let place = "\(name).\(property.name)"
                compare(place, "isOptional", property.isOptional, other.isOptional)
                compare(place, "isTransient", property.isTransient, other.isTransient)
                compare(place, "renamingIdentifier", property.renamingIdentifier, other.renamingIdentifier)
                compare(place, "versionHashModifier", property.versionHashModifier, other.versionHashModifier)
                compare(place, "isIndexedBySpotlight", property.isIndexedBySpotlight, other.isIndexedBySpotlight)
                compare(place, "versionHash", property.versionHash, other.versionHash)
                switch (property, other) {
                case (let x as AttributeDescription, let y as AttributeDescription):
                    compare(place, "type", x.type, y.type)
                    compare(place, "defaultValue", x.defaultValue, y.defaultValue)
                    compare(place, "minimumValue", x.minimumValue, y.minimumValue)
                    compare(place, "maximumValue", x.maximumValue, y.maximumValue)
                    compare(place, "minimumLength", x.minimumLength, y.minimumLength)
                    compare(place, "maximumLength", x.maximumLength, y.maximumLength)
                    compare(place, "regularExpression", x.regularExpression, y.regularExpression)
                    compare(place, "isIndexed", x.isIndexed, y.isIndexed)
                    compare(place, "allowsExternalBinaryDataStorage", x.allowsExternalBinaryDataStorage, y.allowsExternalBinaryDataStorage)
                    compare(place, "preservesValueInHistoryOnDeletion", x.preservesValueInHistoryOnDeletion, y.preservesValueInHistoryOnDeletion)
                    compare(place, "valueTransformerName", x.valueTransformerName, y.valueTransformerName)
                case (let x as RelationshipDescription, let y as RelationshipDescription):
                    compare(place, "destination", x.destinationEntityName, y.destinationEntityName)
                    compare(place, "inverse", x.inverseName, y.inverseName)
                    compare(place, "isToMany", x.isToMany, y.isToMany)
                    compare(place, "isOrdered", x.isOrdered, y.isOrdered)
                    compare(place, "deleteRule", x.deleteRule, y.deleteRule)
                    compare(place, "minCount", x.minCount, y.minCount)
                    compare(place, "maxCount", x.maxCount, y.maxCount)
                default:
                    found.append("\(place): an attribute in one model, a relationship in the other")
                }
            }
        }
        compare("model", "entityVersionHashesByName", declared.entityVersionHashesByName, loaded.entityVersionHashesByName)
        compare("model", "versionChecksum", declared.versionChecksum, loaded.versionChecksum)
        return found
    }

    static func loaded(_ path: String) throws -> ManagedObjectModel {
        try ManagedObjectModel(contentsOf: CoreDataFixtures.url(path))
    }

    // The transformer is Apple's app's own class (ColorTransformer), which
    // a Swift type cannot name here: the one field outside the version hash
    // that differs, as a `TransformableValue` stores its own encoding.
    static let sampleIgnored: Set<String> = ["Car.color.valueTransformerName"]

    @Test func inheritanceModelEqualsItsXcodeModel() throws {
        let declared = try ManagedObjectModel(classes: [SampleExpensiveSportCar.self, SamplePerson.self])
        let differences = Self.differences(declared, try Self.loaded(Self.sampleModel), ignoring: Self.sampleIgnored)
        #expect(differences.isEmpty, "\(differences)")
        #expect(declared.entitiesByName["ExpensiveSportCar"]?.managedObjectClass == SampleExpensiveSportCar.self)
        #expect(declared.entitiesByName["Car"]?.managedObjectClass == SampleCar.self)
    }

    @Test func orderedManyToManyModelEqualsItsXcodeModel() throws {
        let declared = try ManagedObjectModel(classes: [DDGBookmark.self])
        let differences = Self.differences(declared, try Self.loaded(Self.bookmarksModel))
        #expect(differences.isEmpty, "\(differences)")
    }

    @Test func constraintsAndIndexesModelEqualsItsXcodeModel() throws {
        let declared = try ManagedObjectModel(classes: [Sample2LuxuryCar.self, Sample2Person.self])
        let differences = Self.differences(declared, try Self.loaded(Self.sample2Model))
        #expect(differences.isEmpty, "\(differences)")
    }

    /// Opens a copy of a fixture store with a model.
    static func open(_ store: String, _ model: ManagedObjectModel, in workspace: FixtureWorkspace) throws -> ManagedObjectContext {
        let url = try workspace.copyStore(store)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        return ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    @Test func inheritanceModelReadsApplesStore() throws {
        let workspace = try FixtureWorkspace()
        let model = try ManagedObjectModel(classes: [SampleExpensiveSportCar.self, SamplePerson.self])
        let context = try Self.open("coredataplus-samplemodel/stores/SampleModel_V1.sqlite", model, in: workspace)
        try context.performAndWait {
            let cars = try context.fetch(FetchRequest<SampleCar>(entityName: "Car"))
            #expect(cars.count == 125)
            #expect(cars.filter { $0 is SampleSportCar }.count == 10)
            let expensive = cars.compactMap { $0 as? SampleExpensiveSportCar }
            #expect(expensive.count == 5)
            #expect(expensive.allSatisfy { $0.isLimitedEdition != nil })
            #expect(cars.allSatisfy { !$0.numberPlate.isEmpty })
            #expect(Set(cars.map(\.numberPlate)).count == 125)
            let persons = try context.fetch(FetchRequest<SamplePerson>(entityName: "Person"))
            #expect(persons.count == 20)
            #expect(Set(persons.map(\.id)).count == 20)
            let owned = persons.reduce(0) { $0 + $1.cars.count }
            #expect(owned == cars.filter { $0.owner != nil }.count)
            for person in persons {
                #expect(person.cars.allSatisfy { $0.owner === person })
            }
        }
    }

    @Test func orderedManyToManyModelReadsApplesStore() throws {
        let workspace = try FixtureWorkspace()
        let model = try ManagedObjectModel(classes: [DDGBookmark.self])
        let context = try Self.open("ddg-bookmarks/stores/Bookmarks_V5.sqlite", model, in: workspace)
        let reference = try SQLiteReference(workspace.url.appendingPathComponent("Bookmarks_V5.sqlite"))
        let favoritesRows = try reference.rows("SELECT count(*) FROM Z_1FAVORITES")
        try context.performAndWait {
            let bookmarks = try context.fetch(FetchRequest<DDGBookmark>(entityName: "BookmarkEntity"))
            #expect(bookmarks.count == 10)
            let roots = bookmarks.filter { $0.parent == nil }
            #expect(Set(roots.map(\.uuid)).isSuperset(of: ["bookmarks_root"]))
            for bookmark in bookmarks {
                for child in bookmark.children { #expect(child.parent === bookmark) }
                for favorite in bookmark.favorites { #expect(favorite.favoriteFolders.contains(bookmark)) }
            }
            let favorites = bookmarks.reduce(0) { $0 + $1.favorites.count }
            #expect([[String(favorites)]] == favoritesRows)
            #expect(favorites == 5)
        }
    }

    @Test func constraintsAndIndexesModelReadsApplesStore() throws {
        let workspace = try FixtureWorkspace()
        let model = try ManagedObjectModel(classes: [Sample2LuxuryCar.self, Sample2Person.self])
        let context = try Self.open("coredataplus-samplemodel/stores/SampleModel_V2.sqlite", model, in: workspace)
        try context.performAndWait {
            let cars = try context.fetch(FetchRequest<Sample2Car>(entityName: "Car"))
            #expect(cars.count == 125)
            #expect(cars.compactMap { $0 as? Sample2LuxuryCar }.count == 5)
            #expect(Set(cars.map(\.numberPlate)).count == 125)
            let persons = try context.fetch(FetchRequest<Sample2Person>(entityName: "Person"))
            #expect(persons.count == 20)
            #expect(persons.reduce(0) { $0 + $1.cars.count } == cars.filter { $0.owner != nil }.count)
        }
    }
}
