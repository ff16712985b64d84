import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Typed `@Managed` properties of every kind: attributes, optionals, to-one and to-many.
@Suite struct ManagedPropertyTests {
    static let created = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
    static let identifier = UUID(uuidString: "11111111-2222-3333-4444-555555555555")!
    static let homepage = URL(string: "https://example.com/gadget")!

    private func fill(_ gadget: Gadget) {
        gadget.name = "Gizmo"
        gadget.count = -12
        gadget.small = Int16.max
        gadget.medium = Int32.min
        gadget.large = Int64.max
        gadget.ratio = 0.1
        gadget.weight = 2.5
        gadget.enabled = true
        gadget.created = Self.created
        gadget.payload = Data("bytes".utf8)
        gadget.identifier = Self.identifier
        gadget.homepage = Self.homepage
        gadget.price = Decimal(string: "19.75")!
        gadget.tags = Tags(names: ["red", "small"])
        gadget.nickname = "G"
        gadget.rank = 3
        gadget.score = 9.5
        gadget.flag = false
        gadget.seen = Self.created
        gadget.photo = Data([1])
        gadget.token = Self.identifier
        gadget.link = Self.homepage
        gadget.cost = 4
        gadget.labels = Tags(names: [])
    }

    private func expectFilled(_ gadget: Gadget, _ where: String) {
        #expect(gadget.name == "Gizmo", "\(`where`)")
        #expect(gadget.count == -12, "\(`where`)")
        #expect(gadget.small == Int16.max, "\(`where`)")
        #expect(gadget.medium == Int32.min, "\(`where`)")
        #expect(gadget.large == Int64.max, "\(`where`)")
        #expect(gadget.ratio == 0.1, "\(`where`)")
        #expect(gadget.weight == 2.5, "\(`where`)")
        #expect(gadget.enabled, "\(`where`)")
        #expect(gadget.created == Self.created, "\(`where`)")
        #expect(gadget.payload == Data("bytes".utf8), "\(`where`)")
        #expect(gadget.identifier == Self.identifier, "\(`where`)")
        #expect(gadget.homepage == Self.homepage, "\(`where`)")
        #expect(gadget.price == Decimal(string: "19.75")!, "\(`where`)")
        #expect(gadget.tags == Tags(names: ["red", "small"]), "\(`where`)")
        #expect(gadget.nickname == "G", "\(`where`)")
        #expect(gadget.rank == 3, "\(`where`)")
        #expect(gadget.score == 9.5, "\(`where`)")
        #expect(gadget.flag == false, "\(`where`)")
        #expect(gadget.seen == Self.created, "\(`where`)")
        #expect(gadget.photo == Data([1]), "\(`where`)")
        #expect(gadget.token == Self.identifier, "\(`where`)")
        #expect(gadget.link == Self.homepage, "\(`where`)")
        #expect(gadget.cost == 4, "\(`where`)")
        #expect(gadget.labels == Tags(names: []), "\(`where`)")
    }

    @Test(arguments: allStoreTypes)
    func everyKindOfTypedPropertyReadsBackWhatWasWrittenBeforeAndAfterSaving(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        let id = try context.performAndWait {
            let gadget = Gadget(context: context)
            fill(gadget)
            expectFilled(gadget, "before saving")
            try context.save()
            expectFilled(gadget, "after saving")
            return gadget.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let gadget = try #require(try reader.existingObject(with: id) as? Gadget)
            expectFilled(gadget, "in another context")
        }
    }

