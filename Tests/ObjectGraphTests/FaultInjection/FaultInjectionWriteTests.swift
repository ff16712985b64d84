import CFaultVFS
import Foundation
import ObjectGraph
import Testing

/// Every I/O call a save makes fails once, one at a time, as in SQLite's own
/// I/O error tests (<https://sqlite.org/testing.html#ioerrtesting>): a dry run
/// counts the save's calls of each kind, then for each call *k* a fresh store
/// makes the same save with call *k* failing. Whatever fails, the save either
/// throws a typed error and leaves the file, the coordinator and the context as
/// they were, or (SQLite retried) succeeds completely; the next save succeeds.
@Suite struct FaultInjectionWriteTests {
    /// The kind of change the failing save writes.
    enum SaveKind: String, CaseIterable, Sendable {
        case insert, update, delete
    }

    /// The result code the failing call returns.
    enum FaultCode: String, CaseIterable, Sendable {
        /// The operation's own extended I/O error code (`SQLITE_IOERR_WRITE`, …).
        case ioError
        /// `SQLITE_FULL`, as a full disk reports it.
        case diskFull

        func code(for operation: FaultPlan.Operation) -> Int32 {
            guard self == .ioError else { return SQLITE_FULL }
            return switch operation {
            case .open: SQLITE_CANTOPEN
            case .read: CFAULTVFS_IOERR_READ
            case .write: CFAULTVFS_IOERR_WRITE
            case .sync: CFAULTVFS_IOERR_FSYNC
            case .truncate: CFAULTVFS_IOERR_TRUNCATE
            case .fileSize: CFAULTVFS_IOERR_FSTAT
            case .lock: CFAULTVFS_IOERR_LOCK
            case .checkReservedLock: CFAULTVFS_IOERR_CHECKRESERVEDLOCK
            case .shmMap: CFAULTVFS_IOERR_SHMMAP
            case .shmLock: CFAULTVFS_IOERR_SHMLOCK
            }
        }
    }

    /// How the store writes: the calls a save makes depend on it.
    enum StoreSetup: String, CaseIterable, Sendable {
        /// The default: WAL, `synchronous=NORMAL`. A save writes WAL frames and
        /// takes the WAL write lock; the only sync is of the header of a log
        /// the save starts.
        case wal
        /// WAL with `synchronous=FULL` and a checkpoint after every save: the
        /// commit syncs the log, then the checkpoint reads it, writes and syncs
        /// the database file (an error there must not undo the commit).
        case walCheckpointing
        /// A rollback journal (`journal_mode=DELETE`, `synchronous=FULL`), as
        /// some stores written by Core Data are: file locks, the journal's
        /// open, writes and syncs.
        case rollbackJournal

        var options: StoreOptions {
            var options = StoreOptions()
            // Short, so that a lock held for good (SQLITE_BUSY every time) fails a
            // save after a fraction of a second instead of the default 10 s.
            options.busyMode = .timeout(0.1)
            switch self {
            case .wal:
                break
            case .walCheckpointing:
                options.synchronous = .full
                options.pragmas = [.walAutocheckpoint(pages: 1)]
            case .rollbackJournal:
                options.journalMode = .delete
                options.synchronous = .full
            }
            return options
        }
    }

    /// Every call a save can make through the VFS.
    static let operations: [FaultPlan.Operation] = [
        .open, .read, .write, .sync, .truncate, .fileSize, .lock, .checkReservedLock, .shmMap, .shmLock,
    ]

    @Test(.timeLimit(.minutes(1)), arguments: SaveKind.allCases, StoreSetup.allCases)
    func eachFailingCallOfASaveLeavesTheLastCommittedStateAndTheNextSaveSucceeds(kind: SaveKind, setup: StoreSetup) throws {
        let template = try StoreTemplate(options: setup.options, companies: 4, updatesEach: 2)
        let (expectedBefore, expectedAfter, calls) = try dryRun(PendingSave(kind, setup, template))
        #expect(calls[.write, default: 0] > 0, "a save writes")
        for fault in FaultCode.allCases {
            var tally = FaultTally()
            for operation in Self.operations {
                for call in 0..<calls[operation, default: 0] {
                    let pending = try PendingSave(kind, setup, template)
                    try check(pending, failing: operation, call: call, code: fault.code(for: operation),
                              before: expectedBefore, after: expectedAfter, tally: &tally)
                }
            }
            summarize(tally, "save \(kind.rawValue), \(setup.rawValue), \(fault.rawValue)", calls: calls)
        }
    }

