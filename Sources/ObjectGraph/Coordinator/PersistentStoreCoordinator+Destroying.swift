import Foundation

// MARK: - Destroying stores

extension PersistentStoreCoordinator {
    /// Deletes a store (Core Data: `destroyPersistentStore(at:type:options:)`).
    ///
    /// If this coordinator has the store, it is removed from the coordinator
    /// first. Then the store type deletes it (``StoreType/init(rawValue:isShared:destroyStore:makeStore:)``);
    /// a type that does not say how has the file at a file URL removed.
    ///
    /// For SQLite, every table is dropped in one write transaction, so a
    /// connection that another coordinator (or process) still holds finds no
    /// store any more and fails with an error. Then, if no other connection has
    /// the file open, the file and its `-wal`, `-shm` and `-journal` are removed;
    /// if one has, the emptied file is left in place (as Core Data truncates
    /// rather than unlinks), and a store added there later starts afresh in it.
    /// Nothing at `url` is not an error.
    ///
    /// - Throws: ``PersistentStoreError``: `.notAStore` for a file that is not a
    ///   Core Data store (it is left alone), `.ioFailure` when removing fails.
    public func destroyPersistentStore(at url: URL, type: StoreType) throws {
        if let added = persistentStore(for: url) { try remove(added) }
        if let destroy = type.destroyStore { return try destroy(url) }
        if url.isFileURL, FileManager.default.fileExists(atPath: url.path) {
            try removeItem(at: url)
        }
    }

    private func removeItem(at url: URL) throws {
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw PersistentStoreError(.ioFailure, url: url, message: "could not remove the store's file", underlying: error)
        }
    }
}
