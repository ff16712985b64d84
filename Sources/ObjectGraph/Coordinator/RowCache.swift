import Foundation
import Synchronization

/// The rows a coordinator has read recently, shared by all its contexts: a
/// fetch that returns faults leaves its rows here, and firing a fault reads
/// them without another query (Core Data's row cache).
///
/// The cache is bounded: past ``capacity`` rows it evicts by the CLOCK
/// algorithm — a hand sweeps the slots, sparing once each row read since it
/// last passed and evicting the first that was not — so memory stays flat
/// however much is fetched, and rows in use outlive a large fetch that is
/// never read. A missed row is read from the store. Saves and merges remove
/// the rows they make stale.
package final class RowCache: Sendable {
    private struct Entry {
        var node: IncrementalStoreNode
        var storedAt: UInt64
        /// The row's slot on the clock.
        var slot: Int
        /// Read since the hand last passed it.
        var referenced = false
    }

    private struct State {
        var rows: [ObjectID: Entry] = [:]
        /// The clock's slots: each the ID stored there, stale when that ID's entry names another slot or none.
        var slots: [ObjectID] = []
        var hand = 0
        var hits = 0
        var misses = 0
    }

    /// The most rows kept (``PersistentStoreCoordinator/defaultRowCacheCapacity`` unless the coordinator says otherwise).
    package let capacity: Int
    private let state = Mutex(State())

    package init(capacity: Int = PersistentStoreCoordinator.defaultRowCacheCapacity) {
        self.capacity = max(1, capacity)
    }

    /// Keeps rows for faults to fire from.
    package func store(_ nodes: [IncrementalStoreNode]) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            // One resize for a large fetch, not one per doubling on the way.
            state.rows.reserveCapacity(min(capacity, state.rows.count + nodes.count))
            for node in nodes.suffix(capacity) {
                // One hash of the ID for a row not cached yet while the clock
                // has room (a large fetch); a cached row keeps its slot and
                // mark; past capacity a new row takes the slot the clock frees.
                let room = state.slots.count < capacity
                let entry = Entry(node: node, storedAt: now, slot: room ? state.slots.count : -1)
                if let old = state.rows.updateValue(entry, forKey: node.objectID) {
                    if let index = state.rows.index(forKey: node.objectID) {
                        state.rows.values[index].slot = old.slot
                        state.rows.values[index].referenced = old.referenced
                    }
                    continue
                }
                // The new entry is in no slot yet, so the clock cannot evict it.
                let slot = room ? entry.slot : Self.freeSlot(in: &state, capacity: capacity)
                if !room { state.rows[node.objectID]?.slot = slot }
                if slot == state.slots.count { state.slots.append(node.objectID) } else { state.slots[slot] = node.objectID }
            }
        }
    }

    /// A slot for a new row: a new one while the clock has fewer than
    /// `capacity`, else the first the hand finds stale or unreferenced (whose
    /// row it evicts), sparing and clearing referenced ones on the way.
    private static func freeSlot(in state: inout State, capacity: Int) -> Int {
        if state.slots.count < capacity { return state.slots.count }
        while true {
            let slot = state.hand
            state.hand = (state.hand + 1) % state.slots.count
            let id = state.slots[slot]
            guard let index = state.rows.index(forKey: id), state.rows.values[index].slot == slot else { return slot }
            if state.rows.values[index].referenced {
                state.rows.values[index].referenced = false
            } else {
                state.rows.remove(at: index)
                return slot
            }
        }
    }

    /// The cached row, if it is younger than `maxAge` seconds (negative: any age).
    package func node(for objectID: ObjectID, maxAge: TimeInterval) -> IncrementalStoreNode? {
        let entry = state.withLock { state -> Entry? in
            guard let index = state.rows.index(forKey: objectID) else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            state.rows.values[index].referenced = true
            return state.rows.values[index]
        }
        guard let entry else { return nil }
        if maxAge >= 0 {
            let age = Double(DispatchTime.now().uptimeNanoseconds - entry.storedAt) / 1e9
            if age > maxAge { return nil }
        }
        return entry.node
    }

    /// Drops rows made stale by a save or a merge, walking whichever is
    /// smaller: the cache or the sets. A merge of a large save into a small
    /// cache stays cheap. Their slots go stale, for the hand to reuse.
    package func removeRows(of first: Set<ObjectID>, and second: Set<ObjectID> = []) {
        state.withLock { state in
            if state.rows.isEmpty { return }
            if state.rows.count < first.count + second.count {
                state.rows = state.rows.filter { !first.contains($0.key) && !second.contains($0.key) }
            } else {
                for id in first { state.rows[id] = nil }
                for id in second { state.rows[id] = nil }
            }
        }
    }

    /// Drops every row.
    package func removeAll() {
        state.withLock { state in
            state.rows.removeAll()
            state.slots.removeAll()
            state.hand = 0
        }
    }

    /// How many rows are cached.
    package var count: Int { state.withLock { $0.rows.count } }

    /// Lookups that found their row and lookups that did not since the cache was made, and the rows it holds.
    package var statistics: RowCacheStatistics {
        state.withLock { RowCacheStatistics(hits: $0.hits, misses: $0.misses, rows: $0.rows.count, capacity: capacity) }
    }
}

/// How a coordinator's row cache has served faults: for diagnostics and
/// benchmarks (``PersistentStoreCoordinator/rowCacheStatistics``).
public struct RowCacheStatistics: Sendable, Hashable {
    /// Faults fired (and rows looked up) that found their row cached.
    public var hits: Int
    /// Lookups that had to read the store.
    public var misses: Int
    /// Rows cached now.
    public var rows: Int
    /// The most rows the cache keeps before it evicts.
    public var capacity: Int
}