    /// A lock held by another connection (the VFS answers `SQLITE_BUSY`):
    /// a lock held briefly is waited for and the save succeeds; a lock held
    /// past the busy timeout fails the save with an error naming the store,
    /// leaving everything as it was, and the next save succeeds.
    @Test(.timeLimit(.minutes(1)), arguments: SaveKind.allCases)
    func aLockHeldBrieflyIsWaitedForAndOneHeldTooLongFailsTheSaveCleanly(kind: SaveKind) throws {
        var tally = FaultTally()
        let plans: [(StoreSetup, FaultPlan.Operation, FaultPlan.Repetition)] = [
            (.wal, .shmLock, .times(3)),                 // the WAL write lock, taken by BEGIN IMMEDIATE
            (.rollbackJournal, .lock, .times(3)),
            (.rollbackJournal, .lock, .always),          // never granted: the busy timeout runs out
        ]
        for (setup, operation, repetition) in plans {
            let template = try StoreTemplate(options: setup.options, companies: 4, updatesEach: 2)
            let (before, after, _) = try dryRun(PendingSave(kind, setup, template))
            try check(PendingSave(kind, setup, template), failing: operation, call: 0, code: SQLITE_BUSY, repetition: repetition,
                      before: before, after: after, tally: &tally)
        }
        summarize(tally, "save \(kind.rawValue), lock held (SQLITE_BUSY)", calls: [:])
        #expect(tally.absorbed == 2, "a lock held for three tries is waited for")
        #expect(tally.errors == 1, "a lock held for good fails the save")
    }

    private func summarize(_ tally: FaultTally, _ group: String, calls: [FaultPlan.Operation: Int]) {
        let callList = Self.operations.compactMap { operation in
            calls[operation].flatMap { $0 > 0 ? "\(operation) \($0)" : nil }
        }
        print(tally.summary(group) + ", \(tally.resurrectedAfterCrash) failed saves a crash would bring back"
              + (callList.isEmpty ? "" : "; calls per save: " + callList.joined(separator: ", ")))
        #expect(tally.integrityFailures == 0)
        #expect(tally.lostCommits == 0)
        #expect(tally.wrongResults == 0)
    }

    // MARK: - One case

    /// The file's contents before and after the save, and the calls it makes.
    private func dryRun(_ pending: PendingSave) throws -> (StoreContents, StoreContents, [FaultPlan.Operation: Int]) {
        let before = try StoreContents.read(pending.stack.storeURL)
        pending.plan.reset()
        try pending.context.performAndWait { try pending.context.save() }
        let calls = pending.plan.callCounts(of: Self.operations)
        let after = try StoreContents.read(pending.stack.storeURL)
        #expect(before.integrityProblems.isEmpty && after.integrityProblems.isEmpty)
        #expect(before.contents != after.contents, "the save changes the file")
        return (before.contents, after.contents, calls)
    }

