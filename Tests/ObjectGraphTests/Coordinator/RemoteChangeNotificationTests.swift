@_spi(DataStackInternal) import DataStackSupport
import Foundation
@testable import ObjectGraph
import Synchronization
import Testing

/// `StoreOptions.remoteChangeNotifications`: a store notices commits made on
/// its file by other connections and posts `storeRemoteChangeNotification`.
@Suite struct RemoteChangeNotificationTests {
    static func options(tracking: Bool = true) -> StoreOptions {
        var options = StoreOptions()
        options.persistentHistoryTracking = tracking
        options.remoteChangeNotifications = true
        return options
    }

    static func open(_ url: URL, options: StoreOptions = options()) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        return coordinator
    }

    /// Collects the remote-change notifications one coordinator posts.
    // @unchecked Sendable: `token` is set once in init and only read in deinit.
    final class Recorder: @unchecked Sendable {
        let changes = Mutex<[StoreRemoteChange]>([])
        private var token: (any NSObjectProtocol)?

        init(_ coordinator: PersistentStoreCoordinator) {
            token = NotificationCenter.default.addObserver(
                forName: PersistentStoreCoordinator.storeRemoteChangeNotification, object: coordinator, queue: nil
            ) { [weak self] notification in
                // A notification without the payload fails the payload check below (count stays 0).
                if let change = try? StoreRemoteChange(notification) { self?.changes.withLock { $0.append(change) } }
            }
        }

        var count: Int { changes.withLock { $0.count } }
        var last: StoreRemoteChange? { changes.withLock { $0.last } }

        /// Waits up to `limit` for `condition`; returns how long it took, or nil.
        ///
        /// The condition is checked once more after the limit: with the whole
        /// suite on two cores, tests that block cooperative threads (child
        /// processes, semaphores) can keep this task from running for seconds,
        /// and a notification that arrived meanwhile must still count.
        /// (Alone, a notification comes in ~10 ms.)
        func wait(upTo limit: Duration = .seconds(10), until condition: (Recorder) -> Bool) async throws -> Duration? {
            let clock = ContinuousClock()
            let start = clock.now
            while clock.now - start < limit {
                if condition(self) { return clock.now - start }
                try await Task.sleep(for: .milliseconds(2))
            }
            return condition(self) ? clock.now - start : nil
        }

        deinit { if let token { NotificationCenter.default.removeObserver(token) } }
    }

    static func insertCompany(_ coordinator: PersistentStoreCoordinator, symbol: String) throws {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            Company(context: context).symbol = symbol
            try context.save()
        }
    }

    @Test func aSaveThroughOneCoordinatorMakesTheOtherPostWithItsToken() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url)
        let watcher = try Self.open(url)
        let recorder = Recorder(watcher)
        try Self.insertCompany(writer, symbol: "ACME")
        let expected = try #require(try writer.currentPersistentHistoryToken())
        let latency = try await recorder.wait { $0.last?.historyToken == expected }
        #expect(latency != nil, "no remote-change notification within 10 s")
        let change = try #require(recorder.last)
        #expect(change.storeIdentifier == watcher.persistentStores[0].identifier)
        #expect(change.storeURL?.standardizedFileURL.path == url.standardizedFileURL.path)
        #expect(expected.transactionNumber == 1)
    }

    @Test func aStoreWithoutHistoryPostsWithoutAToken() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url, options: Self.options(tracking: false))
        let watcher = try Self.open(url, options: Self.options(tracking: false))
        let recorder = Recorder(watcher)
        try Self.insertCompany(writer, symbol: "ACME")
        #expect(try await recorder.wait { $0.count > 0 } != nil)
        #expect(recorder.last?.historyToken == nil)
    }

    @Test func anIdleStorePostsNothing() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url)
        let watcher = try Self.open(url)
        let recorder = Recorder(watcher)
        try await Task.sleep(for: .milliseconds(300))
        #expect(recorder.count == 0)
        // Reads by the other coordinator are not commits either.
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: writer)
        _ = try context.performAndWait { try context.count(for: FetchRequest<Company>(entityName: "Company")) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(recorder.count == 0)
    }

    @Test func aRemovedStoreStopsWatchingAndPostsNoMore() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url)
        let watcher = try Self.open(url)
        let recorder = Recorder(watcher)
        let store = try #require(watcher.persistentStores.first as? SQLiteStore)
        try Self.insertCompany(writer, symbol: "ACME")
        #expect(try await recorder.wait { $0.count > 0 } != nil)
        try watcher.remove(store)
        #expect(store.changeWatcher.withLock { $0 } == nil)
        let before = recorder.count
        try Self.insertCompany(writer, symbol: "BETA")
        try await Task.sleep(for: .milliseconds(200))
        #expect(recorder.count == before)
    }

    @Test func withoutTheOptionNothingIsWatched() throws {
        let directory = TemporaryDirectory()
        let coordinator = try Self.open(directory.file("Quiet.sqlite"), options: PersistentHistoryTests.tracking())
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        #expect(store.changeWatcher.withLock { $0 } == nil)
    }
}
