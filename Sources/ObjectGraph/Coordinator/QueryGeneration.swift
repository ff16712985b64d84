import Foundation

/// One generation of a coordinator's data: each store's snapshot, and the rows
/// read at it.
///
/// The rows read at a fixed snapshot never go stale, so they are cached here
/// rather than in the coordinator's row cache, whose rows are the latest and
/// which a pinned context must neither read nor fill.
///
/// The coordinator and the stores are held, not named by identifier: a token
/// kept after its coordinator is gone could otherwise match a new coordinator,
/// or a new store, made at the same address.
package final class QueryGeneration: Sendable {
    /// The coordinator whose stores the snapshots are of.
    let coordinator: PersistentStoreCoordinator
    /// Each store's snapshot. A store added to the coordinator after the
    /// generation was made has none: it is read as it is.
    private let snapshots: [(store: any PersistentStore, snapshot: any StoreQueryGeneration)]
    let rowCache: RowCache

    init(coordinator: PersistentStoreCoordinator, snapshots: [(store: any PersistentStore, snapshot: any StoreQueryGeneration)]) {
        self.coordinator = coordinator
        self.snapshots = snapshots
        rowCache = RowCache(capacity: coordinator.rowCacheCapacity)
    }

    func snapshot(of store: any PersistentStore) -> (any StoreQueryGeneration)? {
        snapshots.first { $0.store === store }?.snapshot
    }
}
