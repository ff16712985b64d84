import Foundation

/// What a batch request returns (Core Data: `NSBatchInsertRequestResultType`,
/// `NSBatchUpdateRequestResultType` and `NSBatchDeleteRequestResultType`, without the prefix).
public enum BatchResultType: Int, Sendable, Hashable, CaseIterable {
    /// Only whether it succeeded (which a returned result means).
    case statusOnly = 0
    /// The IDs of the rows it changed.
    case objectIDs = 1
    /// The number of rows it changed.
    case count = 2
}

/// The outcome of a batch request (Core Data: `NSBatchInsertResult`, `NSBatchUpdateResult`, `NSBatchDeleteResult`).
///
/// The IDs come as a ``ContextDidSave`` because that is what a context merges:
/// hand them to ``ManagedObjectContext/mergeChanges(fromRemoteContextSave:into:)``.
public enum BatchResult: Sendable, Equatable {
    /// For ``BatchResultType/statusOnly``.
    case statusOnly
    /// For ``BatchResultType/count``: rows inserted plus stored rows an upsert
    /// updated, rows updated, or rows deleted (cascades included).
    case count(Int)
    /// For ``BatchResultType/objectIDs``: the inserted rows and the stored rows
    /// an upsert updated, the updated rows, or the deleted rows (cascades
    /// included) and the rows whose to-one a nullify rule cleared.
    case objectIDs(ContextDidSave)
}

/// What a store's batch changed, by object ID.
@_spi(StoreImplementation) public struct BatchChanges: Sendable {
    // The updated and deleted IDs are sets, as a did-save carries them: a
    // million IDs are hashed once, not again for the row cache and again for
    // the notification. The inserted ones are a list, built into a set only
    // if the save's payload is read as one (see `DeferredObjectIDSet`).
    public var insertedObjectIDs: Set<ObjectID> {
        get { inserted.set }
        set { inserted = DeferredObjectIDSet(newValue) }
    }
    package var inserted = DeferredObjectIDSet()
    public var updatedObjectIDs: Set<ObjectID> = []
    public var deletedObjectIDs: Set<ObjectID> = []
    /// The history transaction the store recorded, if it tracks history.
    public var historyToken: PersistentHistoryToken?

    public init(insertedObjectIDs: Set<ObjectID> = [], updatedObjectIDs: Set<ObjectID> = [], deletedObjectIDs: Set<ObjectID> = [],
                 historyToken: PersistentHistoryToken? = nil) {
        self.inserted = DeferredObjectIDSet(insertedObjectIDs)
        self.updatedObjectIDs = updatedObjectIDs
        self.deletedObjectIDs = deletedObjectIDs
        self.historyToken = historyToken
    }

    /// A batch's changes, its inserted IDs as a list of distinct IDs.
    public init(inserted: [ObjectID], updatedObjectIDs: Set<ObjectID>, historyToken: PersistentHistoryToken?) {
        self.inserted = DeferredObjectIDSet(distinct: inserted)
        self.updatedObjectIDs = updatedObjectIDs
        self.historyToken = historyToken
    }

    /// Whether the batch changed no row.
    public var isEmpty: Bool { inserted.isEmpty && updatedObjectIDs.isEmpty && deletedObjectIDs.isEmpty }

    /// The changes as a save, for merging.
    public var asSave: ContextDidSave {
        var save = ContextDidSave(updatedObjectIDs: updatedObjectIDs, deletedObjectIDs: deletedObjectIDs,
                                  historyTokens: historyToken.map { [$0] } ?? [])
        save.inserted = inserted
        return save
    }
}
