import Foundation

/// A store that may run its reads on a replica of its database while it
/// writes to the primary: the PostgreSQL store with a streaming standby
/// (``StoreOptions/standbyURL``). A read goes to the primary instead when the
/// replica has not replayed what the read must see within its bound, or cannot
/// be reached; the store reports each move.
///
/// The coordinator starts observing when it adds such a store and posts
/// ``PersistentStoreCoordinator/readSourceDidChangeNotification``; the store
/// stops calling once it is removed (``PersistentStore/willRemove()``).
public protocol ReplicaReadingStore: PersistentStore {
    /// Whether the last read ran on the replica; nil before the first read, or
    /// when the store has no replica.
    var readsFromReplica: Bool? { get }

    /// Calls `onChange` each time reads move between the replica and the
    /// primary (not for every read), on the thread of the read that moved
    /// them. A second call replaces the first observer.
    func observeReadSource(_ onChange: @escaping @Sendable (ReadSourceChange) -> Void)
}
