@_spi(DataStackInternal) import DataStackSupport
import Foundation
import Testing
@testable import DataStack

/// Two stacks on one file, as two processes would be: each merges what the
/// other saves, through the store's persistent history, with the rule it uses
/// for its own importer saves.
@Suite struct StackRemoteMergeTests {
    static var options: StoreOptions {
        var options = StoreOptions.stackDefaults
        options.persistentHistoryTracking = true
        options.remoteChangeNotifications = true
        return options
    }

    /// Two stacks following the history of one new file.
    private func makeStacks() async throws -> (a: StackManager, b: StackManager, StackDirectory) {
        let directory = StackDirectory()
        StackDirectory.keepUntilExit(directory)
        let a = StackManager()
        try await a.setup(model: StackTestModel.make(), storeURL: directory.storeURL, options: Self.options)
        let b = StackManager()
        try await b.setup(model: StackTestModel.make(), storeURL: directory.storeURL, options: Self.options)
        return (a, b, directory)
    }

    /// Waits for `count` merges that came from the other stack.
    private func remoteMerges(_ recorder: MergeRecorder, count: Int,
                              sourceLocation: SourceLocation = #_sourceLocation) async -> [StackDidMerge] {
        @Sendable func remote(_ merges: [StackDidMerge]) -> [StackDidMerge] {
            merges.filter { if case .otherProcess = $0.source { true } else { false } }
        }
        await recorder.wait(until: "\(count) merges from the other stack", sourceLocation: sourceLocation) {
            remote($0.map(\.merge)).count >= count
        }
        return remote(recorder.all)
    }

    @Test func eachStackWritesWithItsOwnAuthorAndFollowsHistory() async throws {
        let (a, b, _) = try await makeStacks()
        #expect(a.followsPersistentHistory && b.followsPersistentHistory)
        let authorA = try #require(a.transactionAuthor)
        #expect(authorA.hasPrefix("DataStack/\(ProcessInfo.processInfo.processName)/\(ProcessInfo.processInfo.processIdentifier)/"))
        #expect(authorA != b.transactionAuthor)
        #expect(a.importerContext().transactionAuthor == authorA)
        #expect(await a.mainContext.perform { a.mainContext.transactionAuthor } == authorA)

        // The defaults follow history; a store without tracking does not.
        let byDefault = StackManager()
        let defaultDirectory = StackDirectory()
        try await byDefault.setup(model: StackTestModel.make(), storeURL: defaultDirectory.storeURL)
        #expect(byDefault.followsPersistentHistory)
        #expect(byDefault.lastMergedHistoryToken != nil)

        let plain = StackManager()
        let plainDirectory = StackDirectory()
        var untracked = StoreOptions.stackDefaults
        untracked.persistentHistoryTracking = false
        try await plain.setup(model: StackTestModel.make(), storeURL: plainDirectory.storeURL, options: untracked)
        #expect(!plain.followsPersistentHistory)
        #expect(plain.lastMergedHistoryToken == nil)
    }

    @Test func anImportInOneStackRefreshesExactlyWhatTheOtherShows() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        let recorderB = MergeRecorder(b)
        let ids = try await importTickers(b, count: 1_000)
        let inserted = await remoteMerges(recorderA, count: 1)
        #expect(inserted.count == 1)
        #expect(inserted.first?.save.insertedObjectIDs.count == ids.count)
        #expect(inserted.first?.source == .otherProcess(author: b.transactionAuthor, processID: ProcessInfo.processInfo.processName))

        // A shows ten. (IDs cross to A's coordinator by URI, as they would between processes.)
        let main = a.mainContext
        let inA = ids.map { a.mainCoordinator.managedObjectID(forURIRepresentation: $0.uriRepresentation())! }
        let shown = Array(inA.prefix(10))
        let holder = ObjectHolder()
        try await main.perform { holder.objects = try shown.map { try main.existingObject(with: $0) } }

