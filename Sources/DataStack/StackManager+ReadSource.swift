@_spi(DataStackInternal) import DataStackSupport
import Foundation
import ObjectGraph

// MARK: - Reads from a standby

extension StackManager {
    /// Posted when the main context's reads move between the store's standby
    /// and its primary (``StoreOptions/standbyURL``): the standby lagged past
    /// ``StoreOptions/standbyMaximumLag`` or could not be reached, or reads
    /// returned to it. `object` is the stack; the payload a ``ReadSourceChange``
    /// (`try ReadSourceChange(notification)`). Posted on the thread of the read
    /// that moved — the main queue for the main context's own reads. Importers'
    /// reads are reported on the writer coordinator's
    /// ``PersistentStoreCoordinator/readSourceDidChangeNotification``.
    public static let readSourceDidChangeNotification = Notification.Name("DataStack.StackManager.readSourceDidChange")

    /// Whether the main context's last read ran on the store's standby; nil
    /// before the first read, without a standby, or before setup.
    public var readsFromStandby: Bool? {
        guard let coordinator = state.withLock({ $0.setup?.mainCoordinator }) else { return nil }
        return coordinator.persistentStores.lazy.compactMap { ($0 as? any ReplicaReadingStore)?.readsFromReplica }.first
    }

    /// Passes the main coordinator's read-source changes on as the stack's.
    func installReadSourceObserver(for setup: Setup) {
        let token = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.readSourceDidChangeNotification, object: setup.mainCoordinator, queue: nil
        ) { [weak self] notification in
            // A notification without the payload is not a store's; nothing to pass on.
            guard let self, let change = try? ReadSourceChange(notification) else { return }
            NotificationCenter.default.post(name: Self.readSourceDidChangeNotification, object: self,
                                            userInfo: [ReadSourceChange.key: change])
        }
        state.withLock { $0.observers.append(token) }
    }
}
