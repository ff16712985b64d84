import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Synchronization
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

    /// A clock the test moves by hand, in nanoseconds.
    private final class ManualClock: Sendable {
        let now = Atomic<UInt64>(5_000_000_000_000)
        func advance(by nanoseconds: UInt64) { now.add(nanoseconds, ordering: .relaxed) }
        var read: @Sendable () -> UInt64 { { [self] in now.load(ordering: .relaxed) } }
    }

    /// A row's time is kept to the microsecond, rounded down: the age it
    /// gives is never less than the row's own, so a row is never served
    /// older than the limit asked.
    @Test func aRowsAgeCountsFromWhenItWasStoredRoundedToAnOlderMicrosecond() {
        let clock = ManualClock()
        let cache = RowCache(capacity: 10, clock: clock.read)
        cache.store([node(1)])
        clock.advance(by: 1_500)
        #expect(cache.node(for: node(1).objectID, maxAge: 2e-6) != nil, "1.5 µs old, limit 2 µs")
        #expect(cache.node(for: node(1).objectID, maxAge: 1e-6) == nil, "1.5 µs old, limit 1 µs")
        #expect(cache.node(for: node(1).objectID, maxAge: 0) == nil, "no age is acceptable")
        clock.advance(by: 999)   // 2,499 ns after the cache's start: kept as 2,000
        cache.store([node(2)])
        #expect(cache.node(for: node(2).objectID, maxAge: 5e-7) != nil, "stored just now, counted as 499 ns old")
        #expect(cache.node(for: node(2).objectID, maxAge: 4e-7) == nil, "rounded down: counted older than it is, never younger")
        #expect(cache.node(for: node(2).objectID, maxAge: -1) != nil, "any age")
    }

    /// Stamps cover 19 hours. Past them the epoch moves on by half: a row
    /// stored in the last half keeps its exact age, an older one gets an
    /// age too great to say — stale for any finite limit, still served to
    /// a context that takes rows of any age.
    @Test func pastTheStampsRangeTheEpochMovesOnAndRowsKeepTheirAges() {
        let clock = ManualClock()
        let cache = RowCache(capacity: 10, clock: clock.read)
        let range = RowTable<RowCacheTestsRow>.maximumStamp   // microseconds
        cache.store([node(1)])
        clock.advance(by: (range - 1) * 1_000)
        cache.store([node(2)])   // the last stamp there is
        #expect(cache.node(for: node(1).objectID, maxAge: Double(range)) != nil, "19 hours old, within range")
        clock.advance(by: 10_000_000_000)
        cache.store([node(3)])   // 10 s past the range: the epoch moves on
        #expect(cache.node(for: node(3).objectID, maxAge: 1e-3) != nil)
        #expect(cache.node(for: node(2).objectID, maxAge: 10.000_001) != nil, "10 s old, its age kept through the move")
        #expect(cache.node(for: node(2).objectID, maxAge: 9.999) == nil)
        #expect(cache.node(for: node(1).objectID, maxAge: 1e9) == nil, "older than the stamps can say: stale for a finite limit")
        #expect(cache.node(for: node(1).objectID, maxAge: -1) != nil, "but kept for any age")
        #expect(cache.count == 3)
    }

    /// A clock that steps back (not the system's uptime, which never does)
    /// traps nowhere: rows stored before count as too old to say, and rows
    /// stored after keep their ages.
    @Test func aClockThatStepsBackMakesEarlierRowsStaleAndNothingTraps() {
        let clock = ManualClock()
        let cache = RowCache(capacity: 10, clock: clock.read)
        clock.advance(by: 1_000_000_000)
        cache.store([node(1)])
        clock.now.store(clock.now.load(ordering: .relaxed) - 2_000_000_000, ordering: .relaxed)
        cache.store([node(2)])
        #expect(cache.node(for: node(1).objectID, maxAge: 1e6) == nil, "stored before the step back: too old to say")
        #expect(cache.node(for: node(1).objectID, maxAge: -1) != nil)
        clock.advance(by: 1_000)
        #expect(cache.node(for: node(2).objectID, maxAge: 2e-6) != nil, "1 µs old")
        #expect(cache.node(for: node(2).objectID, maxAge: 5e-7) == nil)
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

/// Any element: ``RowTable/maximumStamp`` is the same for all.
private struct RowCacheTestsRow: RowTableElement {
    var objectIDScope: ObjectIDScope
    var objectIDKey: UInt64
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
