import Foundation

/// A store that notices commits made to it by other connections or processes
/// (``StoreOptions/remoteChangeNotifications``). `SQLiteStore` adopts it.
/// The coordinator starts observing when it adds such a store with the option
/// on, and the store stops when it is removed (``PersistentStore/willRemove()``).
public protocol RemoteChangeObservingStore: PersistentStore {
    /// Starts calling `onChange`, on a private queue, after other connections
    /// commit to the store. A second call replaces the first observer.
    func startObservingRemoteChanges(_ onChange: @escaping @Sendable (StoreRemoteChange) -> Void) throws

    /// Stops observing; when it returns, `onChange` is not called again.
    func stopObservingRemoteChanges()
}
