@_spi(DataStackInternal) import DataStackSupport
import Foundation
@testable import ObjectGraph
import Synchronization
import Testing
@testable import DataStackStores

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
        let changes = Recording<StoreRemoteChange>()
        private var token: (any NSObjectProtocol)?

        init(_ coordinator: PersistentStoreCoordinator) {
            token = NotificationCenter.default.addObserver(
                forName: PersistentStoreCoordinator.storeRemoteChangeNotification, object: coordinator, queue: nil
            ) { [weak self] notification in
                // A notification without the payload fails the payload check below (count stays 0).
                if let change = try? StoreRemoteChange(notification) { self?.changes.append(change) }
            }
        }

        var count: Int { changes.elements.count }
        var last: StoreRemoteChange? { changes.elements.last }

        /// Waits up to `limit` for the notifications posted so far to satisfy
        /// `condition`, checked as each arrives; returns how long it took, or
        /// nil after recording an issue.
        func wait(upTo limit: Duration = .seconds(30), until condition: @escaping @Sendable ([StoreRemoteChange]) -> Bool,
                  sourceLocation: SourceLocation = #_sourceLocation) async -> Duration? {
            let clock = ContinuousClock()
            let start = clock.now
            let met = await changes.wait(for: "the remote-change notification", deadline: limit, sourceLocation: sourceLocation,
                                         until: condition)
            return met ? clock.now - start : nil
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
        let latency = await recorder.wait { $0.last?.historyToken == expected }
        #expect(latency != nil, "no remote-change notification within 30 s")
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
        #expect(await recorder.wait { $0.count > 0 } != nil)
        #expect(recorder.last?.historyToken == nil)
    }

    @Test func anIdleStorePostsNothing() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url)
        let watcher = try Self.open(url)
        let recorder = Recorder(watcher)
        // Reads by the other coordinator are not commits either.
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: writer)
        _ = try context.performAndWait { try context.count(for: FetchRequest<Company>(entityName: "Company")) }
        // A commit afterwards is posted after anything the idle spell and the
        // read would have posted: if it is the first and only post, they posted nothing.
        try Self.insertCompany(writer, symbol: "LATER")
        let expected = try #require(try writer.currentPersistentHistoryToken())
        #expect(await recorder.wait { $0.last?.historyToken == expected } != nil)
        #expect(recorder.count == 1, "only the commit was posted")
    }

    @Test func aRemovedStoreStopsWatchingAndPostsNoMore() async throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Remote.sqlite")
        let writer = try Self.open(url)
        let watcher = try Self.open(url)
        let recorder = Recorder(watcher)
        let store = try #require(watcher.persistentStores.first as? SQLiteStore)
        try Self.insertCompany(writer, symbol: "ACME")
        #expect(await recorder.wait { $0.count > 0 } != nil)
        try watcher.remove(store)
        #expect(store.changeWatcher.withLock { $0 } == nil)
        let before = recorder.count
        // A coordinator still watching sees the next commit; by the time it
        // posts, the removed store would have posted too.
        let other = try Self.open(url)
        let stillWatching = Recorder(other)
        try Self.insertCompany(writer, symbol: "BETA")
        #expect(await stillWatching.wait { $0.count > 0 } != nil)
        #expect(recorder.count == before)
        withExtendedLifetime(other) {}
    }

    @Test func withoutTheOptionNothingIsWatched() throws {
        let directory = TemporaryDirectory()
        let coordinator = try Self.open(directory.file("Quiet.sqlite"), options: PersistentHistoryTests.tracking())
        let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
        #expect(store.changeWatcher.withLock { $0 } == nil)
    }
}