    @Test func typedPropertiesAndKeyValueCodingShareOneSlot() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            gadget.small = 12
            #expect(try gadget.value(forKey: "small") as? Int == 12)
            try gadget.setValue(-3, forKey: "medium")
            #expect(gadget.medium == -3)
            gadget.tags = Tags(names: ["x"])
            let data = try #require(try gadget.value(forKey: "tags") as? Data)
            #expect(try TransformableCoding.decode(Tags.self, from: data) == Tags(names: ["x"]))
            try gadget.setValue(Tags(names: ["y"]), forKey: "tags")
            #expect(gadget.tags == Tags(names: ["y"]))
        }
    }

    private func expectOptionalsNil(_ gadget: Gadget, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(gadget.nickname == nil, sourceLocation: sourceLocation)
        #expect(gadget.rank == nil, sourceLocation: sourceLocation)
        #expect(gadget.score == nil, sourceLocation: sourceLocation)
        #expect(gadget.flag == nil, sourceLocation: sourceLocation)
        #expect(gadget.seen == nil, sourceLocation: sourceLocation)
        #expect(gadget.photo == nil, sourceLocation: sourceLocation)
        #expect(gadget.token == nil, sourceLocation: sourceLocation)
        #expect(gadget.link == nil, sourceLocation: sourceLocation)
        #expect(gadget.cost == nil, sourceLocation: sourceLocation)
        #expect(gadget.labels == nil, sourceLocation: sourceLocation)
    }

    @Test func optionalsStartNilAndCanBeSetBackToNil() throws {
        let stack = try TestStack(type: .sqlite, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            expectOptionalsNil(gadget)
            #expect(gadget.box == nil)
            fill(gadget)
            try context.save()
            gadget.nickname = nil
            gadget.rank = nil
            gadget.score = nil
            gadget.flag = nil
            gadget.seen = nil
            gadget.photo = nil
            gadget.token = nil
            gadget.link = nil
            gadget.cost = nil
            gadget.labels = nil
            try context.save()
            context.refresh(gadget, mergeChanges: false)
            #expect(gadget.isFault)
            expectOptionalsNil(gadget)
            #expect(gadget.name == "Gizmo")
        }
    }

    @Test func aNonOptionalPropertyOverANilValueReadsItsTypesZero() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let gadget = Gadget(context: context)
            #expect(gadget.name == "")
            #expect(gadget.count == 0)
            #expect(gadget.small == 0)
            #expect(gadget.ratio == 0)
            #expect(gadget.weight == 0)
            #expect(!gadget.enabled)
            #expect(gadget.created == Date(timeIntervalSinceReferenceDate: 0))
            #expect(gadget.payload.isEmpty)
            #expect(gadget.price == 0)
            #expect(gadget.tags == Tags(names: []))
        }
    }

    @Test(arguments: allStoreTypes)
    func toOneAndToManyPropertiesKeepBothSidesInStep(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        let boxID = try context.performAndWait {
            let box = Box(context: context)
            let a = Gadget(context: context)
            let b = Gadget(context: context)
            let c = Gadget(context: context)
            a.box = box
            #expect(box.gadgets == [a])
            box.gadgets = [a, b]
            #expect(b.box === box)
            box.gadgets.insert(c)
            #expect(c.box === box)
            #expect(box.gadgets.count == 3)

            let other = Box(context: context)
            c.box = other
            #expect(box.gadgets == [a, b], "moving to another box removes it from the first")
            #expect(other.gadgets == [c])
            b.box = nil
            #expect(box.gadgets == [a])
            try context.save()
            return box.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let box = try #require(try reader.existingObject(with: boxID) as? Box)
            #expect(box.gadgets.count == 1)
            let gadget = try #require(box.gadgets.first)
            #expect(gadget.box === box)
        }
    }

    @Test(arguments: allStoreTypes)
    func aTypeOfTheUsersOwnConformingToManagedAttributeValueIsATypedProperty(type: StoreType) throws {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: "Reading", managedObjectClass: Reading.self, properties: [
                AttributeDescription(name: "temperature", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "previous", type: .double),
            ]),
        ])
        let stack = try TestStack(type: type, model: model)
        let context = stack.newContext()
        let id = try context.performAndWait {
            let reading = Reading(context: context)
            #expect(reading.temperature == Celsius(degrees: 0))
            #expect(reading.previous == nil)
            reading.temperature = Celsius(degrees: 21.5)
            reading.previous = Celsius(degrees: 19)
            #expect(try reading.value(forKey: "temperature") as? Double == 21.5, "stored as the attribute's type")
            try context.save()
            return reading.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let reading = try #require(try reader.existingObject(with: id) as? Reading)
            #expect(reading.temperature == Celsius(degrees: 21.5))
            #expect(reading.previous == Celsius(degrees: 19))
        }
    }
}

/// A value type of the user's own, stored in a Double attribute: the
/// `ManagedPropertyValue` documentation's example, through the public API only.
struct Celsius: ManagedAttributeValue, Equatable {
    var degrees: Double
    init(degrees: Double) { self.degrees = degrees }
    init?(propertyValue: PropertyValue) {
        guard let degrees = Double(propertyValue: propertyValue) else { return nil }
        self.degrees = degrees
    }
    var propertyValue: PropertyValue { .double(degrees) }
    static var defaultManagedValue: Celsius { Celsius(degrees: 0) }
}

final class Reading: ManagedObject {
    @Managed var temperature: Celsius
    @Managed var previous: Celsius?
}
