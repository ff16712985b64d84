import Foundation

/// One save (or batch operation) as the persistent history recorded it
/// (Core Data: `NSPersistentHistoryTransaction`, a row of `ATRANSACTION`).
public struct PersistentHistoryTransaction: Sendable, Hashable {
    /// The bookmark just after this transaction: fetch the history after it to get the transactions that follow.
    public var token: PersistentHistoryToken
    /// The transaction's number in its store (`ATRANSACTION.Z_PK`).
    public var transactionNumber: Int64 { token.transactionNumber }
    /// The UUID of the store that recorded it.
    public var storeIdentifier: String { token.storeIdentifier }
    /// When the save was written.
    public var timestamp: Date
    /// The saving context's ``ManagedObjectContext/transactionAuthor``.
    public var author: String?
    /// The saving context's ``ManagedObjectContext/name``.
    public var contextName: String?
    /// The name of the process that saved (Core Data records the process name, not its pid).
    public var processID: String
    /// The bundle identifier of the process that saved; on Linux, where
    /// executables have none, the process name.
    public var bundleID: String
    /// The objects it changed, in the order they were recorded; nil when the
    /// request asked for transactions only.
    public var changes: [PersistentHistoryChange]?

    public init(token: PersistentHistoryToken, timestamp: Date, author: String?, contextName: String?,
                processID: String, bundleID: String, changes: [PersistentHistoryChange]?) {
        self.token = token
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.processID = processID
        self.bundleID = bundleID
        self.changes = changes
    }

    /// The transaction as a save, to hand to
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)`` (Core Data:
    /// `objectIDNotification()`): another process's or an earlier run's changes
    /// merge into a context the way a save of this process does.
    public func contextDidSave() -> ContextDidSave {
        var save = ContextDidSave()
        for change in changes ?? [] {
            switch change.changeType {
            case .insert: save.insertedObjectIDs.insert(change.changedObjectID)
            case .update: save.updatedObjectIDs.insert(change.changedObjectID)
            case .delete: save.deletedObjectIDs.insert(change.changedObjectID)
            }
        }
        return save
    }
}
