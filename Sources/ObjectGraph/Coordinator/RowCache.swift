import Foundation
import Synchronization

/// The rows a coordinator has read recently, shared by all its contexts: a
/// fetch that returns faults leaves its rows here, and firing a fault reads
/// them without another query (Core Data's row cache).
///
/// The cache is bounded: past ``capacity`` rows it starts again empty, so memory
/// stays flat however much is fetched; a missed row is read from the store.
/// Saves and merges remove the rows they make stale.
package final class RowCache: Sendable {
    private struct Entry {
        var node: IncrementalStoreNode
        var storedAt: UInt64
    }

    /// The most rows kept. The default is 200,000.
    package let capacity: Int
    private let rows = Mutex<[ObjectID: Entry]>([:])

    package init(capacity: Int = 200_000) {
        self.capacity = capacity
    }

    /// Keeps rows for faults to fire from.
    package func store(_ nodes: [IncrementalStoreNode]) {
        let now = DispatchTime.now().uptimeNanoseconds
        rows.withLock { rows in
            if rows.count + nodes.count > capacity { rows.removeAll(keepingCapacity: true) }
            for node in nodes.prefix(capacity) { rows[node.objectID] = Entry(node: node, storedAt: now) }
        }
    }

    /// The cached row, if it is younger than `maxAge` seconds (negative: any age).
    package func node(for objectID: ObjectID, maxAge: TimeInterval) -> IncrementalStoreNode? {
        guard let entry = rows.withLock({ $0[objectID] }) else { return nil }
        if maxAge >= 0 {
            let age = Double(DispatchTime.now().uptimeNanoseconds - entry.storedAt) / 1e9
            if age > maxAge { return nil }
        }
        return entry.node
    }

    /// Drops rows made stale by a save or a merge, walking whichever is
    /// smaller: the cache or the sets. A merge of a large save into a small
    /// cache stays cheap.
    package func remove(_ first: Set<ObjectID>, _ second: Set<ObjectID> = []) {
        rows.withLock { rows in
            if rows.isEmpty { return }
            if rows.count < first.count + second.count {
                rows = rows.filter { !first.contains($0.key) && !second.contains($0.key) }
            } else {
                for id in first { rows[id] = nil }
                for id in second { rows[id] = nil }
            }
        }
    }

    /// Drops every row.
    package func removeAll() {
        rows.withLock { $0.removeAll() }
    }

    /// How many rows are cached.
    package var count: Int { rows.withLock { $0.count } }
}
