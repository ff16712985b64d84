import Foundation
import Synchronization
import Testing
import DataStack

/// FetchedResultsController on a stack's main context while importers save in
/// the background: the list follows every merge, by keyed diffs, at a cost that
/// depends on the merge and not on the store.
@Suite struct FetchedResultsControllerTests {
    /// What the panel shows against what a fresh fetch returns, read on the main queue.
    struct Reading: Sendable {
        var ids: [ObjectID]
        var freshIDs: [ObjectID]
        var prices: [Double]
        var freshPrices: [Double]
        var alive: Int
        var failures: [String]
        var changes: Int
    }

    private func topTen() -> FetchRequest<Ticker> {
        var request = FetchRequest<Ticker>()
        request.sortDescriptors = [FetchSort(key: "price", ascending: false)]
        request.fetchLimit = 10
        return request
    }

    /// Reads the panel (loading its objects, as a view would) and a fresh fetch of the same request.
    private func read(_ panel: ListPanel, _ stack: StackManager, _ request: FetchRequest<Ticker>) async throws -> Reading {
        let main = stack.mainContext
        return try await main.perform {
            var ids = FetchRequest<ObjectID>(entityName: "Ticker")
            ids.resultType = .managedObjectID
            ids.predicate = request.predicate
            ids.sortDescriptors = request.sortDescriptors
            ids.fetchLimit = request.fetchLimit
            var prices = FetchRequest<[String: Any]>(entityName: "Ticker")
            prices.resultType = .dictionary
            prices.propertiesToFetch = ["price"]
            prices.predicate = request.predicate
            prices.sortDescriptors = request.sortDescriptors
            prices.fetchLimit = request.fetchLimit
            let shown = (panel.controller.fetchedObjects ?? []).map(\.price)
            return Reading(ids: panel.controller.fetchedObjectIDs ?? [], freshIDs: try main.fetch(ids), prices: shown,
                           freshPrices: try main.fetch(prices).map { $0["price"] as? Double ?? .nan },
                           alive: main.registeredObjects.count, failures: panel.log.failures, changes: panel.log.changes.count)
        }
    }

