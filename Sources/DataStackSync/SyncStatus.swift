import Foundation

/// What a replica's sync engine is doing, for a screen or a log.
public enum SyncStatus: Sendable, Equatable {
    /// Not started, or stopped.
    case stopped
    /// Nothing to do until the next local save or the hub's next change.
    case idle
    /// Sending local changes to the hub.
    case pushing
    /// Reading and applying other replicas' changes.
    case pulling
    /// Starting again from the hub's snapshot: the changes this replica needed
    /// next were purged (``SyncEngine`` re-seeds, then pulls on from the snapshot).
    case reseeding
    /// The hub cannot be reached; local saves go on and are pushed once it can.
    case offline(SyncError)
    /// A failure that retrying will not mend (a model version mismatch, a purged
    /// log, damaged data): sync waits for someone to act.
    case error(SyncError)
}

/// One thing a sync engine did, in order, on ``SyncEngine/events``.
public enum SyncEvent: Sendable, Equatable {
    case statusChanged(SyncStatus)
    /// Local changes reached the hub: how many, and the last hub sequence they got.
    case pushed(count: Int, through: Int64)
    /// Other replicas' changes were applied here: how many changes were read,
    /// how many objects changed, and the hub sequence now applied.
    case pulled(count: Int, objectsChanged: Int, through: Int64)
    /// The replica started again from the hub's snapshot of the log through
    /// `through` (the changes it needed were purged): `objects` objects read.
    case reseeded(through: Int64, objects: Int)
    /// A pulled change was stamped by a replica whose clock runs ahead of this
    /// one's by more than a day: the change is applied (a hybrid clock never
    /// goes back), and the other machine's clock needs fixing.
    case clockSkew(replica: UUID, aheadByMilliseconds: Int64)
    /// A pulled change would have given an object a unique key that another
    /// object holds in the hub's order (an update moving onto a taken key):
    /// it was applied without that attribute, here and on every replica
    /// alike. ``SyncConflict/current`` is the value the object keeps,
    /// ``SyncConflict/incoming`` the one it did not get.
    case uniqueKeyConflict(SyncConflict)
}
