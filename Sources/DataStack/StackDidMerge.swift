import Foundation

/// What the stack merged into its main context after a save on the writer
/// coordinator (the payload of ``StackManager/didMergeNotification``).
public struct StackDidMerge: Sendable {
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
        guard notification.name == StackManager.didMergeNotification,
              let payload = notification.userInfo?[Self.key] as? StackDidMerge else {
            throw NotificationPayloadError(name: notification.name, expected: "StackDidMerge")
        }
        self = payload
    }

    init(save: ContextDidSave, merged: Bool, refreshedObjectIDs: Set<ObjectID>, removedObjectIDs: Set<ObjectID>, duration: Duration) {
        self.save = save
        self.merged = merged
        self.refreshedObjectIDs = refreshedObjectIDs
        self.removedObjectIDs = removedObjectIDs
        self.duration = duration
    }
}
