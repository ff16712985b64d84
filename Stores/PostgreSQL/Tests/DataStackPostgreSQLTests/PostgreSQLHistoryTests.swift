import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// The history a PostgreSQL store records: one transaction per save, numbered
/// in commit order, read after a token, filtered by author, deleted up to a token.
@Suite(.serialized) struct PostgreSQLHistoryTests {
    private var options: StoreOptions {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        return options
    }

    private func save(_ context: ManagedObjectContext, symbol: String, author: String) throws {
        context.transactionAuthor = author
        try context.performAndWait {
            let company = ManagedObject(entity: try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Company"]),
                                        insertInto: context)
            try company.setValue(symbol, forKey: "symbol")
            try context.save()
        }
    }

    @Test("saves are read back as transactions after a token, with their changes and authors, and deleted history expires old tokens")
    func transactionsAfterAToken() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let coordinator = try StoreKind.postgreSQL.coordinator(StoreTestModel.make(), at: url, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let start = try #require(try coordinator.currentPersistentHistoryToken())
        #expect(start.transactionNumber == 0)
        try save(context, symbol: "A", author: "importer")
        try save(context, symbol: "B", author: "viewer")
        try save(context, symbol: "C", author: "importer")

        let all = try coordinator.fetchHistory(.fetchHistory(after: start))
        #expect(all.map(\.transactionNumber) == [1, 2, 3])
        #expect(all.map(\.author) == ["importer", "viewer", "importer"])
        #expect(all.allSatisfy { $0.changes?.count == 1 && $0.changes?.first?.changeType == .insert })

        var others = PersistentHistoryRequest.fetchHistory(after: all[0].token)
        others.filter = .not(.author("importer"))
        #expect(try coordinator.fetchHistory(others).map(\.transactionNumber) == [2])

        #expect(try coordinator.deleteHistory(.deleteHistory(before: all[2].token)) == 2)
        #expect(throws: PersistentStoreError.self) { try coordinator.fetchHistory(.fetchHistory(after: start)) }
        #expect(try coordinator.fetchHistory(.fetchHistory(after: all[1].token)).map(\.transactionNumber) == [3])

        let foreign = PersistentHistoryToken(storeIdentifier: "another store", transactionNumber: 1)
        #expect(throws: PersistentStoreError.self) { try coordinator.fetchHistory(.fetchHistory(after: foreign)) }
        let future = PersistentHistoryToken(storeIdentifier: start.storeIdentifier, transactionNumber: 99)
        #expect(throws: PersistentStoreError.self) { try coordinator.fetchHistory(.fetchHistory(after: future)) }
    }

    @Test("another coordinator's save is reported with its history token")
    func remoteChangeCarriesTheToken() async throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        var observing = options
        observing.remoteChangeNotifications = true
        let watcher = try StoreKind.postgreSQL.coordinator(StoreTestModel.make(), at: url, options: observing)
        let writer = try StoreKind.postgreSQL.coordinator(StoreTestModel.make(), at: url, options: options)
        let received = Received()
        let observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storeRemoteChangeNotification,
                                                              object: watcher, queue: nil) { notification in
            if let change = try? StoreRemoteChange(notification) { received.append(change) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try save(ManagedObjectContext(concurrencyType: .privateQueue, coordinator: writer), symbol: "A", author: "writer")
        let deadline = ContinuousClock.now + .seconds(10)
        while received.changes.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(received.changes.first?.historyToken?.transactionNumber == 1)
    }
}

private final class Received: @unchecked Sendable {
    // @unchecked Sendable: `list` only under `lock`.
    private let lock = NSLock()
    private var list: [StoreRemoteChange] = []
    func append(_ change: StoreRemoteChange) { lock.withLock { list.append(change) } }
    var changes: [StoreRemoteChange] { lock.withLock { list } }
}
