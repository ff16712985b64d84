@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Following the store's persistent history

extension StackManager {
    /// Whether the main context merges what other writers save to the store:
    /// other processes, and other stacks or coordinators of this process on the
    /// same file. True when the stack's SQLite store was opened with both
    /// ``ObjectGraph/StoreOptions/persistentHistoryTracking`` and
    /// ``ObjectGraph/StoreOptions/remoteChangeNotifications``; there is no
    /// separate switch, because neither option does anything useful for the
    /// stack without the other.
    ///
    /// ``StoreOptions/stackDefaults`` turns both on:
    ///
    /// ```swift
    /// try await stack.setup(model: model, storeURL: sharedURL)   // follows other processes' saves
    /// ```
    ///
    /// On each remote-change notification the stack reads the history after
    /// the last transaction it read, on a queue of its own, skipping its own
    /// transactions (by ``transactionAuthor``: its importer saves were merged
    /// in-process already), and on the main queue merges each other
    /// transaction exactly as it merges an importer save — registered objects refreshed, registered deleted
    /// objects removed, inserts reported by ID — then posts
    /// ``didMergeNotification`` with ``StackDidMerge/Source/otherProcess(author:processID:)``.
    /// When that history was deleted meanwhile, the main context refreshes all
    /// its objects and the payload says ``StackDidMerge/Source/expiredHistory``.
    /// The stack starts reading after the store's last transaction when it
    /// opens an existing store (what came before is in what the main context
    /// fetches), and before the first one when its setup created the file: then
    /// every save another process makes there is merged and reported, however
    /// early in the setup it came. Once its observer is in place it reads
    /// once, so a save made while it set up does not wait for the next one.
    /// A history read that fails (the file busy for longer than the busy mode
    /// waits, an I/O error, a damaged page) keeps the bookmark and is tried
    /// again on its own — after 50 ms, then twice as long after each failure,
    /// at most 5 s apart — and at the next notification: a writer that saved
    /// its last change before the failure is still merged. Meanwhile
    /// ``historyMergeError`` says why and ``historyMergeDidFailNotification``
    /// tells the screen, which would otherwise show the last merge as if
    /// nothing else had been saved.
    public var followsPersistentHistory: Bool { state.withLock { $0.setup?.followsPersistentHistory ?? false } }

    /// The ``ObjectGraph/ManagedObjectContext/transactionAuthor`` of the main
    /// context and of importer contexts: `DataStack/<process name>/<pid>/<8 hex digits>`,
    /// unique to each setup of each stack, so that the history tells this
    /// stack's saves from those of other processes and of other stacks in this one.
    public var transactionAuthor: String? { state.withLock { $0.setup?.transactionAuthor } }

    /// The token of the last history transaction the main context has merged
    /// (or skipped as the stack's own); nil unless ``followsPersistentHistory``.
    public var lastMergedHistoryToken: PersistentHistoryToken? { state.withLock { $0.lastMergedHistoryToken } }

    /// The token of the last history transaction the stack has read (or
    /// skipped as its own), off the main queue; the main context merges up to
    /// it next, and ``lastMergedHistoryToken`` follows. Nil unless
    /// ``followsPersistentHistory``.
    public var lastReadHistoryToken: PersistentHistoryToken? { state.withLock { $0.lastReadHistoryToken } }

    /// Posted on the stack's history queue — not the main queue — each time a
    /// history read succeeded and moved ``lastReadHistoryToken``, before the
    /// main queue merges what it read; `object` is the stack. It says that
    /// other writers' saves have arrived even while the main queue is busy (a
    /// screen can show that newer data is on its way), and it is the event a
    /// test of reading off the main queue waits for.
    public static let historyDidReadNotification = Notification.Name("DataStack.StackManager.historyDidRead")

    /// Why the last attempt to read other writers' history failed (the
    /// store's error); nil once a read succeeds. The bookmark stays where it
    /// was, so the next read — a retry the stack schedules itself, or the next
    /// remote-change notification — reads the same history again: nothing is
    /// skipped, but nothing is merged until a read succeeds.
    public var historyMergeError: (any Error)? { state.withLock { $0.historyMergeError } }