    /// The save, with call `call` (0-based) of `operation` failing with `code`
    /// (once, unless `repetition` says otherwise).
    private func check(_ pending: PendingSave, failing operation: FaultPlan.Operation, call: Int, code: Int32,
                       repetition: FaultPlan.Repetition = .once,
                       before: StoreContents, after: StoreContents, tally: inout FaultTally) throws {
        let context = pending.context
        let what = "save \(pending.description), \(operation) call \(call + 1) failing with \(code) (\(repetition))"
        tally.cases += 1
        _ = try StoreContents.read(pending.stack.storeURL)   // as the dry run did, so the save makes the same calls
        let committedView = try pending.committedView()
        let changes = context.performAndWait { pending.changedObjectIDs() }

        pending.plan.reset()
        pending.plan.arm(operation, code: code, after: call, repeating: repetition)
        let saveError: (any Error)? = context.performAndWait {
            do {
                try context.save()
                return nil
            } catch {
                return error
            }
        }
        pending.plan.disarm()
        let injected = pending.plan.injectedCount
        let file = try StoreContents.read(pending.stack.storeURL)
        if !file.integrityProblems.isEmpty {
            tally.integrityFailures += 1
            Issue.record("\(what): the file fails integrity_check: \(file.integrityProblems)")
        }

        guard let saveError else {
            // The fault did not stop the save (SQLite retried the call, or it was not made this time).
            if injected > 0 { tally.absorbed += 1 }
            if file.contents != after {
                tally.lostCommits += 1
                Issue.record("\(what): the save succeeded but the file holds\n\(file.contents)\nnot\n\(after)")
            }
            return
        }
        tally.errors += 1
        #expect(injected > 0, "\(what): the error came from the injected fault")
        #expect(saveError is PersistentStoreError || saveError is ObjectGraphError,
                "\(what): a typed error, not \(type(of: saveError)): \(saveError)")
        #expect(!"\(saveError)".isEmpty)
        if let storeError = saveError as? PersistentStoreError {
            #expect(storeError.url?.standardizedFileURL == pending.stack.storeURL.standardizedFileURL, "\(what): the error names the store")
        }
        context.performAndWait {
            #expect(context.hasChanges, "\(what): the context keeps its changes")
            #expect(pending.changedObjectIDs() == changes, "\(what): the context keeps its changes, inserted objects under their temporary IDs")
        }
        if file.contents != before {
            tally.lostCommits += 1
            Issue.record("\(what): the failed save changed the file to\n\(file.contents)\nfrom\n\(before)")
        }
        if try pending.committedView() != committedView {
            tally.wrongResults += 1
            Issue.record("\(what): the coordinator shows another context the failed save's changes")
        }
        // Had the process died right after the failed save, recovery would find
        // the old state, or (a sync that failed after the commit record was
        // written: SQLite's outcome is then undetermined) the new one; never a mix.
        let crashed = try pending.stack.contentsAfterCrash()
        if crashed.contents == after {
            tally.resurrectedAfterCrash += 1
        } else if crashed.contents != before || !crashed.integrityProblems.isEmpty {
            tally.lostCommits += 1
            Issue.record("\(what): after a crash the file would hold\n\(crashed.contents)\n\(crashed.integrityProblems)")
        }

        // The same context saves again, with no fault.
        do {
            try context.performAndWait { try context.save() }
        } catch {
            tally.lostCommits += 1
            Issue.record("\(what): the next save failed too: \(error)")
            return
        }
        let retried = try StoreContents.read(pending.stack.storeURL)
        if retried.contents != after || !retried.integrityProblems.isEmpty {
            tally.lostCommits += 1
            Issue.record("\(what): after the next save the file holds\n\(retried.contents)\nnot\n\(after)")
        }
    }
}

/// A copy of a store with four companies of two updates each, and a context
/// holding one kind of unsaved change to them.
private struct PendingSave: CustomStringConvertible {
    let stack: FaultStack
    let context: ManagedObjectContext
    let description: String
    var plan: FaultPlan { stack.plan }

    init(_ kind: FaultInjectionWriteTests.SaveKind, _ setup: FaultInjectionWriteTests.StoreSetup, _ template: StoreTemplate) throws {
        stack = try FaultStack(options: setup.options, copying: template)
        description = "\(kind.rawValue), \(setup.rawValue)"
        let context = stack.newContext()
        try context.performAndWait {
            let companies = try context.fetch(companiesBySymbol)
            switch kind {
            case .insert:
                for index in 0..<2 {
                    let company = Company(context: context)
                    company.symbol = "N\(index)"
                    let update = StockUpdate(context: context)
                    update.price = 50 + Double(index)
                    update.company = company
                }
            case .update:
                for company in companies {
                    company.name = "Renamed \(company.symbol)"
                    company.employees += 1
                    for update in company.updates { update.price += 100 }
                }
            case .delete:
                context.delete(companies[0])
                context.delete(companies[1])
            }
        }
        self.context = context
    }

    /// The IDs of the objects inserted, updated and deleted in the context. Call on its queue.
    func changedObjectIDs() -> [Set<ObjectID>] {
        [context.insertedObjects, context.updatedObjects, context.deletedObjects].map { Set($0.map(\.objectID)) }
    }

    /// What another context of the coordinator fetches: the rows as the
    /// coordinator knows them, through its row cache.
    func committedView() throws -> [String] {
        let reader = stack.newContext()
        return try reader.performAndWait {
            let companies = try reader.fetch(companiesBySymbol)
            return companies.map { "\($0.symbol) \($0.name ?? "nil") \($0.employees)" }
        }
    }
}
