import Foundation
import Synchronization
import Testing
import DataStack

/// Batch requests run by an importer reach the main context as an importer's
/// save does (registered objects refreshed or removed), so a list on main
/// follows rows a batch moves into or out of it.
@Suite struct StackBatchRequestTests {
    private func listRequest() throws -> FetchRequest<Ticker> {
        var request = FetchRequest<Ticker>(entityName: "Ticker", predicate: try FetchPredicate(format: "price >= 5"))
        request.sortDescriptors = [FetchSort(key: "price", ascending: true)]
        return request
    }

    /// The list's symbols and prices, loading its objects as a view would, and the same fetched fresh.
    private func shown(_ panel: ListPanel, _ stack: StackManager) async throws -> (list: [String], fresh: [String], failures: [String]) {
        let main = stack.mainContext
        let request = try listRequest()
        return try await main.perform {
            let list = (panel.controller.fetchedObjects ?? []).map { "\($0.symbol)=\($0.price)" }
            var fresh = FetchRequest<[String: Any]>(entityName: "Ticker", predicate: request.predicate, sortDescriptors: request.sortDescriptors)
            fresh.resultType = .dictionary
            fresh.propertiesToFetch = ["symbol", "price"]
            let rows = try main.fetch(fresh).map { "\($0["symbol"] as? String ?? "?")=\($0["price"] as? Double ?? .nan)" }
            return (list, rows, panel.log.failures)
        }
    }

    @Test func aListOnMainFollowsRowsABatchUpdateMovesInAndOut() async throws {
        let (stack, directory) = try await makeStack()
        let recorder = MergeRecorder(stack)
        _ = try await importTickers(stack, count: 10)
        await recorder.wait(for: 1)
        let panel = try await ListPanel.make(stack, try listRequest())
        #expect(try await shown(panel, stack).list == ["T5=5.0", "T6=6.0", "T7=7.0", "T8=8.0", "T9=9.0"])

        let importer = stack.importerContext()
        try await importer.perform {
            // T0 and T1 move in (at the end), T9 moves out, T5 changes in place.
            _ = try importer.execute(BatchUpdateRequest(entityName: "Ticker", predicate: try FetchPredicate(format: "symbol IN {'T0', 'T1'}"),
                                                        propertiesToUpdate: ["price": .keyPath("price") + 20]))
            _ = try importer.execute(BatchUpdateRequest(entityName: "Ticker", predicate: try FetchPredicate(format: "symbol == 'T9'"),
                                                        propertiesToUpdate: ["price": 0]))
            _ = try importer.execute(BatchUpdateRequest(entityName: "Ticker", predicate: try FetchPredicate(format: "symbol == 'T5'"),
                                                        propertiesToUpdate: ["price": 5.5]))
        }
        await recorder.wait(for: 4)
        // The stack follows history too: the batches' transactions are skipped there as its own, not merged twice.
        #expect(stack.followsPersistentHistory)
        let after = try await shown(panel, stack)
        #expect(after.list == ["T5=5.5", "T6=6.0", "T7=7.0", "T8=8.0", "T0=20.0", "T1=21.0"])
        #expect(after.list == after.fresh)
        #expect(after.failures.isEmpty, "\(after.failures)")
        // Another writer's save is merged from history after the batches would have been.
        try await mergeMarkerFromAnotherStack(recorder, directory: directory)
        #expect(recorder.all.dropLast().map(\.source) == Array(repeating: .importer, count: 4))
    }

    /// A batch over more rows than one store query checks (16,384) reaches a
    /// list on main as one fetch of the list, not as checks binding every
    /// changed ID: SQLite compiles a long `IN` list of numbered parameters in
    /// quadratic time, on the main queue here.
    @Test func aListOnMainFollowsABatchOverMoreRowsThanOneQueryChecksWithOneFetch() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        _ = try await importTickers(stack, count: 20_000)
        await recorder.wait(for: 1)
        var request = FetchRequest<Ticker>(entityName: "Ticker", predicate: try FetchPredicate(format: "price >= 19995"))
        request.sortDescriptors = [FetchSort(key: "price", ascending: true)]
        request.fetchLimit = 3
        let panel = try await ListPanel.make(stack, request)
        let main = stack.mainContext
        func shown() async -> [String] {
            await main.perform { (panel.controller.fetchedObjects ?? []).map { "\($0.symbol)=\($0.price)" } }
        }
        #expect(await shown() == ["T19995=19995.0", "T19996=19996.0", "T19997=19997.0"])

