import DataStackStores
import Foundation
import ObjectGraph
import Testing

// MARK: - Classes

/// A value of one's own that stores a double.
struct DeclaredCelsius: ManagedAttributeValue, Equatable {
    var degrees: Double
    init(degrees: Double) { self.degrees = degrees }
    init?(propertyValue: PropertyValue) {
        guard let degrees = Double(propertyValue: propertyValue) else { return nil }
        self.degrees = degrees
    }
    var propertyValue: PropertyValue { .double(degrees) }
    static var defaultManagedValue: DeclaredCelsius { DeclaredCelsius(degrees: 0) }
}

struct DeclaredTags: TransformableValue, Equatable {
    var names: [String]
    static let defaultManagedValue = DeclaredTags(names: [])
}

/// One property of every supported type.
final class DeclaredEverything: ManagedObject {
    @Managed var string: String
    @Managed var int: Int
    @Managed var int64: Int64
    @Managed var int32: Int32
    @Managed var int16: Int16
    @Managed var double: Double
    @Managed var float: Float
    @Managed var bool: Bool
    @Managed var date: Date
    @Managed var data: Data
    @Managed var uuid: UUID
    @Managed var url: URL
    @Managed var decimal: Decimal
    @Managed var tags: DeclaredTags
    @Managed var temperature: DeclaredCelsius
    @Managed var optionalString: String?
    @Managed var optionalInt32: Int32?
    @Managed var named: String = "unnamed"
    @Managed var count: Int = 7
    @Managed var ratio: Double? = 0.5
    @Managed var flag: Bool = true
}

/// Every option.
final class DeclaredOptions: ManagedObject {
    @Managed(.unique) var code: String
    @Managed([.indexed, .spotlight]) var title: String = ""
    @Managed(.externalStorage) var blob: Data?
    @Managed(.transient) var scratch: String?
    @Managed(.preserveValueOnDeletion) var serverID: UUID?
    @Managed(originalName: "oldName", hashModifier: "2", userInfo: ["note": "was oldName"]) var renamed: String?
    @Managed(minimumValue: 0, maximumValue: 100) var percent: Int = 0
    @Managed(minimumLength: 1, maximumLength: 8, regularExpression: "[A-Z]+") var symbol: String = "A"
    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(name: "Options", uniquenessConstraints: [[\DeclaredOptions.title, \DeclaredOptions.symbol]],
                          indexes: [[\DeclaredOptions.title, \DeclaredOptions.code]], originalName: "OldOptions", hashModifier: "v2")
    }
}

class DeclaredShape: ManagedObject {
    @Managed var label: String = ""
    @Managed(inverse: \.shapes, userInfo: ["role": "container"]) var canvas: DeclaredCanvas?
    override class var entityDeclaration: EntityDeclaration { EntityDeclaration(isAbstract: true) }
}

final class DeclaredCircle: DeclaredShape {
    @Managed var radius: Double
}

final class DeclaredCanvas: ManagedObject {
    @Managed(deleteRule: .cascade, minimumCount: 1, maximumCount: 10) var shapes: [DeclaredShape]
    // No inverse declared on either side: inferred, the only pair.
    @Managed var owner: DeclaredPainter?
}

final class DeclaredPainter: ManagedObject {
    @Managed var name: String
    @Managed var canvases: Set<DeclaredCanvas>
}

/// A reflexive pair with no inverse declared: inferred.
final class DeclaredNode: ManagedObject {
    @Managed var parent: DeclaredNode?
    @Managed var children: Set<DeclaredNode>
}

// MARK: - Tests

@Suite struct ClassDeclaredModelTests {
    @Test func swiftTypesGiveAttributeTypesOptionalityAndDefaults() throws {
        let model = try ManagedObjectModel(classes: [DeclaredEverything.self])
        let entity = try #require(model.entitiesByName["DeclaredEverything"])
        #expect(entity.managedObjectClass == DeclaredEverything.self)
        let attributes = entity.attributesByName
        let expected: [String: AttributeType] = [
            "string": .string, "int": .integer64, "int64": .integer64, "int32": .integer32, "int16": .integer16,
            "double": .double, "float": .float, "bool": .boolean, "date": .date, "data": .binaryData, "uuid": .uuid,
            "url": .uri, "decimal": .decimal, "tags": .transformable, "temperature": .double,
            "optionalString": .string, "optionalInt32": .integer32, "named": .string, "count": .integer64,
            "ratio": .double, "flag": .boolean,
        ]
        #expect(attributes.mapValues(\.type) == expected)
        #expect(Set(attributes.filter { $0.value.isOptional }.keys) == ["optionalString", "optionalInt32", "ratio"])
        #expect(attributes["named"]?.defaultValue == .string("unnamed"))
        #expect(attributes["count"]?.defaultValue == .integer(7))
        #expect(attributes["ratio"]?.defaultValue == .double(0.5))
        #expect(attributes["flag"]?.defaultValue == .bool(true))
        #expect(attributes["string"]?.defaultValue == .null)
        // Declaration order is slot order.
        #expect(entity.properties.map(\.name).prefix(3) == ["string", "int", "int64"])
    }

