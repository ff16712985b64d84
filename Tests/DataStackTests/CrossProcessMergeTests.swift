import Foundation
import Testing
import DataStack

/// Two processes on one store: a stack in this process shows the ten most
/// updated companies while ticker-import, in a process of its own
/// (`--import-only`), imports into the same file. Every save of the other
/// process reaches the stack through the store's persistent history, and is
/// merged with the rule of the stack's own imports: the objects shown are
/// refreshed, and nothing else is registered.
@Suite(.serialized) struct CrossProcessMergeTests {
    typealias SaveLine = TickerImportProcess.SaveLine

    /// Stock updates per save of the other process.
    static let batch = 50
    /// Companies in its market: three times as many as the list shows, so
    /// companies enter and leave the list as the import runs.
    static let tickers = 30
    /// Objects the list shows.
    static let shown = 10
    /// Objects the main context may hold after a merge beyond those shown.
    /// The list's objects are the only ones anything holds (measured: no
    /// more), so more would be objects a merge registered and kept — the
    /// companies or stock updates the save touched.
    static let registeredBeyondShown = 2
    /// How long a test waits for the other process and for the merges of its
    /// saves, all waits together: each gives up at the deadline this sets
    /// once the screen is up. Alone a test takes well under a second; beside
    /// the rest of the suite on two cores, the main queue that merges (and
    /// the pool that runs the test) can be held by other tests for seconds:
    /// a CI run with the archive fuzzers beside it used up 12 s before the
    /// second of three checkpoints. A limit, not a measurement: a passing run
    /// ends as soon as its conditions hold.
    static let timeLimit = Duration.seconds(30)

    /// ticker-import importing into the store of `screen` in a second process, a line per save.
    private func startImporter(for screen: MoversScreen, run: Int) throws -> TickerImportChild {
        try TickerImportChild(arguments: ["--import-only", "--json", "--tickers", "\(Self.tickers)", "--batch", "\(Self.batch)",
                                          "--store", screen.storeURL.path],
                              stderr: screen.directory.url.appendingPathComponent("importer-\(run).txt"))
    }

