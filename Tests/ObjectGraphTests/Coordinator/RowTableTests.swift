import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// The row cache's open-addressing table: every operation checked against a
/// dictionary, through growth, removals that shift runs back and evictions.
@Suite struct RowTableTests {
    private struct Row: RowTableElement {
        var id: ObjectID
        var value: Int

        init(objectID: ObjectID, value: Int) {
            id = objectID
            self.value = value
        }

        var objectIDScope: ObjectIDScope { id.scope }
        var objectIDKey: UInt64 { id.rawKey }
    }

    private let entity = EntityDescription(name: "Row", properties: [AttributeDescription(name: "value", type: .integer64)])

    private func id(_ key: Int64) -> ObjectID { ObjectID(entity: entity, store: predicateStore, primaryKey: key) }

    @Test func insertsReplacementsAndRemovalsAgreeWithADictionary() {
        let table = RowTable<Row>(capacity: 100_000)
        var model: [Int64: Int] = [:]
        var random = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            // Keys from a small range: runs form, collide and are cut by removals.
            let key = Int64.random(in: 1...3_000, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6:
                table.update(Row(objectID: id(key), value: step), stamp: UInt64(step))
                model[key] = step
            case 6..<9:
                table.removeElement(for: id(key))
                model[key] = nil
            default:
                let found = table.element(for: id(key))
                #expect(found?.element.value == model[key], "key \(key) at step \(step)")
                #expect(found.map { Int($0.stamp) } == model[key], "the stamp stored with key \(key), at step \(step)")
            }
            #expect(table.count == model.count)
        }
        for key in 1...3_000 as ClosedRange<Int64> {
            let found = table.element(for: id(key))
            #expect(found?.element.value == model[key], "key \(key)")
            #expect(found.map { Int($0.stamp) } == model[key], "the stamp of key \(key), moved with it through removals and growth")
        }
        table.lowerStamps(by: 10_000)
        for key in 1...3_000 as ClosedRange<Int64> {
            #expect(table.element(for: id(key)).map { Int($0.stamp) } == model[key].map { max($0 - 10_000, 0) },
                    "key \(key)'s stamp lowered by 10,000, to 0 at least")
        }
        table.removeElements { $0.primaryKey.map { $0 % 3 == 0 } ?? false }
        for key in 1...3_000 as ClosedRange<Int64> {
            let expected = key % 3 == 0 ? nil : model[key]
            #expect(table.element(for: id(key))?.element.value == expected, "key \(key) after removing multiples of 3")
        }
        #expect(table.count == model.keys.filter { $0 % 3 != 0 }.count)
        table.removeAll()
        #expect(table.isEmpty && table.element(for: id(1)) == nil)
    }

    @Test func aFullTableEvictsOnlyUnreadRowsAndNeverExceedsItsCapacity() {
        let table = RowTable<Row>(capacity: 100)
        for key in 1...100 as ClosedRange<Int64> { table.update(Row(objectID: id(key), value: Int(key)), stamp: 1) }
        for key in 1...50 as ClosedRange<Int64> { #expect(table.element(for: id(key)) != nil) }
        for key in 101...150 as ClosedRange<Int64> {
            table.update(Row(objectID: id(key), value: Int(key)), stamp: 1)
            #expect(table.count == 100)
        }
        let kept = (1...150 as ClosedRange<Int64>).filter { table.element(for: id($0)) != nil }
        #expect(kept == Array(1...50) + Array(101...150), "the 50 unread rows go first: the read ones and the new ones outlive them")
    }

    /// A stamp keeps all of its 36 bits beside the hash and the credit, and
    /// a read (which sets the credit) leaves it as it was.
    @Test func stampsKeepEveryBitThroughReadsAndReplacements() {
        let table = RowTable<Row>(capacity: 10)
        let largest = RowTable<Row>.maximumStamp
        #expect(largest == 1 << 36 - 1)
        table.update(Row(objectID: id(1), value: 1), stamp: largest)
        table.update(Row(objectID: id(2), value: 2), stamp: 0x5_5555_5555)
        #expect(table.element(for: id(1))?.stamp == largest)
        #expect(table.element(for: id(1))?.stamp == largest, "read twice: the credit changed, the stamp did not")
        table.update(Row(objectID: id(1), value: 3), stamp: 7)
        #expect(table.element(for: id(1)).map { [$0.element.value, Int($0.stamp)] } == [3, 7])
        #expect(table.element(for: id(2)).map { [$0.element.value, Int($0.stamp)] } == [2, 0x5_5555_5555])
    }

    @Test func reservingMakesRoomWithoutLosingRows() {
        let table = RowTable<Row>(capacity: 1_000)
        for key in 1...10 as ClosedRange<Int64> { table.update(Row(objectID: id(key), value: Int(key)), stamp: 1) }
        table.reserveCapacity(5_000)   // bounded by the capacity
        for key in 11...1_000 as ClosedRange<Int64> { table.update(Row(objectID: id(key), value: Int(key)), stamp: 1) }
        #expect(table.count == 1_000)
        #expect((1...1_000 as ClosedRange<Int64>).allSatisfy { table.element(for: id($0))?.element.value == Int($0) })
    }
}