    @Test func optionsReachTheDescriptions() throws {
        let model = try ManagedObjectModel(classes: [DeclaredOptions.self])
        let entity = try #require(model.entitiesByName["Options"])
        let a = entity.attributesByName
        #expect(entity.renamingIdentifier == "OldOptions")
        #expect(entity.versionHashModifier == "v2")
        #expect(Set(entity.uniquenessConstraints) == [["code"], ["title", "symbol"]])
        #expect(entity.indexes == [FetchIndexDescription(name: "byTitleCode", propertyNames: ["title", "code"])])
        #expect(a["title"]?.isIndexed == true && a["title"]?.isIndexedBySpotlight == true)
        #expect(a["code"]?.isIndexed == false)
        #expect(a["blob"]?.allowsExternalBinaryDataStorage == true)
        #expect(a["scratch"]?.isTransient == true)
        #expect(a["serverID"]?.preservesValueInHistoryOnDeletion == true)
        #expect(a["renamed"]?.renamingIdentifier == "oldName" && a["renamed"]?.versionHashModifier == "2")
        #expect(a["renamed"]?.userInfo == ["note": "was oldName"] && a["code"]?.userInfo == [:])
        #expect(a["percent"]?.minimumValue == .integer(0) && a["percent"]?.maximumValue == .integer(100))
        #expect(a["symbol"]?.minimumLength == 1 && a["symbol"]?.maximumLength == 8 && a["symbol"]?.regularExpression == "[A-Z]+")
    }

    @Test func hierarchyRelationshipsAndInferredInverses() throws {
        // Only the leaf and the canvas are listed: the superclass and the
        // painter (a destination) are added.
        let model = try ManagedObjectModel(classes: [DeclaredCircle.self, DeclaredCanvas.self])
        let shape = try #require(model.entitiesByName["DeclaredShape"])
        let circle = try #require(model.entitiesByName["DeclaredCircle"])
        let canvas = try #require(model.entitiesByName["DeclaredCanvas"])
        let painter = try #require(model.entitiesByName["DeclaredPainter"])
        #expect(shape.isAbstract && !circle.isAbstract)
        #expect(circle.superentity === shape)
        #expect(circle.properties.map(\.name) == ["radius"])
        #expect(circle.propertiesByName["label"] != nil)
        let shapes = try #require(canvas.relationshipsByName["shapes"])
        #expect(shapes.isToMany && shapes.isOrdered && shapes.deleteRule == .cascade)
        #expect(shapes.minCount == 1 && shapes.maxCount == 10 && !shapes.isOptional)
        #expect(shapes.inverseName == "canvas")
        #expect(shape.relationshipsByName["canvas"]?.inverseName == "shapes")
        #expect(shape.relationshipsByName["canvas"]?.isToMany == false)
        #expect(shape.relationshipsByName["canvas"]?.userInfo == ["role": "container"])
        #expect(canvas.relationshipsByName["owner"]?.inverseName == "canvases")
        #expect(painter.relationshipsByName["canvases"]?.inverseName == "owner")
        #expect(painter.relationshipsByName["canvases"]?.isOrdered == false)

        let nodes = try ManagedObjectModel(classes: [DeclaredNode.self])
        let node = try #require(nodes.entitiesByName["DeclaredNode"])
        #expect(node.relationshipsByName["parent"]?.inverseName == "children")
        #expect(node.relationshipsByName["children"]?.inverseName == "parent")
    }

    @Test func aDerivedModelStoresAndReadsTypedObjects() throws {
        let model = try ManagedObjectModel(classes: [DeclaredCircle.self, DeclaredCanvas.self, DeclaredEverything.self])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let workspace = try FixtureWorkspace()
        try coordinator.addPersistentStore(type: .sqlite, at: workspace.url.appendingPathComponent("declared.sqlite"))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let everything = DeclaredEverything(context: context)
            #expect(everything.named == "unnamed" && everything.count == 7 && everything.flag)
            // A non-optional property without an initial value has no
            // default, as in Core Data: saving requires a value.
            everything.string = "s"
            everything.int = 1
            everything.int64 = 64
            everything.int32 = 32
            everything.double = 1.5
            everything.float = 2.5
            everything.bool = true
            everything.date = Date(timeIntervalSinceReferenceDate: 100)
            everything.data = Data([1, 2])
            everything.uuid = UUID()
            everything.url = URL(string: "https://example.com")!
            everything.decimal = 3
            everything.tags = DeclaredTags(names: ["a", "b"])
            everything.temperature = DeclaredCelsius(degrees: 21.5)
            everything.int16 = 16
            let canvas = DeclaredCanvas(context: context)
            let circle = DeclaredCircle(context: context)
            circle.radius = 2
            circle.label = "c"
            canvas.shapes = [circle]
            #expect(circle.canvas === canvas)
            try context.save()
        }
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            let everything = try #require(try reader.fetch(FetchRequest<DeclaredEverything>()).first)
            #expect(everything.tags == DeclaredTags(names: ["a", "b"]))
            #expect(everything.temperature == DeclaredCelsius(degrees: 21.5))
            #expect(everything.int16 == 16 && everything.named == "unnamed")
            #expect(everything.string == "s" && everything.int == 1 && everything.int32 == 32 && everything.float == 2.5)
            #expect(everything.date == Date(timeIntervalSinceReferenceDate: 100) && everything.data == Data([1, 2]))
            #expect(everything.url == URL(string: "https://example.com")! && everything.decimal == 3 && everything.bool)
            let canvas = try #require(try reader.fetch(FetchRequest<DeclaredCanvas>()).first)
            #expect(canvas.shapes.count == 1)
            #expect((canvas.shapes.first as? DeclaredCircle)?.radius == 2)
        }
    }

    @Test func theWrapperStaysOneByte() {
        #expect(MemoryLayout<Managed<String>>.size == 1)
        #expect(MemoryLayout<Managed<Set<DeclaredNode>>>.size == 1)
    }

    @Test func derivingTwiceGivesEqualHashes() throws {
        let first = try ManagedObjectModel(classes: [DeclaredOptions.self])
        let second = try ManagedObjectModel(classes: [DeclaredOptions.self])
        #expect(first.entityVersionHashesByName == second.entityVersionHashesByName)
    }
}