    /// Stops the importer as Ctrl-C does; returns its lines, the final one last.
    private func stop(_ importer: TickerImportChild, before deadline: ContinuousClock.Instant) throws -> [SaveLine] {
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: deadline - .now), "ticker-import did not stop on SIGINT")
        #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
        let lines = importer.lines(SaveLine.self)
        #expect(lines.last?.final == true)
        #expect(lines.last?.error == nil)
        return lines
    }

    /// The merges of the other process's saves, which must be all the merges there are.
    private func expectMerges(_ merges: [MergeRecorder.Arrival], cameFrom importer: TickerImportChild,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        let authorPrefix = "DataStack/ticker-import/\(importer.processIdentifier)/"
        for arrival in merges {
            guard case .otherProcess(let author, let processID) = arrival.merge.source else {
                Issue.record("a merge from \(arrival.merge.source), not from the other process", sourceLocation: sourceLocation)
                continue
            }
            #expect(author?.hasPrefix(authorPrefix) == true, "author \(author ?? "nil")", sourceLocation: sourceLocation)
            #expect(processID == "ticker-import", sourceLocation: sourceLocation)
        }
    }

    /// Each save reported and the merge of it, in order: the same objects inserted and updated.
    private func expectEachSaveMergedOnce(_ saves: [SaveLine], _ merges: [MergeRecorder.Arrival],
                                          sourceLocation: SourceLocation = #_sourceLocation) {
        let reported = saves.filter { !$0.final }
        #expect(merges.count == reported.count, "\(merges.count) merges of \(reported.count) saves", sourceLocation: sourceLocation)
        for (save, arrival) in zip(reported, merges) {
            #expect(arrival.merge.save.insertedObjectIDs.count == save.inserted, "save \(save.saved)", sourceLocation: sourceLocation)
            #expect(arrival.merge.save.updatedObjectIDs.count == save.updated, "save \(save.saved)", sourceLocation: sourceLocation)
        }
    }

    @Test func theStackRefreshesWhatItShowsWhileAnotherProcessImports() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let started = ContinuousClock.now
        let screen = try await MoversScreen(limit: Self.shown)
        let deadline = ContinuousClock.now + Self.timeLimit
        let importer = try startImporter(for: screen, run: 1)

        // While it runs: at three moments, the store's state and the screen agree
        // once the stack merged everything committed. The importer is paused
        // (SIGSTOP) meanwhile, so that there is one state of the store to compare with.
        for checkpoint in [4, 8, 12] {
            let lines = importer.waitForLines(SaveLine.self, count: checkpoint, timeout: deadline - .now)
            try #require(lines.count >= checkpoint, "\(lines.count) saves reported; stderr: \(importer.stderrText)")
            try #require(importer.pause(), "the importer did not stop; stderr: \(importer.stderrText)")
            try await screen.waitUntilItMergedEverythingCommitted(before: deadline)
            try await screen.expectToShowTheStore(count: Self.shown)
            importer.send(SIGCONT)
        }
        let saves = try stop(importer, before: deadline)
        let final = try #require(saves.last)

        // After it stopped: the list equals a fresh fetch and the rows on disk.
        try await screen.waitUntilItMergedEverythingCommitted(before: deadline)
        try await screen.expectToShowTheStore(count: Self.shown)
        let merges = screen.recorder.arrivals
        expectMerges(merges, cameFrom: importer)
        expectEachSaveMergedOnce(saves, merges)
        #expect(merges.map(\.merge.stockUpdatesInserted).reduce(0, +) == final.stockUpdates)
        #expect(try TickerStoreContents(screen.storeURL).stockUpdates == final.stockUpdates)

        // What a merge left registered: the list, whatever the save touched.
        let registered = merges.compactMap(\.registeredInMain)
        #expect(registered.count == merges.count)
        let mostRegistered = registered.max() ?? 0
        #expect(mostRegistered <= Self.shown + Self.registeredBeyondShown, "registered after each merge: \(registered)")
        #expect(merges.allSatisfy { $0.merge.refreshedObjectIDs.count <= Self.shown })

        let latencies = zip(saves.filter { !$0.final }, merges).compactMap { save, arrival in
            save.savedAt.map { arrival.time.timeIntervalSince1970 - $0 }
        }.sorted()
        print("CrossProcessMergeTests: \(merges.count) saves of pid \(importer.processIdentifier) merged, "
              + "\(final.stockUpdates) stock updates; save → merge latency median \(milliseconds(latencies.median)) ms, "
              + "max \(milliseconds(latencies.last ?? 0)) ms (saves around the pauses included); registered in main after a merge "
              + "at most \(mostRegistered) (\(Self.shown) shown); mean merge \(milliseconds(merges.meanDuration)) ms; "
              + "in \(ContinuousClock.now - started), \(deadline - Self.timeLimit - started) of it setting up the screen")
    }

    @Test func killedMidRunTheOtherProcessLeftEverySaveItReportedAndTheStackStillMerges() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let started = ContinuousClock.now
        let screen = try await MoversScreen(limit: Self.shown)
        let deadline = ContinuousClock.now + Self.timeLimit
        let importer = try startImporter(for: screen, run: 1)
        let before = importer.waitForLines(SaveLine.self, count: 4, timeout: deadline - .now)
        try #require(before.count >= 4, "\(before.count) saves reported; stderr: \(importer.stderrText)")
        // A moment into a later save: writing it, committing it, or reporting it.
        // (Behaviour under test: the kill lands at a random moment. A blocking
        // sleep, as the waits: the kill must not wait for a free thread of the pool.)
        usleep(UInt32.random(in: 0..<20_000))
        importer.kill()
        #expect(importer.wasKilled)
        let reported = importer.lines(SaveLine.self)
        let last = try #require(reported.last)

        // Every save it reported is on disk, none is there in part, and the store is intact.
        let store = try TickerStoreContents(screen.storeURL)
        #expect(store.integrity == ["ok"])
        #expect(store.stockUpdates >= last.stockUpdates, "\(last.stockUpdates) stock updates reported")
        #expect(store.stockUpdates <= last.stockUpdates + Self.batch, "at most the one save it had no time to report")
        #expect(store.stockUpdates % Self.batch == 0)
        #expect(store.companiesWithMismatchedCounters == 0)

        // The stack merged every save that was committed, reported or not.
        try await screen.waitUntilItMergedEverythingCommitted(before: deadline)
        try await screen.expectToShowTheStore(count: Self.shown)
        let mergedBeforeKill = screen.recorder.arrivals
        expectMerges(mergedBeforeKill, cameFrom: importer)
        expectEachSaveMergedOnce(reported, Array(mergedBeforeKill.prefix(reported.count)))
        #expect(mergedBeforeKill.map(\.merge.stockUpdatesInserted).reduce(0, +) == store.stockUpdates)
        #expect(screen.stack.historyMergeError == nil)

        // And it follows the next process that imports into the store.
        let restarted = try startImporter(for: screen, run: 2)
        let resumed = restarted.waitForLines(SaveLine.self, count: 3, timeout: deadline - .now)
        try #require(resumed.count >= 3, "stderr: \(restarted.stderrText)")
        let saves = try stop(restarted, before: deadline)
        let final = try #require(saves.last)
        try await screen.waitUntilItMergedEverythingCommitted(before: deadline)
        try await screen.expectToShowTheStore(count: Self.shown)
        let mergedAfter = Array(screen.recorder.arrivals.dropFirst(mergedBeforeKill.count))
        expectMerges(mergedAfter, cameFrom: restarted)
        // The companies exist: the restarted run's saves are all imports.
        expectEachSaveMergedOnce(saves, mergedAfter)
        let after = try TickerStoreContents(screen.storeURL)
        #expect(after.integrity == ["ok"])
        #expect(after.stockUpdates == store.stockUpdates + final.stockUpdates)
        print("CrossProcessMergeTests: killed after \(last.saved) reported saves with \(store.stockUpdates - last.stockUpdates) "
              + "stock updates committed but not reported; \(mergedBeforeKill.count) merges before the kill, \(mergedAfter.count) "
              + "from the restarted process; in \(ContinuousClock.now - started), \(deadline - Self.timeLimit - started) of it setting up the screen")
    }

    private func milliseconds(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1000) }
}

