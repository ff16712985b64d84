import Foundation

/// What the stack merged into its main context after a save on the writer
/// coordinator, or a transaction another process wrote to the store (the
/// payload of ``StackManager/didMergeNotification``).
public struct StackDidMerge: Sendable {
    /// Where a merged save came from.
    public enum Source: Sendable, Hashable {
        /// An importer context of this stack (the writer coordinator).
        case importer
        /// A transaction of the store's persistent history that another writer
        /// recorded: another process, or another stack or coordinator of this
        /// process on the same file (see ``StackManager/followsPersistentHistory``).
        /// `author` is its ``ManagedObjectContext/transactionAuthor``, `processID`
        /// the name of the process that saved it.
        case otherProcess(author: String?, processID: String)
        /// The history after the stack's bookmark was deleted before the stack
        /// could read it: what changed is unknown, so the main context refreshed
        /// every object it has registered and ``StackDidMerge/save`` is empty.
        /// Lists must fetch again.
        case expiredHistory
    }

    /// Where the save came from.
    public var source: Source
    /// The save, by object ID: what the importer inserted, updated and deleted.
    public var save: ContextDidSave
    /// Whether the main context merged it (false when
    /// ``StackManager/mergesIncomingSavedObjects`` is off).
    public var merged: Bool
    /// The registered objects of the main context that the merge refreshed.
    public var refreshedObjectIDs: Set<ObjectID>
    /// The registered objects of the main context that the merge removed.
    public var removedObjectIDs: Set<ObjectID>
    /// How long the merge took on the main queue.
    public var duration: Duration

    static let key = "DataStack.StackDidMerge"

    /// Reads the payload of a ``StackManager/didMergeNotification``.
    ///
    /// - Throws: ``NotificationPayloadError`` for any other notification.
    public init(_ notification: Notification) throws {
        self = try notification.payload(of: StackManager.didMergeNotification, at: Self.key)
    }

    init(source: Source, save: ContextDidSave, merged: Bool, refreshedObjectIDs: Set<ObjectID>,
         removedObjectIDs: Set<ObjectID>, duration: Duration) {
        self.source = source
        self.save = save
        self.merged = merged
        self.refreshedObjectIDs = refreshedObjectIDs
        self.removedObjectIDs = removedObjectIDs
        self.duration = duration
    }
}
