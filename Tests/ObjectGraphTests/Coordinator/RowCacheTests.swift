import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// The coordinator's row cache, bounded by the CLOCK algorithm.
@Suite struct RowCacheTests {
    private let entity = EntityDescription(name: "Row", properties: [AttributeDescription(name: "value", type: .integer64)])

    private func node(_ key: Int64) -> IncrementalStoreNode {
        IncrementalStoreNode(objectID: ObjectID(entity: entity, store: predicateStore, primaryKey: key), values: [.integer(key)], version: 1)
    }

    private func cached(_ cache: RowCache, _ keys: ClosedRange<Int64>) -> [Int64] {
        keys.filter { cache.node(for: node($0).objectID, maxAge: -1) != nil }
    }

    @Test func aFullCacheEvictsRowsNotReadSinceTheHandPassedAndKeepsTheRest() {
        let cache = RowCache(capacity: 4)
        cache.store((1...4).map(node))
        #expect(cache.node(for: node(1).objectID, maxAge: -1) != nil)
        #expect(cache.node(for: node(2).objectID, maxAge: -1) != nil)
        cache.store([node(5), node(6)])
        #expect(cache.count == 4, "full, not emptied")
        let kept = cached(cache, 1...6)
        #expect(kept == [1, 2, 5, 6], "the unread rows 3 and 4 made room")
        #expect(cache.statistics == RowCacheStatistics(hits: 2 + 4, misses: 2, rows: 4, capacity: 4))
    }

    @Test func aFetchLargerThanTheCacheKeepsItsLastRowsAndNothingMore() {
        let cache = RowCache(capacity: 3)
        cache.store((1...10).map(node))
        #expect(cache.count == 3)
        #expect(cached(cache, 1...10) == [8, 9, 10])
    }

    @Test func removedRowsFreeTheirSlotsAndARowStoredAgainIsOneRow() {
        let cache = RowCache(capacity: 3)
        cache.store((1...3).map(node))
        cache.removeRows(of: [node(2).objectID])
        cache.store([node(2)])   // the hand evicts 1 (unread) for it
        cache.store([node(4)])   // and gives 4 the slot 2 left stale
        #expect(cache.count == 3)
        #expect(cached(cache, 1...4) == [2, 3, 4])
        cache.removeAll()
        #expect(cache.count == 0)
        cache.store((5...9).map(node))
        #expect(cached(cache, 5...9) == [7, 8, 9])
    }
}

/// Only the coordinator stores and drops cached rows: it drops those of its own
/// saves without being told.
@Suite struct CoordinatorRowCacheTests {
    @Test(arguments: allStoreTypes)
    func aSaveThroughTheCoordinatorDropsTheRowsItMadeStale(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let ids = try stack.seedCompanies(["A", "B"])
        let reader = stack.newContext()
        // Faults fetched: their rows stay in the coordinator's cache.
        try reader.performAndWait { _ = try reader.fetch(FetchRequest<Company>()) }
        #expect(stack.coordinator.rowCacheStatistics.rows == 2)
        let writer = stack.newContext()
        try writer.performAndWait {
            try #require(try writer.existingObject(with: ids[0]) as? Company).employees = 5
            writer.delete(try writer.existingObject(with: ids[1]))
            try writer.save()
        }
        #expect(stack.coordinator.rowCacheStatistics.rows == 0, "the updated and the deleted object's rows are gone")
        // A context that takes any cached row, however old (the default), reads the saved one.
        let fresh = stack.newContext()
        #expect(try fresh.performAndWait { try #require(try fresh.existingObject(with: ids[0]) as? Company).employees } == 5)
    }
}
