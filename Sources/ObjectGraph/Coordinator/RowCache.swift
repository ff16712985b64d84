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
    /// A row as the store gave it: values, or bytes decoded when a fault
    /// fires from them (a fetch of faults, see ``EncodedStoreNode``). The
    /// time it was stored is the table's stamp beside it (see ``stamp(at:in:)``).
    ///
    /// Three words, the bucket of the table: rows kept as values are boxed,
    /// so that their four words (the ID's two, the values, the version) do
    /// not make every bucket as large. Those are the rows of single faults
    /// and of stores that keep no bytes; a fetch of faults keeps its rows as
    /// bytes, one bucket each.
    private enum Row: RowTableElement {
        case node(NodeBox)
        case encoded(EncodedStoreNode)

        var objectIDScope: ObjectIDScope {
            switch self {
            case .node(let box): box.node.objectID.scope
            case .encoded(let encoded): encoded.objectIDScope
            }
        }

        var objectIDKey: UInt64 {
            switch self {
            case .node(let box): box.node.objectID.rawKey
            case .encoded(let encoded): encoded.objectIDKey
            }
        }

        var node: IncrementalStoreNode {
            switch self {
            case .node(let box): box.node
            case .encoded(let encoded): encoded.node
            }
        }
    }

    /// A row's size in the table (for tests of its layout): three words.
    static var rowStride: Int { MemoryLayout<Row>.stride }

    private final class NodeBox: Sendable {
        let node: IncrementalStoreNode
        init(_ node: consuming IncrementalStoreNode) { self.node = node }
    }

    private struct State {
        var rows: RowTable<Row>
        /// What the rows' stamps count from, in the uptime's nanoseconds.
        var epoch: UInt64
        var hits = 0
        var misses = 0
    }

    /// The most rows kept (``PersistentStoreCoordinator/defaultRowCacheCapacity`` unless the coordinator says otherwise).
    package let capacity: Int
    private let state: Locked<State>

    /// The time now, in nanoseconds: the system's uptime, which the callers'
    /// age limits count in too (see ``node(for:maxAge:)``); another clock
    /// for tests only.
    private let clock: @Sendable () -> UInt64

    package init(capacity: Int = PersistentStoreCoordinator.defaultRowCacheCapacity,
                 clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.capacity = max(1, capacity)
        self.clock = clock
        state = Locked(State(rows: RowTable(capacity: capacity), epoch: clock()))
    }

    // MARK: - Stamps
    //
    // A row's time is a stamp beside it in the table: microseconds since the
    // state's epoch, plus one, in 36 bits (19 hours). Past that the epoch
    // moves on by half the range, and rows older than the new epoch get
    // stamp 0: an age too great to say, stale for any finite staleness
    // interval — they are read again, which is always correct. A stamp rounds
    // the time down, so the age it gives is never less than the row's own.

    /// The stamp for a row stored at `now`, moving the epoch on if needed.
    private static func stamp(at now: UInt64, in state: inout State) -> UInt64 {
        let maximum = RowTable<Row>.maximumStamp
        var stamp = (now &- state.epoch) / 1_000 + 1
        if stamp > maximum {
            let shift = stamp - maximum / 2
            state.rows.lowerStamps(by: shift)
            // Wrapping: a clock that stepped back reads as far ahead, and
            // the epoch moves to it all the same (every row then too old to say).
            state.epoch &+= shift &* 1_000
            stamp -= shift
        }
        return stamp
    }

    /// How long ago, in seconds, a row with `stamp` was stored; nil if too long to say.
    private static func age(ofStamp stamp: UInt64, epoch: UInt64, now: UInt64) -> TimeInterval? {
        guard stamp > 0 else { return nil }
        return Double(now &- (epoch &+ (stamp - 1) * 1_000)) / 1e9
    }

    /// Keeps rows for faults to fire from.
    ///
    /// The rows are consumed, last first: each moves out of the array into
    /// the table, as the rows kept as bytes do (below).
    package func store(_ nodes: consuming [IncrementalStoreNode]) {
        var nodes = nodes
        let now = clock()
        state.withLock { state in
            state.rows.reserveCapacity(state.rows.count + nodes.count)
            let stamp = Self.stamp(at: now, in: &state)
            var stored = 0
            while stored < capacity, let node = nodes.popLast() {
                state.rows.update(.node(NodeBox(consume node)), stamp: stamp)
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
        let now = clock()
        state.withLock { state in
            // One resize for a large fetch, not one per doubling on the way.
            state.rows.reserveCapacity(state.rows.count + nodes.count)
            let stamp = Self.stamp(at: now, in: &state)
            // The fetch's last `capacity` rows: those before them would only
            // evict the fetch's own rows.
            var stored = 0
            while stored < capacity, let node = nodes.popLast() {
                state.rows.update(.encoded(consume node), stamp: stamp)
                stored += 1
            }
        }
    }

    /// The cached row, if it is younger than `maxAge` seconds (negative: any age).
    package func node(for objectID: ObjectID, maxAge: TimeInterval) -> IncrementalStoreNode? {
        let found = state.withLock { state -> (row: Row, stamp: UInt64, epoch: UInt64)? in
            guard let found = state.rows.element(for: objectID) else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            return (found.element, found.stamp, state.epoch)
        }
        guard let found else { return nil }
        if maxAge >= 0 {
            guard let age = Self.age(ofStamp: found.stamp, epoch: found.epoch, now: clock()),
                  age <= maxAge else { return nil }
        }
        return found.row.node
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
