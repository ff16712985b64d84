@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Synchronization
import Testing
@testable import DataStack

/// A history read that fails is tried again by the stack itself: the writer
/// whose save it was reading may never save again, and its save must still
/// reach the main context.
@Suite struct StackHistoryRetryTests {
    @Test func aFailedHistoryReadIsRetriedWithoutAnotherSave() async throws {
        let directory = StackDirectory()
        StackDirectory.keepUntilExit(directory)
        // Rollback journal: a connection holding the exclusive lock keeps every
        // reader out (in WAL mode nothing can), so the read fails for real.
        let jammed = Mutex(false)
        var options = StoreOptions.stackDefaults
        options.journalMode = .delete
        options.busyMode = .callback { tries in
            if jammed.withLock({ $0 }) { return false }   // fail at once while the file is held
            usleep(2_000)
            return tries < 2_500
        }
        let viewer = StackManager()
        try await viewer.setup(model: StackTestModel.make(), storeURL: directory.storeURL, options: options)
        var writerOptions = options
        writerOptions.busyMode = .default
        let writer = StackManager()
        try await writer.setup(model: StackTestModel.make(), storeURL: directory.storeURL, options: writerOptions)
        let recorder = MergeRecorder(viewer)

        // Hold the viewer's history queue, so the read of the writer's save
        // starts only once another connection holds the file.
        let gate = DispatchSemaphore(value: 0)
        viewer.historyQueue.async { gate.wait() }
        let noticed = Signal.notification(PersistentStoreCoordinator.storeRemoteChangeNotification, from: viewer.mainCoordinator)
        let failed = Signal.notification(StackManager.historyMergeDidFailNotification, from: viewer)
        let ids = try await importTickers(writer, count: 20)
        await noticed.wait(for: "the viewer's notice of the writer's save")

        var configuration = Connection.Configuration()
        configuration.createsIfMissing = false
        configuration.journalMode = .delete   // as the stacks opened it (the default would switch the file to WAL)
        let holder = try Connection(path: directory.storeURL.path, configuration: configuration)
        try holder.execute("PRAGMA busy_timeout = 10000")
        try holder.execute("BEGIN EXCLUSIVE")
        jammed.withLock { $0 = true }
        gate.signal()
        await failed.wait(for: "the failed history read's notification")
        let error = try #require(viewer.historyMergeError as? PersistentStoreError, "\(String(describing: viewer.historyMergeError))")
        #expect(error.code == .busy, "\(error)")
        #expect(recorder.all.allSatisfy { $0.source != .otherProcess(author: writer.transactionAuthor, processID: ProcessInfo.processInfo.processName) })

        // Free the file; the writer saves nothing more, and the viewer merges its save anyway.
        jammed.withLock { $0 = false }
        try holder.execute("ROLLBACK")
        await recorder.wait(until: "the retried read's merge of the writer's save") { merges in
            merges.contains { $0.merge.save.insertedObjectIDs.count == ids.count }
        }
        #expect(viewer.historyMergeError == nil)
        #expect(viewer.lastMergedHistoryToken != nil)
    }

    @Test func retriesWaitTwiceAsLongEachTimeUpToFiveSeconds() {
        let delays = (1...10).map(StackManager.historyRetryDelay(after:))
        #expect(delays.prefix(7) == [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400),
                                     .milliseconds(800), .milliseconds(1_600), .milliseconds(3_200)])
        #expect(delays.suffix(3) == [.seconds(5), .seconds(5), .seconds(5)])
        #expect(StackManager.historyRetryDelay(after: 0) == .milliseconds(50))
        #expect(StackManager.historyRetryDelay(after: .max) == .seconds(5))
    }
}
