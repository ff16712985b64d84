import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// `value(forKey:)`, `setValue(_:forKey:)` and the primitive accessors, for every
/// attribute type and for relationships, with bad keys, types and ranges.
@Suite struct KeyValueAccessTests {
    static let uuid = UUID(uuidString: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0")!

    /// A value of each attribute type, as set, and a check of what comes back.
    static let samples: [(key: String, value: any Sendable, check: @Sendable (Any?) -> Bool)] = [
        ("name", "Widget ✓", { $0 as? String == "Widget ✓" }),
        ("count", 42, { $0 as? Int == 42 }),
        ("small", Int16(-7), { $0 as? Int == -7 }),
        ("medium", Int32(70_000), { $0 as? Int == 70_000 }),
        ("large", Int64(1) << 40, { $0 as? Int == 1 << 40 }),
        ("ratio", 2.5, { $0 as? Double == 2.5 }),
        ("weight", Float(1.25), { $0 as? Float == 1.25 }),
        ("enabled", true, { $0 as? Bool == true }),
        ("created", Date(timeIntervalSinceReferenceDate: 123_456.5), { $0 as? Date == Date(timeIntervalSinceReferenceDate: 123_456.5) }),
        ("payload", Data([0, 1, 2, 255]), { $0 as? Data == Data([0, 1, 2, 255]) }),
        ("identifier", uuid, { $0 as? UUID == uuid }),
        ("homepage", URL(string: "https://example.com/a?b=1")!, { $0 as? URL == URL(string: "https://example.com/a?b=1")! }),
        ("price", Decimal(string: "12.5")!, { $0 as? Decimal == Decimal(string: "12.5")! }),
        ("tags", Tags(names: ["a", "b"]), { data in
            (data as? Data).flatMap { try? TransformableCoding.decode(Tags.self, from: $0) } == Tags(names: ["a", "b"])
        }),
    ]

    @Test(arguments: allStoreTypes)
    func everyAttributeTypeRoundTripsThroughAContextAndTheStore(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        let id = try context.performAndWait {
            let gadget = Gadget(context: context)
            for sample in Self.samples {
                try gadget.setValue(sample.value, forKey: sample.key)
                #expect(sample.check(try gadget.value(forKey: sample.key)), "in memory: \(sample.key)")
            }
            try context.save()
            return gadget.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let gadget = try reader.existingObject(with: id)
            for sample in Self.samples {
                #expect(sample.check(try gadget.value(forKey: sample.key)), "from the store: \(sample.key)")
            }
        }
    }

    /// The stored form, whatever Swift type the class declares, read again once saved.
    @Test(arguments: allStoreTypes)
    func primitivePropertyValuesAreWhatTheStoreHolds(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            for sample in Self.samples { try gadget.setValue(sample.value, forKey: sample.key) }
            try context.save()
            context.refresh(gadget, mergeChanges: false)
            #expect(gadget.isFault)
            func stored(_ key: String) throws -> PropertyValue { try gadget.primitivePropertyValue(forKey: key) }
            #expect(try stored("small") == .integer(-7), "fires the fault")
            #expect(try stored("large") == .integer(1 << 40))
            #expect(try stored("weight") == .double(1.25))
            #expect(try stored("name") == .string("Widget ✓"))
            #expect(try stored("identifier") == .uuid(Self.uuid))
            #expect(try stored("price") == .decimal(Decimal(string: "12.5")!))
            #expect(try stored("nickname") == .null)
            #expect(try stored("box") == .null)
            guard case .data(let bytes) = try stored("tags") else {
                Issue.record("a transformable attribute gives its stored bytes")
                return
            }
            #expect(try TransformableCoding.decode(Tags.self, from: bytes) == Tags(names: ["a", "b"]))
            #expect(throws: ObjectGraphError.self) { try stored("missing") }
        }
    }