    private func expectAgreement(_ reading: Reading, listSize: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reading.ids == reading.freshIDs, sourceLocation: sourceLocation)
        #expect(reading.prices == reading.freshPrices, sourceLocation: sourceLocation)
        #expect(reading.failures.isEmpty, "\(reading.failures.prefix(2))", sourceLocation: sourceLocation)
        #expect(reading.alive <= listSize, "registered and alive in main: \(reading.alive)", sourceLocation: sourceLocation)
    }

    /// Unique prices: `base` plus a fraction no other call returns.
    final class Prices: Sendable {
        private let counter = Mutex(0)
        func next(_ base: Double) -> Double {
            base + Double(counter.withLock { $0 += 1; return $0 }) / 10_000_000
        }
    }

    // MARK: - Tests

    @Test func topTenFollowsAnImportOfTenThousandTickersMergeByMerge() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let request = topTen()
        let panel = try await ListPanel.make(stack, request)
        let store = try #require(stack.mainCoordinator.persistentStores.first as? SQLiteStore)
        let sql = StackStatementLog()
        store.traceStatements { sql.append($0) }
        defer { store.traceStatements(nil) }
        let prices = Prices()
        var merges = 0
        var ids: [ObjectID] = []

        // 10,000 inserts, 1,000 per save.
        for chunk in 0..<10 {
            sql.reset()
            let importer = stack.importerContext()
            ids += try await importer.perform {
                let tickers = (0..<1_000).map { index -> Ticker in
                    let ticker = Ticker(context: importer)
                    ticker.symbol = "T\(chunk * 1_000 + index)"
                    ticker.price = prices.next(Double.random(in: 0..<100_000).rounded())
                    return ticker
                }
                try importer.save()
                return tickers.map(\.objectID)
            }
            merges += 1
            await recorder.wait(for: merges)
            let lists = sql.selects.filter { $0.contains("FROM ZTICKER") && $0.contains("ORDER BY") }
            #expect(lists.count == 1, "one re-check per merge: \(lists)")
            #expect(lists.allSatisfy { $0.contains("t0.Z_PK IN (") && $0.contains("LIMIT 10") })
            expectAgreement(try await read(panel, stack, request), listSize: 10)
        }
        #expect(ids.count == 10_000)

        // Ten rounds of 1,000 updates: some tickers jump to the top, the current
        // top three fall to the bottom, the rest move at random.
        for round in 0..<10 {
            let top = await stack.mainContext.perform { Array(panel.controller.fetchedObjectIDs?.prefix(3) ?? []) }
            let chosen = Array(ids.shuffled().prefix(1_000))
            sql.reset()
            let importer = stack.importerContext()
            try await importer.perform {
                for (index, id) in chosen.enumerated() {
                    let ticker = try importer.existingObject(with: id) as! Ticker
                    ticker.price = prices.next(index < 5 ? 1_000_000 + Double(round) : Double.random(in: 0..<100_000).rounded())
                }
                for id in top { (try importer.existingObject(with: id) as! Ticker).price = prices.next(0) }
                try importer.save()
            }
            merges += 1
            await recorder.wait(for: merges)
            let lists = sql.selects.filter { $0.contains("FROM ZTICKER") && $0.contains("ORDER BY") }
            #expect(lists.count <= 2, "a re-check and at most one refill per merge: \(lists)")
            #expect(lists.first?.contains("t0.Z_PK IN (") == true)
            let reading = try await read(panel, stack, request)
            expectAgreement(reading, listSize: 10)
            #expect(!reading.ids.contains { top.contains($0) })
        }
        let changes = await stack.mainContext.perform { panel.log.changes.count }
        #expect(changes >= 10 && changes <= merges)   // one diff per merge that changed the list
    }

    @Test func topTenIsRightOnceAFreeRunningImportIsMerged() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let request = topTen()
        let panel = try await ListPanel.make(stack, request)
        let prices = Prices()
        let inserted = try await stack.performImport(0..<10_000, chunkSize: 500) { index, context in
            let ticker = Ticker(context: context)
            ticker.symbol = "T\(index)"
            ticker.price = prices.next(Double(index % 5_000))
        }
        #expect(inserted.savedChunks == 20)
        await recorder.wait(for: 20)
        expectAgreement(try await read(panel, stack, request), listSize: 10)

        // Update every ticker, 500 per save, without waiting for the merges.
        let ids = try await stack.mainContext.perform {
            var all = FetchRequest<ObjectID>(entityName: "Ticker")
            all.resultType = .managedObjectID
            return try stack.mainContext.fetch(all)
        }
        try await stack.performImport(ids, chunkSize: 500) { id, context in
            (try context.existingObject(with: id) as! Ticker).price = prices.next(Double.random(in: 0..<200_000).rounded())
        }
        await recorder.wait(for: 40)
        let reading = try await read(panel, stack, request)
        expectAgreement(reading, listSize: 10)
        #expect(reading.changes <= 40)
    }

    @Test func importerDeletesLeaveTheListAndItRefills() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let importer = stack.importerContext()
        let ids = try await importer.perform {
            let tickers = (0..<50).map { index -> Ticker in
                let ticker = Ticker(context: importer)
                ticker.symbol = "T\(index)"
                ticker.price = Double(index)
                return ticker
            }
            try importer.save()
            return tickers.map(\.objectID)
        }
        await recorder.wait(for: 1)
        let request = topTen()
        let panel = try await ListPanel.make(stack, request)
        _ = try await read(panel, stack, request)   // the top ten are loaded, as on screen
        try await importer.perform {
            for id in [ids[49], ids[45], ids[3]] { importer.delete(try importer.existingObject(with: id)) }
            try importer.save()
        }
        await recorder.wait(for: 2)
        let reading = try await read(panel, stack, request)
        expectAgreement(reading, listSize: 10)
        #expect(reading.ids.first == ids[48])
        let last = await stack.mainContext.perform { panel.log.changes.last?.difference }
        #expect(Set(last?.deletes.map(\.objectID) ?? []) == [ids[49], ids[45]])
        #expect(Set(last?.inserts.map(\.objectID) ?? []) == [ids[39], ids[38]])
    }

    @Test func sectionsMoveWhenTheSectionKeyChangesInAnImport() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let importer = stack.importerContext()
        let ids = try await importer.perform {
            let tickers = (0..<6).map { index -> Ticker in
                let ticker = Ticker(context: importer)
                ticker.symbol = "T\(index)"
                ticker.name = index < 3 ? "A" : "B"
                ticker.price = Double(index)
                return ticker
            }
            try importer.save()
            return tickers.map(\.objectID)
        }
        await recorder.wait(for: 1)
        var request = FetchRequest<Ticker>()
        request.sortDescriptors = [FetchSort(key: "name"), FetchSort(key: "price", ascending: false)]
        let panel = try await ListPanel.make(stack, request, sectionNameKeyPath: "name")
        try await importer.perform {
            (try importer.existingObject(with: ids[0]) as! Ticker).name = "C"    // a new section
            (try importer.existingObject(with: ids[1]) as! Ticker).price = 10    // moves to the top of "A"
            for id in ids[3...] { (try importer.existingObject(with: id) as! Ticker).name = "A" }   // "B" empties
            try importer.save()
        }
        await recorder.wait(for: 2)
        let (sections, difference, failures) = await stack.mainContext.perform {
            (panel.controller.snapshot?.sections ?? [], panel.log.changes.last?.difference, panel.log.failures)
        }
        #expect(failures.isEmpty, "\(failures)")
        #expect(sections.map(\.name) == ["A", "C"])
        #expect(sections.first?.itemIdentifiers == [ids[1], ids[5], ids[4], ids[3], ids[2]])
        #expect(difference?.sectionChanges.map(\.type) == [.delete, .insert])
        let moved = Set(difference?.moves.map(\.objectID) ?? [])
        #expect(moved.isSuperset(of: [ids[0], ids[3], ids[4], ids[5]]))
    }

    @Test func resetOfTheMainContextFetchesTheListAgain() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let importer = stack.importerContext()
        try await importer.perform {
            for index in 0..<30 {
                let ticker = Ticker(context: importer)
                ticker.symbol = "T\(index)"
                ticker.price = Double(index)
            }
            try importer.save()
        }
        await recorder.wait(for: 1)
        let request = topTen()
        let panel = try await ListPanel.make(stack, request)
        _ = try await read(panel, stack, request)
        // The stack stops merging, an import changes the top, then main is reset.
        stack.mergesIncomingSavedObjects = false
        try await importer.perform {
            let ticker = Ticker(context: importer)
            ticker.symbol = "NEW"
            ticker.price = 1_000
            try importer.save()
        }
        await recorder.wait(for: 2)
        let before = await stack.mainContext.perform { panel.controller.fetchedObjectIDs ?? [] }
        await stack.mainContext.perform { stack.mainContext.reset() }
        let reading = try await read(panel, stack, request)
        expectAgreement(reading, listSize: 10)
        #expect(reading.ids != before)
        #expect(reading.prices.first == 1_000)
    }
}

