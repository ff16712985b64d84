import Foundation
@_spi(DataStackInternal) import DataStackSupport

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
public struct PersistentStoreError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = PersistentStoreError
        /// The code's name, as written in Swift (`"incompatibleModel"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The file could not be opened or created (permissions, missing folder, full disk).
        public static let cannotOpen = Code("cannotOpen")
        /// The file is not a SQLite database, or not a Core Data store.
        public static let notAStore = Code("notAStore")
        /// The store was written with a model that differs from the coordinator's.
        public static let incompatibleModel = Code("incompatibleModel")
        /// The store or location refuses writes.
        public static let readOnly = Code("readOnly")
        /// A store type that needs a location was given none.
        public static let missingLocation = Code("missingLocation")
        /// A store for this location is already added to the coordinator.
        public static let alreadyAdded = Code("alreadyAdded")
        /// The store is not one of the coordinator's.
        public static let storeNotFound = Code("storeNotFound")
        /// The store type is not registered.
        public static let unknownStoreType = Code("unknownStoreType")
        /// Reading or writing the store failed.
        public static let ioFailure = Code("ioFailure")
        /// Migrating the store failed; the store is as it was.
        public static let migrationFailed = Code("migrationFailed")
        /// Another connection (another coordinator or process) held the
        /// database's lock for longer than the store's ``BusyMode`` waits.
        /// Nothing was written; trying again later may succeed.
        public static let busy = Code("busy")
        /// A history request went to a store that does not record persistent
        /// history: it was opened without ``StoreOptions/persistentHistoryTracking``,
        /// or its type keeps none.
        public static let historyNotTracked = Code("historyNotTracked")
        /// A history token names another store, or a transaction the store
        /// never wrote: it cannot bound this store's history.
        public static let historyTokenMismatch = Code("historyTokenMismatch")
        /// The history after the token was deleted (Core Data:
        /// `NSPersistentHistoryTokenExpiredError`, 134301): the caller has
        /// missed changes it can no longer read, and must refetch what it shows
        /// and start again from ``PersistentStoreCoordinator/currentPersistentHistoryToken(fromStores:)``.
        public static let historyExpired = Code("historyExpired")
        /// A history request of one kind was given to the other call: a fetch
        /// request to `deleteHistory`, or a delete request to `fetchHistory`.
        public static let invalidHistoryRequest = Code("invalidHistoryRequest")
    }

    /// The kind of failure.
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
