@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Closing

extension StackManager {
    /// Closes the stack when the app is done with it: saves in progress
    /// finish, the write-ahead log is folded into the store's file (a SQLite
    /// `TRUNCATE` checkpoint), and the stores are removed from both
    /// coordinators, which closes their connections (Core Data:
    /// `NSPersistentStoreCoordinator.remove(_:)` for each store).
    ///
    /// ```swift
    /// importTask.cancel()                 // stops after the chunk being saved
    /// _ = await importTask.value
    /// await StackManager.default.close()  // the store's file now holds every save
    /// exit(0)
    /// ```
    ///
    /// Without it, a process that ends leaves every save since SQLite's last
    /// automatic checkpoint in the `-wal`: nothing is lost — the next open
    /// reads the log — but the main file alone is not the store, and a copy of
    /// it without its `-wal` misses those saves.
    ///
    /// In order: the stack stops merging (history reads and merges already
    /// under way on the history queue and the main queue finish first); the
    /// main coordinator's store closes, once its reads returned; then the
    /// writer coordinator's, once the save holding its connection committed,
    /// checkpointing the log. Another process still reading the file can hold
    /// the checkpoint up past the store's busy mode; the rows then stay in the
    /// log, safe, for the last connection to close to fold in.
    ///
    /// Afterwards the stack takes no new work: ``performImport(_:chunkSize:onConflict:_:progress:)``
    /// (before each chunk), ``resetPersistentStores()``, ``purgeHistory(olderThan:)``
    /// and `setup` throw ``StackError/Code/closed``; the contexts stay
    /// usable in memory, and their fetches and saves throw (their coordinators
    /// have no store). Unsaved changes of the main context are not saved.
    /// Calling it again, or on a stack never set up, does nothing more; a
    /// second call made while the first runs returns when the stack is closed.
    ///
    /// Waits on the main queue once (for the merges under way): call it from a
    /// task, not from a block the main queue is running.
    public func close() async {
        let closing = state.withLock { state -> Task<Void, Never> in
            if let closing = state.closing { return closing }
            let setup = state.setup
            let observers = state.observers
            state.observers = []
            let closing = Task { await Self.close(setup, observers: observers, historyQueue: historyQueue) }
            state.closing = closing
            return closing
        }
        await closing.value
    }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { state.withLock { $0.closing != nil } }

    private static func close(_ setup: Setup?, observers: [any NSObjectProtocol], historyQueue: DispatchQueue) async {
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
        guard let setup else { return }
        // No new merge is scheduled now; the reads and merges already scheduled finish,
        // the history queue's first, as they hand their merges to the main queue.
        await withCheckedContinuation { continuation in historyQueue.async { continuation.resume() } }
        // Enqueued, whatever actor this runs on: on the main one, an immediate task would not wait for them.
        await setup.mainContext.perform(schedule: .enqueued) {}
        // On a queue of its own: removing the writer's store waits for the save in progress.
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                // The writer last, so its checkpoint comes after the last save.
                let coordinators = setup.mainCoordinator === setup.writerCoordinator
                    ? [setup.writerCoordinator] : [setup.mainCoordinator, setup.writerCoordinator]
                for coordinator in coordinators {
                    for store in coordinator.persistentStores {
                        // The only error is a store no longer there (removed meanwhile): closed either way.
                        try? coordinator.remove(store)
                    }
                }
                continuation.resume()
            }
        }
    }

    /// The setup, for an operation that needs a stack set up and not closed.
    ///
    /// - Throws: ``StackError/Code/closed`` after ``close()``,
    ///   ``StackError/Code/notSetUp`` before setup.
    func openSetup(for operation: String) throws -> Setup {
        let (setup, isClosed) = state.withLock { ($0.setup, $0.closing != nil) }
        if isClosed { throw StackError(.closed, message: "\(operation) needs an open stack, and this one was closed (close())") }
        guard let setup else { throw StackError(.notSetUp, message: "\(operation) needs a stack that was set up") }
        return setup
    }
}
