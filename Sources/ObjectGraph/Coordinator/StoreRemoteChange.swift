import Foundation

extension PersistentStoreCoordinator {
    /// Posted after another connection or process committed to one of the
    /// coordinator's stores that was added with
    /// ``StoreOptions/remoteChangeNotifications`` (Core Data:
    /// `NSPersistentStoreRemoteChange`). `object` is the coordinator; the
    /// payload a ``StoreRemoteChange``. Posted on a private queue, as in Core
    /// Data: hop to your context's queue before touching its objects.
    ///
    /// Every commit by another connection counts — another coordinator of this
    /// process on the same file too — and several commits between two checks
    /// make one notification; the same token may arrive twice. Fetch the
    /// history after the last token you processed, up to the payload's.
    public static let storeRemoteChangeNotification = Notification.Name("DataStack.PersistentStoreCoordinator.storeRemoteChange")

    /// Starts a store's remote-change notifications, when its options ask for them.
    func startRemoteChangeNotifications(of store: any PersistentStore, options: StoreOptions) throws {
        guard options.remoteChangeNotifications, let observing = store as? any RemoteChangeObservingStore else { return }
        try observing.startObservingRemoteChanges { [weak self] change in
            guard let self else { return }
            NotificationCenter.default.post(name: Self.storeRemoteChangeNotification, object: self,
                                            userInfo: [StoreRemoteChange.key: change])
        }
    }
}

/// What a ``PersistentStoreCoordinator/storeRemoteChangeNotification`` says:
/// which store changed, and how far its history goes now.
public struct StoreRemoteChange: Sendable, Hashable {
    /// The store's UUID (`NSStoreUUID`).
    public var storeIdentifier: String
    /// The store's file (`NSPersistentStoreURLKey`).
    public var storeURL: URL?
    /// The token of the store's last transaction when the change was noticed,
    /// for a store that records persistent history; nil otherwise
    /// (`NSPersistentHistoryTokenKey`).
    public var historyToken: PersistentHistoryToken?

    public init(storeIdentifier: String, storeURL: URL?, historyToken: PersistentHistoryToken?) {
        self.storeIdentifier = storeIdentifier
        self.storeURL = storeURL
        self.historyToken = historyToken
    }

    static let key = "DataStack.StoreRemoteChange"

    /// Reads the payload of a ``PersistentStoreCoordinator/storeRemoteChangeNotification``.
    ///
    /// - Throws: ``NotificationPayloadError`` for any other notification.
    public init(_ notification: Notification) throws {
        self = try notification.payload(of: PersistentStoreCoordinator.storeRemoteChangeNotification, at: Self.key)
    }
}
