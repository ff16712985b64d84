import Foundation

extension PersistentStoreCoordinator {
    /// Posted when the reads of one of the coordinator's stores move between
    /// its replica and its primary (a ``ReplicaReadingStore``: the PostgreSQL
    /// store with a standby). `object` is the coordinator; the payload a
    /// ``ReadSourceChange``. Posted on the thread of the read that moved, which
    /// may be any context's queue: hop to your own before touching objects.
    public static let readSourceDidChangeNotification = Notification.Name("DataStack.PersistentStoreCoordinator.readSourceDidChange")

    /// Starts posting a store's read-source changes, when it reads from a replica.
    func startReadSourceNotifications(of store: any PersistentStore) {
        guard let replicated = store as? any ReplicaReadingStore else { return }
        replicated.observeReadSource { [weak self] change in
            guard let self else { return }
            NotificationCenter.default.post(name: Self.readSourceDidChangeNotification, object: self,
                                            userInfo: [ReadSourceChange.key: change])
        }
    }
}

/// Where a store's reads run now, and why: the payload of
/// ``PersistentStoreCoordinator/readSourceDidChangeNotification`` and of the
/// stack's `StackManager.readSourceDidChangeNotification`.
public struct ReadSourceChange: Sendable, Hashable {
    /// The store's UUID (`NSStoreUUID`).
    public var storeIdentifier: String
    /// Whether reads now run on the replica (false: on the primary).
    public var readsFromReplica: Bool
    /// Why reads went to the primary — the replica lagged past its bound, or
    /// could not be reached, with the error — or nil when they returned to the replica.
    public var reason: String?

    public init(storeIdentifier: String, readsFromReplica: Bool, reason: String?) {
        self.storeIdentifier = storeIdentifier
        self.readsFromReplica = readsFromReplica
        self.reason = reason
    }

    package static let key = "DataStack.ReadSourceChange"

    /// Reads the payload of a ``PersistentStoreCoordinator/readSourceDidChangeNotification``,
    /// or of the stack's notification that passes it on.
    ///
    /// - Throws: ``NotificationPayloadError`` for a notification without one.
    public init(_ notification: Notification) throws {
        guard let change = notification.userInfo?[Self.key] as? ReadSourceChange else {
            throw NotificationPayloadError(name: notification.name, expected: "\(Self.self)")
        }
        self = change
    }
}
