@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Merging writer saves into the main context

extension StackManager {
    /// Watches saves: writer-side saves are merged into the main context;
    /// main-side saves only invalidate the writer coordinator's cached rows.
    /// A batch request posts the same notification from the context that ran
    /// it (``ManagedObjectContext/execute(_:)-(BatchUpdateRequest)``), so an
    /// importer's batch is merged exactly as its save would be, and its history
    /// transaction is skipped by the history follower as the stack's own.
    func installObservers(for setup: Setup) {
        let center = NotificationCenter.default
        let token = center.addObserver(forName: ManagedObjectContext.didSaveNotification, object: nil, queue: nil) { [weak self] notification in
            guard let self, let source = notification.object as? ManagedObjectContext, source.parent == nil,
                  let save = try? ContextDidSave(notification) else { return }
            let coordinator = source.persistentStoreCoordinator
            if source === setup.mainContext {
                if setup.writerCoordinator !== setup.mainCoordinator {
                    setup.writerCoordinator.objectsDidChange(updated: save.updatedObjectIDs, deleted: save.deletedObjectIDs)
                }
            } else if coordinator === setup.writerCoordinator {
                // Posted on the importer's queue; the merge runs on the main queue.
                self.moveHistoryBookmark(\.lastReadHistoryToken, past: save, of: setup)
                setup.mainContext.perform {
                    self.merge(save, from: .importer, into: setup)
                    self.moveHistoryBookmark(\.lastMergedHistoryToken, past: save, of: setup)
                }
            }
        }
        state.withLock { $0.observers.append(token) }
        if setup.followsPersistentHistory { installHistoryObserver(for: setup) }
        installReadSourceObserver(for: setup)
    }

    /// Merges one save — of an importer, or of another writer's history
    /// transaction — into the main context and tells tracked children and
    /// listeners. The one merge rule of the stack: registered objects are
    /// refreshed, registered deleted objects removed, inserts reported by ID.
    func merge(_ save: ContextDidSave, from source: StackDidMerge.Source, into setup: Setup) {
        let (merges, children) = state.withLock { state in
            (state.mergesIncomingSavedObjects, state.trackedChildren.compactMap(\.context))
        }
        let clock = ContinuousClock()
        let start = clock.now
        var refreshed = Set<ObjectID>()
        var removed = Set<ObjectID>()
        if merges {
            let change = setup.mainContext.mergeChanges(fromContextDidSave: save)
            refreshed = change.refreshedObjectIDs
            removed = change.deletedObjectIDs
            for child in children {
                child.perform { child.mergeChanges(fromContextDidSave: save) }
            }
        } else {
            setup.mainCoordinator.objectsDidChange(updated: save.updatedObjectIDs, deleted: save.deletedObjectIDs)
        }
        let payload = StackDidMerge(source: source, save: save, merged: merges, refreshedObjectIDs: refreshed,
                                    removedObjectIDs: removed, duration: clock.now - start)
        NotificationCenter.default.post(name: Self.didMergeNotification, object: self, userInfo: [StackDidMerge.key: payload])
    }
}