    /// Posted on the main queue when reading other writers' history failed;
    /// `object` is the stack, and ``historyMergeError`` says why (nil again
    /// once a later read succeeded). Nothing is merged until a read succeeds:
    /// a screen that shows what other processes save should say so.
    public static let historyMergeDidFailNotification = Notification.Name("DataStack.StackManager.historyMergeDidFail")

    /// Deletes the store's history transactions written more than `retention`
    /// ago, and never one the main context has not merged yet; returns how many
    /// were deleted. Other processes that follow the store and fall behind
    /// further than that find their history gone and refresh everything.
    ///
    /// - Throws: ``StackError/Code/notSetUp`` before setup, ``StackError/Code/closed``
    ///   after ``close()``, or the store's
    ///   ``ObjectGraph/PersistentStoreError`` (``ObjectGraph/PersistentStoreError/Code/historyNotTracked``
    ///   for a store without history).
    @discardableResult
    public func purgeHistory(olderThan retention: Duration) throws -> Int {
        let setup = try openSetup(for: "purgeHistory(olderThan:)")
        let seconds = Double(retention.components.seconds) + Double(retention.components.attoseconds) / 1e18
        let cutoff = Date(timeIntervalSinceNow: -seconds)
        // What must stay: everything after the earliest bookmark of a reader that has not read
        // on — the main context's merges while the stack follows history (no bookmark: nothing
        // merged yet, so all of it), and each hold of retainHistory(after:for:), a sync engine's.
        var bookmarks: [PersistentHistoryToken?] = state.withLock { $0.historyHolds.values.map { $0 } }
        if setup.followsPersistentHistory { bookmarks.append(lastMergedHistoryToken) }
        if !bookmarks.isEmpty {
            let earliest = bookmarks.contains(nil) ? nil : bookmarks.compactMap { $0 }.min()
            var next = PersistentHistoryRequest.fetchHistory(after: earliest)
            next.fetchLimit = 1
            next.includesChanges = false
            if let unread = try setup.writerCoordinator.fetchHistory(next).first, unread.timestamp < cutoff {
                // Not read yet, although older than the retention: keep it and what follows.
                return try setup.writerCoordinator.deleteHistory(.deleteHistory(before: unread.token))
            }
        }
        return try setup.writerCoordinator.deleteHistory(.deleteHistory(before: cutoff))
    }

    /// Keeps the history after `token` from ``purgeHistory(olderThan:)``
    /// until `reader` moves its hold on (or drops it with nil): a reader
    /// that turns history into something else — a sync engine pushing it to
    /// other replicas — must see every transaction once.
    ///
    /// Holds are this process's: a process that purges the same store does
    /// not know them, and the reader then finds its history gone
    /// (``ObjectGraph/PersistentStoreError/Code/historyExpired``).
    public func retainHistory(after token: PersistentHistoryToken?, for reader: String) {
        state.withLock { current in
            if let token { current.historyHolds[reader] = token } else { current.historyHolds.removeValue(forKey: reader) }
        }
    }

    static func makeTransactionAuthor() -> String {
        let process = ProcessInfo.processInfo
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(8).lowercased()
        return "DataStack/\(process.processName)/\(process.processIdentifier)/\(suffix)"
    }

