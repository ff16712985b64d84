@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Resetting the stores

extension StackManager {
    /// Starts over with an empty store (RestKit's `resetPersistentStores`).
    ///
    /// Resets the main context and the tracked child contexts, removes the
    /// stores from both coordinators, deletes the store
    /// (``ObjectGraph/PersistentStoreCoordinator/destroyPersistentStore(at:type:)``:
    /// a SQLite file with its `-wal` and `-shm`), and creates the store again — seeded again from the
    /// seed database if setup was given one. Importer contexts made before the
    /// reset must not be used afterwards.
    ///
    /// - Throws: ``StackError/Code/notSetUp`` before setup, ``StackError/Code/closed``
    ///   after ``close()``, or the store's error.
    public func resetPersistentStores() async throws {
        let setup = try openSetup(for: "resetPersistentStores()")
        let children = state.withLock { $0.trackedChildren.compactMap(\.context) }
        for child in children { await child.perform { child.reset() } }
        await setup.mainContext.perform { setup.mainContext.reset() }

        for coordinator in setup.mainCoordinator === setup.writerCoordinator
            ? [setup.writerCoordinator] : [setup.mainCoordinator, setup.writerCoordinator] {
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        if let url = setup.storeURL {
            // The store type knows what a store is at its location: a SQLite file with its -wal and -shm, a database's tables.
            try setup.writerCoordinator.destroyPersistentStore(at: url, type: setup.storeType)
        }
        try setup.writerCoordinator.addPersistentStore(type: setup.storeType, at: setup.storeURL,
                                                       options: Self.writerOptions(setup.options, storeType: setup.storeType))
        if setup.mainCoordinator !== setup.writerCoordinator {
            try setup.mainCoordinator.addPersistentStore(type: setup.storeType, at: setup.storeURL, options: Self.mainOptions(setup.options))
        }
        try resetHistoryBookmark(for: setup)   // the new store has a new UUID and no history
    }
}
