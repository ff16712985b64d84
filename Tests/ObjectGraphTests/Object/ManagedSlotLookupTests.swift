import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A `@Managed` accessor finds its slot by the object's class and the
/// storage's offset in the object, so two classes bound to one entity, whose
/// storages sit at the same offsets for different properties, must each read
/// and write their own properties; and an entity with more (class, storage)
/// pairs than the lock-free table holds must go on working from its overflow.
@Suite struct ManagedSlotLookupTests {
    final class FirstThenSecond: ManagedObject {
        @Managed var first: String
        @Managed var second: String
    }

    /// The same properties declared the other way round: its `second` is
    /// where `FirstThenSecond` keeps `first`.
    final class SecondThenFirst: ManagedObject {
        @Managed var second: String
        @Managed var first: String
    }

    /// Each specialization is a class of its own to the runtime.
    final class Generic<Tag>: ManagedObject {
        @Managed var first: String
        @Managed var second: String
    }

    struct Nested<Tag> {}

    private static func model() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: "Pair", managedObjectClass: FirstThenSecond.self, properties: [
                AttributeDescription(name: "first", type: .string, isOptional: false, defaultValue: .string("")),
                AttributeDescription(name: "second", type: .string, isOptional: false, defaultValue: .string("")),
            ]),
        ])
    }

    @Test func twoClassesOfOneEntityEachReadTheirOwnPropertiesWhereTheOtherKeepsAnother() throws {
        let stack = try TestStack(type: .sqlite, model: Self.model())
        let entity = try #require(stack.model.entitiesByName["Pair"])
        let context = stack.newContext()
        let (firstID, secondID) = try context.performAndWait {
            let one = FirstThenSecond(entity: entity, insertInto: context)
            one.first = "one's first"
            one.second = "one's second"
            let other = SecondThenFirst(entity: entity, insertInto: context)
            other.first = "other's first"
            other.second = "other's second"
            // Read back in the order that would expose a slot cached for the wrong class.
            #expect(one.first == "one's first")
            #expect(other.first == "other's first")
            #expect(other.second == "other's second")
            #expect(one.second == "one's second")
            #expect(try other.value(forKey: "first") as? String == "other's first")
            try context.save()
            return (one.objectID, other.objectID)
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            // Fetched objects are of the entity's class; the key-value reads say what was saved.
            let one = try reader.existingObject(with: firstID)
            let other = try reader.existingObject(with: secondID)
            #expect(try one.value(forKey: "first") as? String == "one's first")
            #expect(try one.value(forKey: "second") as? String == "one's second")
            #expect(try other.value(forKey: "first") as? String == "other's first")
            #expect(try other.value(forKey: "second") as? String == "other's second")
        }
    }

    @Test func contextsOnManyThreadsResolvingTheSameSlotsAtOnceEachReadTheirOwnValues() async throws {
        // A fresh model: every slot of `Gadget` is resolved by whichever thread gets there first.
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                let context = stack.newContext()
                group.addTask {
                    try await context.perform {
                        for index in 0..<50 {
                            let gadget = Gadget(context: context)
                            gadget.name = "\(worker)-\(index)"
                            gadget.count = worker * 1_000 + index
                            gadget.small = Int16(index)
                            gadget.ratio = Double(worker)
                            gadget.enabled = index.isMultiple(of: 2)
                            guard gadget.name == "\(worker)-\(index)", gadget.count == worker * 1_000 + index,
                                  gadget.small == Int16(index), gadget.ratio == Double(worker),
                                  gadget.enabled == index.isMultiple(of: 2) else {
                                throw ObjectGraphError.invalidModel(["worker \(worker), gadget \(index) read another slot"])
                            }
                            #expect(try gadget.value(forKey: "count") as? Int == worker * 1_000 + index)
                        }
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func moreClassStoragePairsThanTheLockFreeTableHoldsStillReadAndWriteTheirOwnSlots() throws {
        let stack = try TestStack(type: .inMemory, model: Self.model())
        let entity = try #require(stack.model.entitiesByName["Pair"])
        let context = stack.newContext()
        try context.performAndWait { () throws in
            // 40 classes × 2 storages = 80 entries: 64 in the lock-free table, 16 in its overflow.
            var objects: [(object: ManagedObject, index: Int)] = []
            func make<Tag>(_: Tag.Type, index: Int) {
                let object = Generic<Tag>(entity: entity, insertInto: context)
                object.first = "first \(index)"
                object.second = "second \(index)"
                objects.append((object, index))
                if index < 39 { make(Nested<Tag>.self, index: index + 1) }
            }
            make(Int.self, index: 0)
            #expect(objects.count == 40)
            #expect(Set(objects.map { ObjectIdentifier(type(of: $0.object)) }).count == 40)
            for (object, index) in objects {
                #expect(try object.value(forKey: "first") as? String == "first \(index)")
                #expect(try object.value(forKey: "second") as? String == "second \(index)")
            }
            // Typed reads through each class, after every class has been entered.
            func check<Tag>(_: Tag.Type, index: Int) {
                let object = objects[index].object as? Generic<Tag>
                #expect(object?.first == "first \(index)")
                #expect(object?.second == "second \(index)")
                if index < 39 { check(Nested<Tag>.self, index: index + 1) }
            }
            check(Int.self, index: 0)
        }
    }

    /// A class's slots are found per model: the same class in two models whose
    /// entities list the properties in opposite orders reads and writes each
    /// model's own slots.
    @Test func oneClassInTwoModelsWithTheirPropertiesInOppositeOrdersUsesEachModelsSlots() throws {
        final class Reordered: ManagedObject {
            @Managed var first: String
            @Managed var second: String
        }
        func model(_ names: [String]) -> ManagedObjectModel {
            ManagedObjectModel(entities: [
                EntityDescription(name: "Pair", managedObjectClass: Reordered.self, properties: names.map {
                    AttributeDescription(name: $0, type: .string, isOptional: false, defaultValue: .string(""))
                }),
            ])
        }
        for names in [["first", "second"], ["second", "first"], ["first", "second"]] {
            let stack = try TestStack(type: .sqlite, model: model(names))
            let entity = try #require(stack.model.entitiesByName["Pair"])
            #expect(entity.properties.map(\.name) == names)
            let context = stack.newContext()
            let id = try context.performAndWait {
                let pair = Reordered(entity: entity, insertInto: context)
                pair.first = "first of \(names)"
                pair.second = "second of \(names)"
                #expect(try pair.value(forKey: "first") as? String == "first of \(names)")
                #expect(try pair.value(forKey: "second") as? String == "second of \(names)")
                try context.save()
                return pair.objectID
            }
            let reader = stack.newContext()
            try reader.performAndWait {
                let pair = try #require(try reader.existingObject(with: id) as? Reordered)
                #expect(pair.first == "first of \(names)")
                #expect(pair.second == "second of \(names)")
            }
        }
    }
}
