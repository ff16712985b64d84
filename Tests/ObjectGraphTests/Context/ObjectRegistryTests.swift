import Foundation
import Testing
@_spi(StoreImplementation) @testable import ObjectGraph

/// The context's identity map (`ObjectRegistry`): an open-addressing table that
/// must behave exactly like a dictionary keyed by `ObjectID`.
@Suite struct ObjectRegistryTests {
    private let model = TestModel.make()
    private let store = StoreIdentity.named("registry-tests")

    private func id(_ entity: String, _ primaryKey: Int64) -> ObjectID {
        ObjectID(entity: model.entitiesByName[entity]!, store: store, primaryKey: primaryKey)
    }

    private func object(for id: ObjectID) -> ManagedObject {
        let object = ManagedObject(entity: id.entity, insertInto: nil)
        object.objectID = id
        return object
    }

    /// From a table of 16 buckets growing by doubling, and from tables of
    /// sizes that are no power of two (as a fetch reserves them).
    @Test(arguments: [0, 1_001, 2_222, 3_999])
    func agreesWithADictionaryOverRandomInsertsReplacementsAndRemovals(reserved: Int) {
        var registry = ObjectRegistry()
        registry.reserveCapacity(reserved)
        var expected: [ObjectID: ManagedObject] = [:]
        var generator = SplitMix64(seed: 7)
        // Two entities with overlapping key ranges, and temporary IDs: the keys collide on purpose.
        let temporary = (0..<200).map { _ in ObjectID.temporary(for: model.entitiesByName["Company"]!) }
        for step in 0..<20_000 {
            let roll = Int(generator.next() % 100)
            let key: ObjectID = switch roll % 3 {
            case 0: id("Company", Int64(generator.next() % 3_000))
            case 1: id("StockUpdate", Int64(generator.next() % 3_000))
            default: temporary[Int(generator.next() % 200)]
            }
            if roll < 60 {
                let object = object(for: key)
                registry[key] = object
                expected[key] = object
            } else {
                #expect(registry.removeValue(forKey: key) === expected.removeValue(forKey: key), "step \(step)")
            }
            if step % 1_000 == 0 {
                #expect(registry.count == expected.count)
                for (key, object) in expected { #expect(registry[key] === object) }
            }
        }
        #expect(registry.count == expected.count)
        #expect(Set(registry.ids) == Set(expected.keys))
        #expect(Set(registry.objects.map(ObjectIdentifier.init)) == Set(expected.values.map(ObjectIdentifier.init)))
        for (key, object) in expected { #expect(registry[key] === object) }
        #expect(registry[id("Company", 1_000_000)] == nil)
    }

    /// A reserved table holds its capacity without growing, at a load of at
    /// most 3/4 and in no more buckets than that needs (rounded up to whole
    /// blocks of eight).
    @Test(arguments: [1, 12, 13, 100, 1_000, 99_999, 100_000, 131_073])
    func aReservedTableIsJustLargeEnough(capacity: Int) {
        var registry = ObjectRegistry()
        registry.reserveCapacity(capacity)
        let buckets = registry.bucketCount
        #expect(buckets % 8 == 0)
        #expect(buckets / 4 * 3 >= capacity)
        #expect(buckets <= max(16, capacity * 4 / 3 + 12), "\(buckets) buckets for \(capacity)")
        // Filling it (up to 2,000 here) never grows it.
        for key in 0..<Int64(min(capacity, 2_000)) { registry[id("Company", key)] = object(for: id("Company", key)) }
        #expect(registry.bucketCount == buckets)
    }

    @Test func anIDFromAnotherCopyOfTheModelFindsTheSameObject() {
        var registry = ObjectRegistry()
        let original = id("Company", 42)
        let otherCopy = ObjectID(entity: TestModel.make().entitiesByName["Company"]!, store: store, primaryKey: 42)
        #expect(original == otherCopy && original.entity !== otherCopy.entity)
        let object = object(for: original)
        registry[original] = object
        #expect(registry[otherCopy] === object)
        #expect(registry.removeValue(forKey: otherCopy) === object)
        #expect(registry.isEmpty)
    }

    @Test func removeAllPassesEachObjectInoutAndKeepsTheRest() {
        var registry = ObjectRegistry()
        var kept: [ManagedObject] = []
        for key in 1...1_000 {
            let object = object(for: id("Company", Int64(key)))
            registry[object.objectID] = object
            if key.isMultiple(of: 3) { kept.append(object) }
        }
        // Only the registry holds the others: exactly what a sweep removes.
        registry.removeAll { isKnownUniquelyReferenced(&$0) }
        #expect(registry.count == kept.count)
        for object in kept { #expect(registry[object.objectID] === object) }

        let first = kept[0].objectID
        #expect(registry.object(for: first) { _ in false } === kept[0])
        #expect(registry.object(for: first) { _ in true } == nil)
        #expect(registry[first] == nil)
        #expect(registry.count == kept.count - 1)
    }

    @Test func rekeyAllFilesObjectsUnderTheirNewIDs() {
        var registry = ObjectRegistry()
        registry.reserveCapacity(5_000)
        let objects = (0..<5_000).map { _ in object(for: .temporary(for: model.entitiesByName["Company"]!)) }
        for object in objects { registry[object.objectID] = object }
        for (offset, object) in objects.enumerated() { object.objectID = id("Company", Int64(offset + 1)) }
        registry.rekeyAll()
        #expect(registry.count == 5_000)
        for object in objects { #expect(registry[object.objectID] === object) }
    }

    @Test func aCopyKeepsItsObjectsWhileTheOriginalChanges() {
        var registry = ObjectRegistry()
        let objects = (1...300).map { object(for: id("Company", Int64($0))) }
        for object in objects { registry[object.objectID] = object }
        let copy = registry
        // Removing, growing and re-keying the original leave the copy as it was.
        for object in objects.prefix(100) { registry.removeValue(forKey: object.objectID) }
        for key in 1_000..<2_000 { registry[id("StockUpdate", Int64(key))] = object(for: id("StockUpdate", Int64(key))) }
        objects[150].objectID = id("Company", 9_999)
        registry.rekeyAll()
        #expect(copy.count == 300)
        #expect(Set(copy.objects.map(ObjectIdentifier.init)) == Set(objects.map(ObjectIdentifier.init)))
        // The copy finds what did not change; an object is found under its
        // current ID only (the registry reads an ID's entity and store from
        // the object), so objects[150] is not looked up in the copy.
        #expect(copy[id("Company", 152)] === objects[151])
        #expect(copy[id("Company", 1)] === objects[0])
        #expect(registry.count == 1_200)
        #expect(registry[id("Company", 9_999)] === objects[150])
        #expect(registry[id("Company", 151)] == nil)
        #expect(registry[objects[0].objectID] == nil)
    }

    @Test func iteratingTheObjectsWhileRemovingThemSeesEachOnce() {
        var registry = ObjectRegistry()
        for key in 1...500 { registry[id("Company", Int64(key))] = object(for: id("Company", Int64(key))) }
        var seen = 0
        for object in registry.objects {
            seen += 1
            registry.removeValue(forKey: object.objectID)
        }
        #expect(seen == 500)
        #expect(registry.isEmpty)
    }

    /// A fetch files each row's object with one probe: the object found, or
    /// the one made, filed where the search ended.
    @Test func objectForIDOrRegisterFindsTheRegisteredObjectOrFilesTheOneMade() {
        var registry = ObjectRegistry()
        registry.reserveCapacity(1_000)
        let existing = (1...500).map { object(for: id("Company", Int64($0))) }
        for object in existing { registry[object.objectID] = object }
        var made: [ManagedObject] = []
        for key in 1...1_000 {
            let found = registry.object(for: id("Company", Int64(key))) { id in
                let new = object(for: id)
                made.append(new)
                return new
            }
            #expect(found === (key <= 500 ? existing[key - 1] : made.last), "key \(key)")
        }
        #expect(made.count == 500)
        #expect(registry.count == 1_000)
        for object in existing + made { #expect(registry[object.objectID] === object) }
    }

    /// An initializer the fetch calls may reach the context and register
    /// objects itself, growing the table under the probe: the object made is
    /// filed all the same, and nothing registered meanwhile is lost.
    @Test func objectForIDOrRegisterSurvivesAMakeThatChangesTheRegistry() {
        final class Holder {
            @exclusivity(unchecked) var registry = ObjectRegistry()
        }
        let holder = Holder()
        let first = object(for: id("Company", 1))
        holder.registry[first.objectID] = first
        let shared = holder.registry   // a copy that shares the table until one changes
        let made = holder.registry.object(for: id("Company", 2)) { id in
            for key in 100..<200 { holder.registry[self.id("StockUpdate", Int64(key))] = object(for: self.id("StockUpdate", Int64(key))) }
            return object(for: id)
        }
        #expect(holder.registry.count == 102)
        #expect(holder.registry[id("Company", 2)] === made)
        #expect(holder.registry[id("Company", 1)] === first)
        for key in 100..<200 { #expect(holder.registry[id("StockUpdate", Int64(key))] != nil) }
        #expect(shared.count == 1)
        #expect(shared[id("Company", 2)] == nil)
    }

    /// Filing into a table a copy still shares gives the registry a table of
    /// its own first: the copy does not see the object.
    @Test func objectForIDOrRegisterLeavesACopyAsItWas() {
        var registry = ObjectRegistry()
        let first = object(for: id("Company", 1))
        registry[first.objectID] = first
        let copy = registry
        let made = registry.object(for: id("Company", 2)) { object(for: $0) }
        #expect(registry[id("Company", 2)] === made)
        #expect(copy[id("Company", 2)] == nil)
        #expect(copy.count == 1)
        #expect(copy[id("Company", 1)] === first)
    }

    @Test func objectsLeaveWithTheTableThatHeldThem() {
        weak var released: ManagedObject?
        do {
            var registry = ObjectRegistry()
            let object = object(for: id("Company", 1))
            released = object
            registry[object.objectID] = object
            registry.reserveCapacity(10_000)
            registry.rekeyAll()
            #expect(registry[object.objectID] === object)
        }
        #expect(released == nil)
    }
}
