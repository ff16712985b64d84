import Foundation

/// An error of a persistent store or of the coordinator's store management:
/// what failed, and at which location.
///
/// ```swift
/// do {
///     try coordinator.addPersistentStore(type: .sqlite, at: url)
/// } catch let error as PersistentStoreError where error.code == .incompatibleModel {
///     print(error)   // the store at /…/Ticker.sqlite was written with another model: entities …
/// }
/// ```
public struct PersistentStoreError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// The file could not be opened or created (permissions, missing folder, full disk).
        case cannotOpen
        /// The file is not a SQLite database, or not a Core Data store.
        case notAStore
        /// The store was written with a model that differs from the coordinator's.
        case incompatibleModel
        /// The store or location refuses writes.
        case readOnly
        /// A store type that needs a location was given none.
        case missingLocation
        /// A store for this location is already added to the coordinator.
        case alreadyAdded
        /// The store is not one of the coordinator's.
        case storeNotFound
        /// The store type is not registered.
        case unknownStoreType
        /// Reading or writing the store failed.
        case ioFailure
        /// Migrating the store failed; the store is as it was.
        case migrationFailed
        /// Another connection (another coordinator or process) held the
        /// database's lock for longer than the store's ``BusyMode`` waits.
        /// Nothing was written; trying again later may succeed.
        case busy
        /// A history request went to a store that does not record persistent
        /// history: it was opened without ``StoreOptions/persistentHistoryTracking``,
        /// or its type keeps none.
        case historyNotTracked
        /// A history token names another store, or a transaction the store
        /// never wrote: it cannot bound this store's history.
        case historyTokenMismatch
        /// The history after the token was deleted (Core Data:
        /// `NSPersistentHistoryTokenExpiredError`, 134301): the caller has
        /// missed changes it can no longer read, and must refetch what it shows
        /// and start again from ``PersistentStoreCoordinator/currentPersistentHistoryToken(fromStores:)``.
        case historyExpired
        /// A history request of one kind was given to the other call: a fetch
        /// request to `deleteHistory`, or a delete request to `fetchHistory`.
        case invalidHistoryRequest
    }

    public var code: Code
    /// The store's location, when it has one.
    public var url: URL?
    /// What happened, in words.
    public var message: String
    /// The SQLite error underneath, if any, as text (result code and message).
    public var underlyingDescription: String?
    /// Whether the store is refused, or cannot be migrated, because of the
    /// model — its tables do not match, or its change cannot be mapped — as
    /// opposed to the disk, the file or another process holding it. Only
    /// such a store is recreated by ``StoreOptions/recreatesStoreWhenMigrationFails``.
    public var isModelMismatch: Bool

    public init(_ code: Code, url: URL?, message: String, underlying: (any Error)? = nil, isModelMismatch: Bool? = nil) {
        self.isModelMismatch = isModelMismatch ?? (code == .incompatibleModel)
        self.code = code
        self.url = url
        self.message = message
        self.underlyingDescription = underlying.map { "\($0)" }
    }

    public var description: String {
        var text = message
        if let url { text += " (store at \(url.path))" }
        if let underlyingDescription { text += ": \(underlyingDescription)" }
        return text
    }
}

extension PersistentStoreError {
    /// The error a store added read-only (``StoreOptions/isReadOnly``) throws
    /// for any change asked of it: every store, and the coordinator for it,
    /// says the same.
    public static func readOnly(url: URL?) -> PersistentStoreError {
        PersistentStoreError(.readOnly, url: url, message: "the store was added read-only (StoreOptions.isReadOnly), so it does not change")
    }
}

extension PersistentStoreError: LocalizedError {
    public var errorDescription: String? { description }
}