    @Test func integersOfAnyWidthAndFloatsAreAcceptedWhereTheyFit() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            try gadget.setValue(UInt8(200), forKey: "small")
            #expect(try gadget.value(forKey: "small") as? Int == 200)
            try gadget.setValue(7, forKey: "ratio")
            #expect(try gadget.value(forKey: "ratio") as? Double == 7)
            try gadget.setValue(Float(0.5), forKey: "ratio")
            #expect(try gadget.value(forKey: "ratio") as? Double == 0.5)
            try gadget.setValue(3, forKey: "price")
            #expect(try gadget.value(forKey: "price") as? Decimal == 3)
            try gadget.setValue([UInt8]([9, 8]), forKey: "payload")
            #expect(try gadget.value(forKey: "payload") as? Data == Data([9, 8]))
            try gadget.setValue(nil, forKey: "name")
            #expect(try gadget.value(forKey: "name") == nil)
            try gadget.setValue(NSNull(), forKey: "count")
            #expect(try gadget.value(forKey: "count") == nil)
        }
    }

    // MARK: - Ranges

    /// Integer attributes and the bounds of their type.
    static let integerBounds: [(key: String, type: AttributeType, min: Int64, max: Int64)] = [
        ("small", .integer16, Int64(Int16.min), Int64(Int16.max)),
        ("medium", .integer32, Int64(Int32.min), Int64(Int32.max)),
    ]

    @Test(arguments: integerBounds.indices)
    func integersAreCheckedAgainstTheirAttributesRange(bound: Int) throws {
        let (key, type, min, max) = Self.integerBounds[bound]
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            try gadget.setValue(min, forKey: key)
            #expect(try gadget.value(forKey: key) as? Int == Int(min))
            try gadget.setValue(max, forKey: key)
            #expect(try gadget.value(forKey: key) as? Int == Int(max))

            #expect(throws: ObjectGraphError.valueOutOfRange(key: key, entity: "Gadget", value: String(max + 1), type: type)) {
                try gadget.setValue(max + 1, forKey: key)
            }
            #expect(throws: ObjectGraphError.valueOutOfRange(key: key, entity: "Gadget", value: String(min - 1), type: type)) {
                try gadget.setValue(min - 1, forKey: key)
            }
            #expect(try gadget.value(forKey: key) as? Int == Int(max), "a refused value leaves the old one")
        }
    }

    @Test func anUnsignedIntegerTooLargeForInteger64IsOutOfRange() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            try gadget.setValue(UInt64(Int64.max), forKey: "large")
            #expect(try gadget.value(forKey: "large") as? Int == Int.max)
            let error = #expect(throws: ObjectGraphError.self) { try gadget.setValue(UInt64.max, forKey: "large") }
            #expect(error == .valueOutOfRange(key: "large", entity: "Gadget", value: String(UInt64.max), type: .integer64))
            #expect(error?.key == "large" && error?.entityName == "Gadget")
        }
    }

    @Test func anOutOfRangeErrorSaysWhatAndWhere() {
        let error = ObjectGraphError.valueOutOfRange(key: "small", entity: "Gadget", value: "40000", type: .integer16)
        #expect("\(error)" == "Gadget.small: 40000 does not fit in integer16")
    }

    // MARK: - Wrong types and keys

    /// A value of the wrong type for each key, with what the error must say is expected.
    static let wrongValues: [(key: String, value: any Sendable, expected: String, actual: String)] = [
        ("count", "12", "an integer (Int64)", "String"),
        ("small", 1.5, "an integer (Int16)", "Double"),
        ("ratio", "1.5", "a Double", "String"),
        ("weight", true, "a Float", "Bool"),
        ("price", "9.99", "a Decimal", "String"),
        ("enabled", "yes", "a Bool", "String"),
        ("name", 5, "a String", "Int"),
        ("created", 12.0, "a Date", "Double"),
        ("payload", "bytes", "Data", "String"),
        ("identifier", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "a UUID", "String"),
        ("homepage", "https://example.com", "a URL", "String"),
    ]

    @Test(arguments: wrongValues.indices)
    func aValueOfTheWrongTypeThrowsNamingEntityKeyAndExpectedType(index: Int) throws {
        let wrong = Self.wrongValues[index]
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            let before = try gadget.value(forKey: wrong.key).map { "\($0)" }
            let expected = ObjectGraphError.wrongValueType(key: wrong.key, entity: "Gadget", expected: wrong.expected, actual: wrong.actual)
            #expect(throws: expected) { try gadget.setValue(wrong.value, forKey: wrong.key) }
            #expect(throws: expected) { try gadget.setPrimitiveValue(wrong.value, forKey: wrong.key) }
            #expect("\(expected)" == "Gadget.\(wrong.key) takes \(wrong.expected), not \(wrong.actual)")
            #expect(try gadget.value(forKey: wrong.key).map { "\($0)" } == before)
        }
    }

    @Test func aValueThatCannotBeEncodedIsRefusedByATransformable() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let gadget = Gadget(context: context)
            #expect(throws: ObjectGraphError.wrongValueType(key: "tags", entity: "Gadget",
                                                            expected: "an Encodable value or Data", actual: "NSObject")) {
                try gadget.setValue(NSObject(), forKey: "tags")
            }
        }
    }

    @Test func anUnknownKeyThrowsForEveryAccessor() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait { () throws in
            let gadget = Gadget(context: context)
            let expected = ObjectGraphError.unknownKey("colour", entity: "Gadget")
            #expect(throws: expected) { try gadget.value(forKey: "colour") }
            #expect(throws: expected) { try gadget.setValue("red", forKey: "colour") }
            #expect(throws: expected) { try gadget.primitiveValue(forKey: "colour") }
            #expect(throws: expected) { try gadget.setPrimitiveValue("red", forKey: "colour") }
            #expect(throws: ObjectGraphError.unknownKey("", entity: "Gadget")) { try gadget.value(forKey: "") }
            #expect("\(expected)" == "entity Gadget has no property named 'colour'")
        }
    }

    @Test(arguments: allStoreTypes)
    func aSavedObjectIsUnchangedAfterARefusedSet(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            gadget.count = 42
            gadget.name = "kept"
            try context.save()

            #expect(throws: ObjectGraphError.self) { try gadget.setValue("many", forKey: "count") }
            #expect(throws: ObjectGraphError.self) { try gadget.setValue(Int64.max, forKey: "small") }
            #expect(throws: ObjectGraphError.self) { try gadget.setValue(1, forKey: "nope") }
            #expect(throws: ObjectGraphError.self) { try gadget.setValue("a box", forKey: "box") }
            #expect(gadget.count == 42)
            #expect(gadget.name == "kept")
            #expect(gadget.box == nil)
            #expect(!gadget.isUpdated)
            #expect(!gadget.hasChanges)
            #expect(!context.hasChanges)
            #expect(context.updatedObjects.isEmpty)
        }
    }

    // MARK: - Relationships

    @Test(arguments: allStoreTypes)
    func relationshipsThroughKeyValueCodingKeepTheInverseInStep(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let box = Box(context: context)
            let first = Gadget(context: context)
            let second = Gadget(context: context)

            try first.setValue(box, forKey: "box")
            #expect(try first.value(forKey: "box") as? Box === box)
            #expect(try box.value(forKey: "gadgets") as? Set<ManagedObject> == [first])

            try box.setValue(Set<ManagedObject>([first, second]), forKey: "gadgets")
            #expect(second.box === box)
            try box.setValue([ManagedObject]([second]), forKey: "gadgets")
            #expect(first.box == nil)
            #expect(box.gadgets == [second])

            try second.setValue(nil, forKey: "box")
            #expect(box.gadgets.isEmpty)
            try context.save()
        }
    }

    @Test func aRelationshipRefusesWrongValuesAndObjectsOfOtherEntitiesOrContexts() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        let other = stack.newContext()
        let foreignBox = other.performAndWait { Box(context: other) }
        try context.performAndWait { () throws in
            let gadget = Gadget(context: context)
            let box = Box(context: context)
            let notABox = Gadget(context: context)
            #expect(throws: ObjectGraphError.wrongValueType(key: "box", entity: "Gadget", expected: "a ManagedObject or nil", actual: "String")) {
                try gadget.setValue("box", forKey: "box")
            }
            #expect(throws: ObjectGraphError.wrongValueType(key: "box", entity: "Gadget", expected: "objects of entity Box",
                                                            actual: "an object of entity Gadget")) {
                try gadget.setValue(notABox, forKey: "box")
            }
            #expect(throws: ObjectGraphError.wrongValueType(key: "gadgets", entity: "Box", expected: "Set<ManagedObject>", actual: "Gadget")) {
                try box.setValue(gadget, forKey: "gadgets")
            }
            #expect(throws: ObjectGraphError.differentContexts(key: "box", entity: "Gadget")) {
                try gadget.setValue(foreignBox, forKey: "box")
            }
            #expect(gadget.box == nil)
            #expect(box.gadgets.isEmpty)
        }
    }

    @Test func anObjectOfAnotherCoordinatorsContextIsRefusedAsForeignNotAsAnotherEntity() throws {
        // Two coordinators, two copies of the model: the foreign box's entity is
        // another instance named Box, which must not read "takes objects of
        // entity Box, not an object of entity Box".
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let otherStack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let other = otherStack.newContext()
        let foreignBox = other.performAndWait { Box(context: other) }
        let context = stack.newContext()
        context.performAndWait {
            let gadget = Gadget(context: context)
            #expect(throws: ObjectGraphError.differentContexts(key: "box", entity: "Gadget")) {
                try gadget.setValue(foreignBox, forKey: "box")
            }
            #expect(gadget.box == nil)
        }
    }

    // MARK: - Primitive accessors

    @Test(arguments: allStoreTypes)
    func primitiveAccessorsReadAndWriteWithoutTouchingTheInverse(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let gadget = Gadget(context: context)
            let box = Box(context: context)
            try context.save()

            try gadget.setPrimitiveValue("raw", forKey: "name")
            #expect(try gadget.primitiveValue(forKey: "name") as? String == "raw")
            #expect(gadget.name == "raw")
            #expect(gadget.isUpdated, "primitive writes are still saved")

            try gadget.setPrimitiveValue(box, forKey: "box")
            #expect(try gadget.primitiveValue(forKey: "box") as? Box === box)
            #expect(box.gadgets.isEmpty, "the inverse is left alone")

            #expect(throws: ObjectGraphError.valueOutOfRange(key: "small", entity: "Gadget", value: "70000", type: .integer16)) {
                try gadget.setPrimitiveValue(70_000, forKey: "small")
            }
            try context.save()
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let gadget = try #require(try reader.fetch(FetchRequest<Gadget>()).first)
            #expect(gadget.name == "raw")
            #expect(gadget.box != nil)
        }
    }
}