        let store = try #require(main.persistentStoreCoordinator?.persistentStores.first as? SQLiteStore)
        let parameters = Mutex(0)
        store.traceStatements { sql in parameters.withLock { $0 += sql.count { $0 == "?" } } }
        defer { store.traceStatements(nil) }
        let importer = stack.importerContext()
        try await importer.perform {
            _ = try importer.execute(BatchUpdateRequest(entityName: "Ticker", propertiesToUpdate: ["price": .keyPath("price") + 2]))
        }
        await recorder.wait(for: 2)
        #expect(await shown() == ["T19993=19995.0", "T19994=19996.0", "T19995=19997.0"])
        #expect(parameters.withLock { $0 } < 100, "the merge bound the changed IDs instead of fetching the list")
        let (failures, changes) = await main.perform { (panel.log.failures, panel.log.changes.count) }
        #expect(failures.isEmpty, "\(failures)")
        #expect(changes == 1)
    }

    @Test func aListOnMainLosesRowsABatchDeleteRemoves() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 10)
        await recorder.wait(for: 1)
        let panel = try await ListPanel.make(stack, try listRequest())
        _ = try await shown(panel, stack)
        let importer = stack.importerContext()
        try await importer.perform {
            _ = try importer.execute(BatchDeleteRequest(objectIDs: [ids[6], ids[8], ids[0]]))
        }
        let merges = await recorder.wait(for: 2)
        #expect(merges.last?.save.deletedObjectIDs == [ids[6], ids[8], ids[0]])
        let after = try await shown(panel, stack)
        #expect(after.list == ["T5=5.0", "T7=7.0", "T9=9.0"])
        #expect(after.list == after.fresh)
        #expect(after.failures.isEmpty, "\(after.failures)")
        let main = stack.mainContext
        let registered = await main.perform { main.registeredObjects.map(\.objectID) }
        #expect(Set(registered).isDisjoint(with: [ids[6], ids[8]]))
    }

    @Test func aListOnMainGainsTheRowsABatchInsertAdds() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        _ = try await importTickers(stack, count: 10)
        await recorder.wait(for: 1)
        let panel = try await ListPanel.make(stack, try listRequest())
        #expect(try await shown(panel, stack).list == ["T5=5.0", "T6=6.0", "T7=7.0", "T8=8.0", "T9=9.0"])

        let importer = stack.importerContext()
        let inserted = try await importer.perform { () -> Set<ObjectID> in
            // N1 and N3 fall in the list's range (N3 last), N2 does not.
            let prices = [6.5, 1, 50]
            var request = BatchInsertRequest(entityName: "Ticker") { index, row in
                guard index < prices.count else { return true }
                row["symbol"] = "N\(index + 1)"
                row["price"] = prices[index]
                return false
            }
            request.resultType = .objectIDs
            guard case .objectIDs(let save) = try importer.execute(request) else { return [] }
            return save.insertedObjectIDs
        }
        let merges = await recorder.wait(for: 2)
        #expect(inserted.count == 3)
        #expect(merges.last?.source == .importer)
        #expect(merges.last?.save.insertedObjectIDs == inserted)
        let after = try await shown(panel, stack)
        #expect(after.list == ["T5=5.0", "T6=6.0", "N1=6.5", "T7=7.0", "T8=8.0", "T9=9.0", "N3=50.0"])
        #expect(after.list == after.fresh)
        #expect(after.failures.isEmpty, "\(after.failures)")
    }

    @Test func aBatchByAnotherCoordinatorOnTheFileReachesMainThroughHistory() async throws {
        let (stack, directory) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 3)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        let holder = ObjectHolder()
        try await main.perform {
            holder.objects = try ids.map { try main.existingObject(with: $0) }
            _ = holder.objects.compactMap { ($0 as? Ticker)?.price }
        }
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let other = PersistentStoreCoordinator(managedObjectModel: StackTestModel.make())
        try other.addPersistentStore(type: .sqlite, at: directory.storeURL, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        context.transactionAuthor = "repricer"
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Ticker", propertiesToUpdate: ["price": .keyPath("price") * 10]))
        }
        let merges = await recorder.wait(for: 2)
        guard case .otherProcess(let author, _) = merges.last?.source else {
            Issue.record("no merge from history: \(merges.map(\.source))")
            return
        }
        #expect(author == "repricer")
        #expect(merges.last?.save.updatedObjectIDs == Set(ids))
        let prices = await main.perform { holder.objects.compactMap { ($0 as? Ticker)?.price } }
        #expect(prices == [0, 10, 20])
    }
}