/// Records a controller's changes and replays each difference on the snapshot
/// before it, collecting those that don't give the new snapshot.
final class ListChangeLog: FetchedResultsControllerDelegate {
    var changes: [FetchedResultsChange] = []
    var failures: [String] = []
    var previous = FetchedResultsSnapshot()
    private var order: [String] = []

    func controllerWillChangeContent(_ controller: FetchedResultsController<Ticker>) { order = ["will"] }
    func controller(_ controller: FetchedResultsController<Ticker>, didChangeSection name: String,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {
        if order.last == "object" { failures.append("a section change came after an object change") }
        order.append("section")
    }
    func controller(_ controller: FetchedResultsController<Ticker>, didChange objectID: ObjectID,
                    at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType, newIndexPath: FetchedIndexPath?) {
        order.append("object")
    }
    func controllerDidChangeContent(_ controller: FetchedResultsController<Ticker>) { order.append("did") }
    func controller(_ controller: FetchedResultsController<Ticker>, didChangeContentWith change: FetchedResultsChange) {
        if order.first != "will" || order.last != "did" { failures.append("callbacks out of order: \(order)") }
        if change.difference.replayed(on: previous) != change.snapshot {
            failures.append("difference \(change.difference) does not turn \(previous) into \(change.snapshot)")
        }
        previous = change.snapshot
        changes.append(change)
    }
}

/// SQL seen by a store trace, from whichever thread runs it.
final class StackStatementLog: Sendable {
    private let recorded = Mutex<[String]>([])
    func append(_ sql: String) { recorded.withLock { $0.append(sql) } }
    func reset() { recorded.withLock { $0.removeAll() } }
    var selects: [String] { recorded.withLock { $0 }.filter { $0.uppercased().hasPrefix("SELECT") } }
    var all: [String] { recorded.withLock { $0 } }
}