/// The test's side: a stack of its own on a new ticker store, showing the
/// companies with the most updates through a fetched results controller on
/// its main context, as the example's top movers panel does — and nothing else.
private final class MoversScreen: Sendable {
    let directory = StackDirectory()
    let stack = StackManager()
    let recorder: MergeRecorder
    private let list: ControllerBox<ManagedObject>
    private let request: FetchRequest<ManagedObject>

    var storeURL: URL { directory.storeURL }

    init(limit: Int) async throws {
        StackDirectory.keepUntilExit(directory)
        // The example's own model, from the .xcdatamodeld it ships; the stack's defaults follow other processes' history.
        try await stack.setup(model: try TickerStoreModel.make(), storeURL: directory.storeURL)
        recorder = MergeRecorder(stack, countsRegisteredObjects: true)
        var mostUpdated = FetchRequest<ManagedObject>(entityName: "Company")
        mostUpdated.sortDescriptors = [FetchSort(key: "updateCount", ascending: false), FetchSort(key: "symbol")]
        mostUpdated.fetchLimit = limit
        let request = mostUpdated
        self.request = request
        let main = stack.mainContext
        list = try await main.perform {
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: main)
            try controller.performFetch()
            return ControllerBox(controller)
        }
    }

    /// Waits until the main context has merged the store's last committed transaction.
    func waitUntilItMergedEverythingCommitted(before deadline: ContinuousClock.Instant,
                                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        // The writer stopped: the head no longer moves.
        let head = try stack.mainCoordinator.currentPersistentHistoryToken()
        while true {
            // Counted first: the stack moves its bookmark before it posts a merge, so
            // a bookmark short of the head means the merge that moves it is still to come.
            let seen = recorder.arrivals.count
            if stack.lastMergedHistoryToken == head { break }
            let left = deadline - ContinuousClock.now
            guard left > .zero, await recorder.wait(until: "a merge of the store's last transaction", seconds: left.seconds,
                                                    sourceLocation: sourceLocation, { $0.count > seen }) else { break }
        }
        try #require(stack.lastMergedHistoryToken == head,
                     "merged up to \(String(describing: stack.lastMergedHistoryToken)), the store is at \(String(describing: head))",
                     sourceLocation: sourceLocation)
    }

    /// The list shows what a fresh fetch of its request finds, with the values
    /// the store's rows have: the objects shown were refreshed by the merges.
    func expectToShowTheStore(count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let main = stack.mainContext
        let (listed, fetched, shown) = try await main.perform { [list, request] in
            let objects = list.controller.fetchedObjects ?? []
            let rows = try objects.map { company in
                TickerStoreContents.CompanyRow(symbol: try company.value(forKey: "symbol") as? String ?? "",
                           price: try company.value(forKey: "price") as? Double ?? .nan,
                           // Integer attributes read back as Int.
                           updateCount: Int64(try company.value(forKey: "updateCount") as? Int ?? -1))
            }
            return (objects.map(\.objectID), try main.fetch(request).map(\.objectID), rows)
        }
        let stored = try TickerStoreContents.mostUpdatedCompanies(in: storeURL, limit: count)
        #expect(stored.count == count, sourceLocation: sourceLocation)
        #expect(listed == fetched, "the list is not what a fresh fetch finds", sourceLocation: sourceLocation)
        #expect(shown == stored, "shown \(shown), the store has \(stored)", sourceLocation: sourceLocation)
    }
}

private extension StackDidMerge {
    /// The stock updates the merged save inserted.
    var stockUpdatesInserted: Int { save.insertedObjectIDs.filter { $0.entityName == "StockUpdate" }.count }
}

private extension [MergeRecorder.Arrival] {
    /// How long the merges took on the main queue, on average, in seconds.
    var meanDuration: Double {
        guard !isEmpty else { return 0 }
        let total = map { Double($0.merge.duration.components.seconds) + Double($0.merge.duration.components.attoseconds) / 1e18 }.reduce(0, +)
        return total / Double(count)
    }
}

private extension [Double] {
    /// The middle value of a sorted array; 0 when empty.
    var median: Double { isEmpty ? 0 : self[count / 2] }
}
