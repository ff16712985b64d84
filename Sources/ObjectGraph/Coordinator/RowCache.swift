@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// The rows a coordinator has read recently, shared by all its contexts: a
/// fetch that returns faults leaves its rows here, and firing a fault reads
/// them without another query (Core Data's row cache).
///
/// The cache is bounded: past ``capacity`` rows it evicts by the CLOCK
/// algorithm (``RowTable``) — a hand sweeps the table, sparing once each
/// row read since it last passed and evicting the first that was not — so memory stays flat
/// however much is fetched, and rows in use outlive a large fetch that is
/// never read. A missed row is read from the store. Only its coordinator
/// stores and removes rows: those its own saves make stale, and those others
/// tell it changed (a merge, a batch request, a history transaction).
package final class RowCache: Sendable {
    private struct Row: RowTableElement {
        var values: Values
        var storedAt: UInt64

        var objectID: ObjectID {
            switch values {
            case .node(let node): node.objectID
            case .encoded(let encoded): encoded.objectID
            }
        }
    }

    /// A row as the store gave it: values, or bytes decoded when a fault
    /// fires from them (a fetch of faults, see ``EncodedStoreNode``).
    private enum Values {
        case node(IncrementalStoreNode)
        case encoded(EncodedStoreNode)

        var node: IncrementalStoreNode {
            switch self {
            case .node(let node): node
            case .encoded(let encoded): encoded.node
            }
        }
    }

    private struct State {
        var rows: RowTable<Row>
        var hits = 0
        var misses = 0
    }

    /// The most rows kept (``PersistentStoreCoordinator/defaultRowCacheCapacity`` unless the coordinator says otherwise).
    package let capacity: Int
    private let state: Locked<State>

    package init(capacity: Int = PersistentStoreCoordinator.defaultRowCacheCapacity) {
        self.capacity = max(1, capacity)
        state = Locked(State(rows: RowTable(capacity: capacity)))
    }

    /// Keeps rows for faults to fire from.
    ///
    /// The rows are consumed, last first: each moves out of the array into
    /// the table, as the rows kept as bytes do (below).
    package func store(_ nodes: consuming [IncrementalStoreNode]) {
        var nodes = nodes
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            state.rows.reserveCapacity(state.rows.count + nodes.count)
            var stored = 0
            while stored < capacity, let node = nodes.popLast() {
                state.rows.update(Row(values: .node(consume node), storedAt: now))
                stored += 1
            }
        }
    }

    /// Keeps rows as bytes for faults to fire from.
    ///
    /// Written out rather than shared with the other `store` through closures
    /// that pick the ID and the values: it runs once per row of every fetch
    /// of faults, and this way nothing stands between the loop and the insert.
    ///
    /// The rows are consumed, last first, each moved out of the array into the
    /// table: copied, each cost a retain of its ID's scope and of its bytes'
    /// chunk, and the array's teardown a release of both (~110 instructions
    /// a row). Given an array it holds alone, nothing is copied.
    package func store(_ nodes: consuming [EncodedStoreNode]) {
        var nodes = nodes
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            // One resize for a large fetch, not one per doubling on the way.
            state.rows.reserveCapacity(state.rows.count + nodes.count)
            // The fetch's last `capacity` rows: those before them would only
            // evict the fetch's own rows.
            var stored = 0
            while stored < capacity, let node = nodes.popLast() {
                state.rows.update(Row(values: .encoded(consume node), storedAt: now))
                stored += 1
            }
        }
    }

    /// The cached row, if it is younger than `maxAge` seconds (negative: any age).
    package func node(for objectID: ObjectID, maxAge: TimeInterval) -> IncrementalStoreNode? {
        let row = state.withLock { state -> Row? in
            let row = state.rows.element(for: objectID)
            if row == nil { state.misses += 1 } else { state.hits += 1 }
            return row
        }
        guard let row else { return nil }
        if maxAge >= 0 {
            let age = Double(DispatchTime.now().uptimeNanoseconds - row.storedAt) / 1e9
            if age > maxAge { return nil }
        }
        return row.values.node
    }

    /// Drops rows made stale by a save or a merge, walking whichever is
    /// smaller: the cache or the sets. A merge of a large save into a small
    /// cache stays cheap.
    package func removeRows(of first: Set<ObjectID>, and second: Set<ObjectID> = []) {
        state.withLock { state in
            if state.rows.isEmpty { return }
            if state.rows.count < first.count + second.count {
                state.rows.removeElements { first.contains($0) || second.contains($0) }
            } else {
                for id in first { state.rows.removeElement(for: id) }
                for id in second { state.rows.removeElement(for: id) }
            }
        }
    }

    /// Drops the rows of the objects a save wrote: one lookup each, none
    /// when nothing is cached (an import that fetched nothing).
    package func removeRows(of nodes: [IncrementalStoreNode]...) {
        state.withLock { state in
            if state.rows.isEmpty { return }
            for list in nodes {
                for node in list { state.rows.removeElement(for: node.objectID) }
            }
        }
    }

    /// Drops every row.
    package func removeAll() {
        state.withLock { $0.rows.removeAll() }
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