    /// Sets the bookmarks to the store's last transaction: history written
    /// before the main context registered anything holds nothing to merge.
    ///
    /// - Parameter fromStart: true for a store this setup created: every
    ///   transaction in it was saved after the stack began, so the bookmarks
    ///   go before the first one and each is merged and reported — however
    ///   early another process saved it, which the token read now, after the
    ///   store opened, would not tell apart from history that came before.
    func resetHistoryBookmark(for setup: Setup, fromStart: Bool = false) throws {
        var token = setup.followsPersistentHistory ? try setup.mainCoordinator.currentPersistentHistoryToken() : nil
        if fromStart, let current = token { token = PersistentHistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: 0) }
        state.withLock { state in
            state.lastReadHistoryToken = token
            state.lastMergedHistoryToken = token
        }
    }

    /// Reads other writers' transactions when the main coordinator's store
    /// reports a commit, on the stack's history queue, and merges them on the
    /// main queue: a large transaction of another process is read (its rows
    /// decoded into object IDs) without holding up the main queue.
    func installHistoryObserver(for setup: Setup) {
        let token = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.storeRemoteChangeNotification, object: setup.mainCoordinator, queue: nil
        ) { [weak self] notification in
            // A notification without a payload is not the store's; nothing to merge.
            guard let self, let change = try? StoreRemoteChange(notification) else { return }
            self.historyQueue.async { self.readHistory(upTo: change.historyToken, of: setup) }
        }
        state.withLock { $0.observers.append(token) }
        // A writer's commits since the bookmark was set raised notifications no observer
        // heard; its last save would wait for its next one. One read now merges them.
        historyQueue.async { [weak self] in self?.readHistory(upTo: nil, of: setup) }
    }

    /// Moves a bookmark past an importer's save, which the stack merges
    /// in-process, when its transaction is the next one after it: the read
    /// bookmark as soon as the save is posted (so the remote-change
    /// notification the same commit raises needs no history read), the merged
    /// one once the main context merged it. A transaction of another writer in
    /// between keeps the bookmark where it is, and the next history read
    /// merges that one and skips this.
    func moveHistoryBookmark(_ bookmark: WritableKeyPath<State, PersistentHistoryToken?>, past save: ContextDidSave, of setup: Setup) {
        guard setup.followsPersistentHistory, !save.historyTokens.isEmpty else { return }
        state.withLock { state in
            guard let current = state[keyPath: bookmark] else { return }
            if let next = save.historyTokens.first(where: {
                $0.storeIdentifier == current.storeIdentifier && $0.transactionNumber == current.transactionNumber + 1
            }) {
                state[keyPath: bookmark] = next
            }
        }
    }

    /// On the history queue: reads the history after the read bookmark and
    /// hands other writers' transactions, oldest first, to the main queue.
    private func readHistory(upTo target: PersistentHistoryToken?, of setup: Setup) {
        let bookmark = state.withLock { $0.lastReadHistoryToken }
        // Read after an earlier notification. (A token of another store — the file
        // replaced — goes on to the read, whose mismatch error starts over.)
        if let target, let bookmark, target.storeIdentifier == bookmark.storeIdentifier, target <= bookmark { return }
        var request = PersistentHistoryRequest.fetchHistory(after: bookmark)
        request.filter = .not(.author(setup.transactionAuthor))
        let transactions: [PersistentHistoryTransaction]
        do {
            transactions = try setup.mainCoordinator.fetchHistory(request)
        } catch let error as PersistentStoreError where error.code == .historyExpired || error.code == .historyTokenMismatch {
            let current: PersistentHistoryToken?
            do {
                current = try setup.mainCoordinator.currentPersistentHistoryToken()
            } catch {
                // Unreadable now: the bookmark becomes nil and the next read takes all remaining history.
                current = nil
                recordHistoryMergeFailure(error, of: setup)
                scheduleHistoryRetry(upTo: target, of: setup)
            }
            state.withLock { $0.lastReadHistoryToken = current }
            if current != nil { NotificationCenter.default.post(name: Self.historyDidReadNotification, object: self) }
            setup.mainContext.perform { self.mergeExpiredHistory(into: setup, resumingAfter: current) }
            return
        } catch {
            // Kept bookmark: the retry, or the next notification, reads the same history again.
            recordHistoryMergeFailure(error, of: setup)
            scheduleHistoryRetry(upTo: target, of: setup)
            return
        }
        let newest = [bookmark, transactions.last?.token, target].compactMap { $0 }.max()
        let moved = state.withLock { state in
            state.historyMergeError = nil
            state.historyReadFailures = 0
            // An importer's save posted meanwhile may have moved it further already.
            let before = state.lastReadHistoryToken
            state.lastReadHistoryToken = Self.later(before, newest)
            return state.lastReadHistoryToken != before
        }
        // As documented: only a read that moved the bookmark is news.
        if moved { NotificationCenter.default.post(name: Self.historyDidReadNotification, object: self) }
        setup.mainContext.perform { self.merge(transactions, upTo: newest, into: setup) }
    }

    /// How long the retry after `failures` history reads failed in a row
    /// waits: 50 ms after the first, doubled after each, at most 5 s.
    static func historyRetryDelay(after failures: Int) -> Duration {
        let doublings = min(max(failures - 1, 0), 7)   // 50 ms × 2⁷ is past 5 s already
        return min(.milliseconds(50 << doublings), .seconds(5))
    }

    /// Reads the history again after a failed read, without waiting for
    /// another writer's notification: the failed read may have been the last
    /// one a writer's saves cause. One retry waits at a time; none once the
    /// stack closes or was set up anew.
    private func scheduleHistoryRetry(upTo target: PersistentHistoryToken?, of setup: Setup) {
        let delay: Duration? = state.withLock { state in
            state.historyReadFailures += 1
            guard state.closing == nil, !state.historyRetryScheduled else { return nil }
            state.historyRetryScheduled = true
            return Self.historyRetryDelay(after: state.historyReadFailures)
        }
        guard let delay else { return }
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        historyQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [weak self] in
            guard let self else { return }
            let current = self.state.withLock { state in
                state.historyRetryScheduled = false
                return state.closing == nil && state.setup?.mainCoordinator === setup.mainCoordinator
            }
            if current { self.readHistory(upTo: target, of: setup) }
        }
    }

    /// Keeps why a history read failed and posts ``historyMergeDidFailNotification`` on the main queue.
    private func recordHistoryMergeFailure(_ error: any Error, of setup: Setup) {
        state.withLock { $0.historyMergeError = error }
        setup.mainContext.perform {
            NotificationCenter.default.post(name: Self.historyMergeDidFailNotification, object: self)
        }
    }

    /// On the main queue: merges transactions read by ``readHistory(upTo:of:)``.
    private func merge(_ transactions: [PersistentHistoryTransaction], upTo newest: PersistentHistoryToken?, into setup: Setup) {
        for transaction in transactions {
            let save = transaction.contextDidSave()
            if setup.writerCoordinator !== setup.mainCoordinator {
                // The writer coordinator's cached rows of these objects are stale too.
                setup.writerCoordinator.objectsDidChange(updated: save.updatedObjectIDs, deleted: save.deletedObjectIDs)
            }
            // The bookmark moves before the merge posts its notification, so that a
            // listener woken by it sees the bookmark past what it was told of (the
            // transaction is read: a purge meanwhile cannot take it from the merge).
            state.withLock { state in
                state.lastMergedHistoryToken = Self.later(state.lastMergedHistoryToken, transaction.token)
            }
            merge(save, from: .otherProcess(author: transaction.author, processID: transaction.processID), into: setup)
        }
        state.withLock { state in
            state.lastMergedHistoryToken = Self.later(state.lastMergedHistoryToken, newest)
        }
    }

    /// The later of two bookmarks of one store; a token of another store (the
    /// file replaced) takes the place of the old one rather than be ordered
    /// against it (tokens of different stores order by store, not by time).
    static func later(_ bookmark: PersistentHistoryToken?, _ token: PersistentHistoryToken?) -> PersistentHistoryToken? {
        guard let bookmark, let token else { return token ?? bookmark }
        return bookmark.storeIdentifier == token.storeIdentifier ? max(bookmark, token) : token
    }

    /// The history after the bookmark is gone (purged, or the store was replaced):
    /// refresh everything the main context shows and go on after the store's last transaction.
    private func mergeExpiredHistory(into setup: Setup, resumingAfter current: PersistentHistoryToken?) {
        setup.writerCoordinator.allObjectsMayHaveChanged()
        setup.mainCoordinator.allObjectsMayHaveChanged()
        let clock = ContinuousClock()
        let start = clock.now
        let registered = Set(setup.mainContext.registeredObjects.map(\.objectID))
        setup.mainContext.refreshAllObjects()
        state.withLock { $0.lastMergedHistoryToken = current }
        let payload = StackDidMerge(source: .expiredHistory, save: ContextDidSave(), merged: true, refreshedObjectIDs: registered,
                                    removedObjectIDs: [], duration: clock.now - start)
        NotificationCenter.default.post(name: Self.didMergeNotification, object: self, userInfo: [StackDidMerge.key: payload])
    }
}
