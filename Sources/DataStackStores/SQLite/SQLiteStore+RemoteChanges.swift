import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Remote changes

extension SQLiteStore: RemoteChangeObservingStore {
    /// Opens a read-only connection of its own and checks it for commits by
    /// other connections when the store's files change (see ``SQLiteChangeWatcher``).
    public func startObservingRemoteChanges(_ onChange: @escaping @Sendable (StoreRemoteChange) -> Void) throws {
        // Untraced: its once-a-second check is the watcher's, not work done for
        // the contexts, and would make the statements a trace sees depend on time.
        let connection = try open(readOnly: true, traced: false)
        let watcher = try {
            do {
                return try SQLiteChangeWatcher(connection: connection, storeURL: fileURL, label: "DataStack.SQLiteStore.remoteChanges") { [weak self] in
                    guard let self else { return }
                    onChange(self.remoteChange())
                }
            } catch let error as SQLiteError {
                throw Self.storeError(error, url: url, doing: "starting to watch for remote changes")
            }
        }()
        let previous = changeWatcher.withLock { current in
            defer { current = watcher }
            return current
        }
        previous?.stop()
    }

    public func stopObservingRemoteChanges() {
        let watcher = changeWatcher.withLock { watcher in
            defer { watcher = nil }
            return watcher
        }
        watcher?.stop()
    }

    /// The notification's payload: the store, and its history token when it records history.
    private func remoteChange() -> StoreRemoteChange {
        // A token that cannot be read now (the file busy or gone) leaves the
        // payload without one: receivers then fetch all history after their own
        // bookmark, which is always correct, only not narrowed.
        let token = tracksPersistentHistory ? try? currentPersistentHistoryToken() : nil
        return StoreRemoteChange(storeIdentifier: identifier, storeURL: url, historyToken: token)
    }
}