        // B updates 500, three of them on A's screen.
        let updated = Array(ids[0..<3]) + Array(ids[10..<507])
        let importer = b.importerContext()
        try await importer.perform {
            for id in updated { (try importer.existingObject(with: id) as! Ticker).price += 1000 }
            try importer.save()
        }
        let merges = await remoteMerges(recorderA, count: 2)
        let merge = try #require(merges.count == 2 ? merges[1] : nil)
        let mergedURIs: Set<URL> = Set(merge.save.updatedObjectIDs.map { $0.uriRepresentation() })
        let updatedURIs: Set<URL> = Set(updated.map { $0.uriRepresentation() })
        #expect(mergedURIs == updatedURIs)
        #expect(merge.refreshedObjectIDs == Set(inA[0..<3]))
        let (prices, registered) = try await main.perform {
            (try shown.map { try (main.existingObject(with: $0) as! Ticker).price }, main.registeredObjectCount)
        }
        let expected: [Double] = (0..<10).map { index in index < 3 ? Double(index) + 1000 : Double(index) }
        #expect(prices == expected)
        #expect(registered == 10)
        // B merged its own saves in-process only: none came back to it through the history.
        #expect(recorderB.all.allSatisfy { $0.source == .importer })
        #expect(recorderB.all.count == 2)
        #expect(a.lastMergedHistoryToken == (try b.writerCoordinator.currentPersistentHistoryToken()))
        withExtendedLifetime(holder) {}
    }

    @Test func deletionsByTheOtherStackRemoveShownObjects() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        let ids = try await importTickers(b, count: 5)
        _ = await remoteMerges(recorderA, count: 1)
        let main = a.mainContext
        let holder = ObjectHolder()
        let inA = ids.map { a.mainCoordinator.managedObjectID(forURIRepresentation: $0.uriRepresentation())! }
        try await main.perform { holder.objects = try inA.map { try main.existingObject(with: $0) } }
        let importer = b.importerContext()
        try await importer.perform {
            importer.delete(try importer.existingObject(with: ids[0]))
            importer.delete(try importer.existingObject(with: ids[1]))
            try importer.save()
        }
        let merge = try #require(await remoteMerges(recorderA, count: 2).dropFirst().first)
        #expect(merge.removedObjectIDs == Set(inA[0..<2]))
        let registered = await main.perform { main.registeredObjectCount }
        #expect(registered == 3)
        withExtendedLifetime(holder) {}
    }

    @Test func aFetchedResultsControllerFollowsAnInsertByTheOtherStack() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        _ = try await importTickers(b, count: 3)
        _ = await remoteMerges(recorderA, count: 1)
        let main = a.mainContext
        var sorted = FetchRequest<Ticker>()
        sorted.sortDescriptors = [FetchSort(key: "price", ascending: false)]
        let request = sorted
        let panel = try await main.perform {
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: main)
            try controller.performFetch()
            return ControllerBox(controller)
        }
        #expect(await main.perform { panel.controller.fetchedObjects?.count } == 3)
        let importer = b.importerContext()
        let newID = try await importer.perform {
            let ticker = Ticker(context: importer)
            ticker.symbol = "NEW"
            ticker.price = 99
            try importer.save()
            return ticker.objectID
        }
        _ = await remoteMerges(recorderA, count: 2)
        let (listed, fresh) = try await main.perform {
            (panel.controller.fetchedObjects?.map(\.objectID) ?? [], try main.fetch(request).map(\.objectID))
        }
        #expect(listed.first == newID)
        #expect(listed == fresh)
    }

    /// Holds `stack`'s history queue, where it reads other writers' history,
    /// until `body` returns: what other writers commit meanwhile is not read.
    /// Only the stack's private queue is held — never the main queue, for which
    /// other tests' tasks may be waiting on the few cooperative threads — and
    /// it is let go after 120 s at most, so that a stuck `body` fails the test
    /// rather than hangs it.
    private func withHistoryHeld(of stack: StackManager, _ body: () async throws -> Void) async rethrows {
        let release = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        stack.historyQueue.async {
            blocked.signal()
            _ = release.wait(timeout: .now() + .seconds(120))
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { blocked.wait(); continuation.resume() }
        }
        defer { release.signal() }
        try await body()
    }

    private func saveTicker(_ stack: StackManager, _ symbol: String) async throws {
        let importer = stack.importerContext()
        try await importer.perform {
            Ticker(context: importer).symbol = symbol
            try importer.save()
        }
    }

    @Test func historyPurgedBeforeTheStackReadItRefreshesEverythingAndSaysSo() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        let ids = try await importTickers(b, count: 3)
        _ = await remoteMerges(recorderA, count: 1)
        let main = a.mainContext
        let inA = ids.map { a.mainCoordinator.managedObjectID(forURIRepresentation: $0.uriRepresentation())! }
        let holder = ObjectHolder()
        try await main.perform { holder.objects = try inA.map { try main.existingObject(with: $0) } }
        try await withHistoryHeld(of: a) {
            for symbol in ["X", "Y", "Z"] { try await saveTicker(b, symbol) }
            let last = try #require(try b.writerCoordinator.currentPersistentHistoryToken())
            #expect(try b.writerCoordinator.deleteHistory(.deleteHistory(before: last)) == 3)
        }
        await recorderA.wait(until: "a merge of expired history") { $0.contains { $0.merge.source == .expiredHistory } }
        let reset = try #require(recorderA.all.first { $0.source == .expiredHistory })
        #expect(reset.refreshedObjectIDs == Set(inA))
        #expect(a.lastMergedHistoryToken == (try b.writerCoordinator.currentPersistentHistoryToken()))
        withExtendedLifetime(holder) {}
    }

    /// Another writer's transaction is read on the stack's history queue while
    /// the main queue is busy, and merged once it is free.
    @Test func historyIsReadOffTheMainQueue() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        // Fired by the read that reaches `wanted` (set once the other stack saved).
        let wanted = Locked<PersistentHistoryToken?>(nil)
        let readWanted = Signal()
        let observer = NotificationCenter.default.addObserver(forName: StackManager.historyDidReadNotification, object: a, queue: nil) { _ in
            if let token = wanted.withLock({ $0 }), a.lastReadHistoryToken == token { readWanted.fire() }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        // All on the main queue, so that nothing waits for a cooperative thread
        // (other tests may hold them) while the main queue is held.
        let (written, read, merged) = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.main.async {
                continuation.resume(with: Result {
                    let importer = b.importerContext()
                    try importer.performAndWait {
                        for index in 0..<1_000 { Ticker(context: importer).symbol = "M\(index)" }
                        try importer.save()
                    }
                    let written = try b.writerCoordinator.currentPersistentHistoryToken()
                    wanted.withLock { $0 = written }
                    if a.lastReadHistoryToken == written { readWanted.fire() }   // read before `wanted` was set
                    // The main queue is held on purpose here: the read must not need it.
                    readWanted.waitBlocking(for: "the history read while the main queue is busy", deadline: .seconds(10))
                    return (written, a.lastReadHistoryToken, a.lastMergedHistoryToken)
                })
            }
        }
        #expect(read == written, "read while the main queue was busy")
        #expect(merged != written, "merged only on the main queue")
        let merges = await remoteMerges(recorderA, count: 1)
        #expect(merges.first?.save.insertedObjectIDs.count == 1_000)
        #expect(a.lastMergedHistoryToken == written)
    }

    @Test func purgeKeepsWhatTheMainContextHasNotMerged() async throws {
        let (a, b, _) = try await makeStacks()
        let recorderA = MergeRecorder(a)
        try await saveTicker(b, "OLD")
        _ = await remoteMerges(recorderA, count: 1)
        try await withHistoryHeld(of: a) {
            try await saveTicker(b, "NEW")
            // The OLD transaction was merged: it goes. NEW was not: it stays, though older than the retention.
            #expect(try a.purgeHistory(olderThan: .zero) == 1)
        }
        let merges = await remoteMerges(recorderA, count: 2)
        #expect(merges.count == 2)
        #expect(!recorderA.all.contains { $0.source == .expiredHistory })
        #expect(try a.purgeHistory(olderThan: .zero) == 1)   // NEW is merged now: it goes too
        let remaining = try a.mainCoordinator.fetchHistory(.fetchHistory(after: nil as PersistentHistoryToken?))
        #expect(remaining.isEmpty)
        // The bookmark still reads on: nothing it needs was deleted.
        try await saveTicker(b, "LATER")
        #expect(await remoteMerges(recorderA, count: 3).count == 3)
        #expect(!recorderA.all.contains { $0.source == .expiredHistory })
    }
}
