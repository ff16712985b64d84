@testable import ObjectGraph
import Testing
@_spi(DataStackInternal) import DataStackSupport
import DataStackSQLite

/// The one eviction policy of the package's caches, and the statement cache that uses it.
@Suite struct ClockCacheTests {
    private func kept(_ cache: ClockCache<Int, String>, _ keys: ClosedRange<Int>) -> [Int] {
        var cache = cache   // reading marks entries; keep the caller's marks as they were
        return keys.filter { cache.value(forKey: $0) != nil }
    }

    @Test func aFullCacheEvictsTheValuesNotReadSinceTheHandPassed() {
        var cache = ClockCache<Int, String>(capacity: 3)
        for key in 1...3 { cache.updateValue("\(key)", forKey: key) }
        #expect(cache.value(forKey: 1) == "1")
        #expect(cache.value(forKey: 3) == "3")
        cache.updateValue("4", forKey: 4)
        #expect(cache.count == 3, "full, not emptied")
        #expect(kept(cache, 1...4) == [1, 3, 4], "2, never read, made room")
        // The hand cleared 1's mark on its way to 2; now it spares 3, read, and evicts 1.
        cache.updateValue("5", forKey: 5)
        #expect(kept(cache, 1...5) == [3, 4, 5])
    }

    @Test func aValueStoredAgainKeepsItsSlotAndItsMark() {
        var cache = ClockCache<Int, String>(capacity: 2)
        cache.updateValue("a", forKey: 1)
        cache.updateValue("b", forKey: 2)
        _ = cache.value(forKey: 1)
        cache.updateValue("A", forKey: 1)
        #expect(cache.count == 2)
        cache.updateValue("c", forKey: 3)
        #expect(cache.value(forKey: 1) == "A", "read before it was replaced: spared")
        #expect(cache.value(forKey: 2) == nil)
    }

    @Test func removedValuesLeaveSlotsTheHandReuses() {
        var cache = ClockCache<Int, String>(capacity: 3)
        for key in 1...3 { cache.updateValue("\(key)", forKey: key) }
        cache.removeValue(forKey: 2)
        cache.removeValue(forKey: 3)
        #expect(cache.count == 1)
        _ = cache.value(forKey: 1)
        cache.updateValue("4", forKey: 4)
        cache.updateValue("5", forKey: 5)
        #expect(kept(cache, 1...5) == [1, 4, 5], "the two stale slots, not a live value, took the new ones")
        cache.removeAll()
        #expect(cache.isEmpty)
        cache.updateValue("6", forKey: 6)
        #expect(kept(cache, 1...6) == [6])
    }

    @Test func aCapacityBelowOneKeepsOneValue() {
        var cache = ClockCache<Int, String>(capacity: 0)
        cache.updateValue("a", forKey: 1)
        cache.updateValue("b", forKey: 2)
        #expect(cache.capacity == 1)
        #expect(kept(cache, 1...2) == [2])
    }

    @Test func aConnectionKeepsItsHotStatementsPreparedWhileOneOffSQLPassesThrough() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a)")
        let hot = try connection.cachedStatement("SELECT a FROM t")
        for number in 0..<(Connection.statementCacheLimit * 2) {
            _ = try connection.cachedStatement("SELECT a FROM t WHERE a = \(number)")
            if number % 64 == 0 { #expect(try connection.cachedStatement("SELECT a FROM t") === hot) }
        }
        #expect(try connection.cachedStatement("SELECT a FROM t") === hot, "never re-prepared")
        let first = try connection.cachedStatement("SELECT a FROM t WHERE a = 0")
        #expect(try connection.cachedStatement("SELECT a FROM t WHERE a = 0") === first)
    }
}
