import Foundation

/// A store that records persistent history (Core Data: a SQLite store with
/// `NSPersistentHistoryTrackingKey`). `SQLiteStore` adopts it; a store of
/// another kind does not, and history requests for it throw
/// ``PersistentStoreError/Code/historyNotTracked``.
///
/// A store that adopts it records one transaction per save in the save's own
/// transaction, so the history holds exactly the saves that stand.
public protocol PersistentHistoryStore: PersistentStore {
    /// Whether the store records history now (opened with ``StoreOptions/persistentHistoryTracking``).
    var tracksPersistentHistory: Bool { get }

    /// The token of the store's last transaction; a token with transaction number 0 before any.
    ///
    /// - Throws: ``PersistentStoreError/Code/historyNotTracked`` when the store does not record history.
    func currentPersistentHistoryToken() throws -> PersistentHistoryToken

    /// The transactions a fetch request asks for, oldest first.
    ///
    /// - Throws: ``PersistentStoreError`` with ``PersistentStoreError/Code/historyNotTracked``,
    ///   ``PersistentStoreError/Code/historyTokenMismatch`` or ``PersistentStoreError/Code/historyExpired``.
    func fetchHistory(_ request: PersistentHistoryRequest) throws -> [PersistentHistoryTransaction]

    /// Deletes the transactions a delete request names, with their changes;
    /// returns how many transactions were deleted.
    func deleteHistory(_ request: PersistentHistoryRequest) throws -> Int
}
