import Foundation

/// One generation of a coordinator's data: each store's snapshot, and the rows
/// read at it.
///
/// The rows read at a fixed snapshot never go stale, so they are cached here
/// rather than in the coordinator's row cache, whose rows are the latest and
/// which a pinned context must neither read nor fill.
package final class QueryGeneration: Sendable {
    /// The coordinator whose stores the snapshots are of.
    let coordinatorID: ObjectIdentifier
    /// Each store's snapshot, by the store's identity. A store added to the
    /// coordinator after the generation was made has none: it is read as it is.
    private let snapshots: [ObjectIdentifier: any StoreQueryGeneration]
    let rowCache: RowCache

    init(coordinator: PersistentStoreCoordinator, snapshots: [ObjectIdentifier: any StoreQueryGeneration]) {
        coordinatorID = ObjectIdentifier(coordinator)
        self.snapshots = snapshots
        rowCache = RowCache(capacity: coordinator.rowCacheCapacity)
    }

    func snapshot(of store: any PersistentStore) -> (any StoreQueryGeneration)? {
        snapshots[ObjectIdentifier(store)]
    }
}
