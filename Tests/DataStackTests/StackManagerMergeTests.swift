import Foundation
import Testing
import DataStack

@Suite struct StackManagerMergeTests {
    @Test func importOfTenThousandTouchesOnlyTheTenObjectsMainShows() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 10_000)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        // Main shows ten tickers.
        let shown = Array(ids.prefix(10))
        let holder = ObjectHolder()
        let registered = try await main.perform {
            holder.objects = try shown.map { try main.existingObject(with: $0) }
            return main.registeredObjectCount
        }
        #expect(registered == 10)

        // An importer updates all 10,000.
        let importer = stack.importerContext()
        try await importer.perform {
            var request = FetchRequest<Ticker>()
            request.returnsObjectsAsFaults = false
            for ticker in try importer.fetch(request) { ticker.price += 1000 }
            try importer.save()
        }
        let merges = await recorder.wait(for: 2)
        let merge = try #require(merges.last)
        #expect(merge.save.updatedObjectIDs.count == 10_000)
        #expect(merge.refreshedObjectIDs == Set(shown))
        #expect(merge.removedObjectIDs.isEmpty)
        let (prices, count) = try await main.perform {
            (try shown.map { try (main.existingObject(with: $0) as! Ticker).price }, main.registeredObjectCount)
        }
        #expect(prices == (0..<10).map { Double($0) + 1000 })
        #expect(count == 10)
        withExtendedLifetime(holder) {}
    }

    /// A main context pinned to a query generation moves on with each merge:
    /// the merge's refreshed objects and the next fetch see the merged save.
    @Test func aPinnedMainContextMovesOnWithEachMerge() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        _ = try await importTickers(stack, count: 5)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        let count = { try await main.perform { try main.count(for: FetchRequest<Ticker>()) } }
        try await main.perform { try main.setQueryGenerationFrom(.current) }
        #expect(try await count() == 5)
        let pinned = await main.perform { main.queryGenerationToken }
        #expect(pinned != nil && pinned != .current)
        _ = try await importTickers(stack, count: 3, prefix: "U")
        await recorder.wait(for: 2)
        #expect(await main.perform { main.queryGenerationToken } == .current)
        #expect(try await count() == 8)
    }

    @Test func insertedObjectsAreReportedByIDOnly() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 50)
        let merge = try #require(await recorder.wait(for: 1).first)
        #expect(merge.save.insertedObjectIDs == Set(ids))
        #expect(merge.refreshedObjectIDs.isEmpty)
        let registered = await stack.mainContext.perform { stack.mainContext.registeredObjectCount }
        #expect(registered == 0)
    }

    @Test func deletesOfRegisteredObjectsRemoveThemFromMain() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let ids = try await importTickers(stack, count: 5)
        await recorder.wait(for: 1)
        let main = stack.mainContext
        let holder = ObjectHolder()
        try await main.perform { holder.objects = try ids.map { try main.existingObject(with: $0) } }
        let importer = stack.importerContext()
        try await importer.perform {
            importer.delete(try importer.existingObject(with: ids[0]))
            importer.delete(try importer.existingObject(with: ids[1]))
            try importer.save()
        }
        let merge = try #require(await recorder.wait(for: 2).last)
        #expect(merge.removedObjectIDs == [ids[0], ids[1]])
        let (registered, remaining) = try await main.perform {
            (main.registeredObject(for: ids[0]) == nil, try main.count(for: FetchRequest<Ticker>()))
        }
        #expect(registered)
        #expect(remaining == 3)
        withExtendedLifetime(holder) {}
    }

    @Test func mergeKeepsMainsUnsavedEditsAndTakesTheImportersOtherChanges() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let id = try await importTickers(stack, count: 1)[0]
        await recorder.wait(for: 1)
        let main = stack.mainContext
        try await main.perform {
            let ticker = try main.existingObject(with: id) as! Ticker
            ticker.name = "edited on main"
        }
        let importer = stack.importerContext()
        try await importer.perform {
            let ticker = try importer.existingObject(with: id) as! Ticker
            ticker.price = 42
            ticker.name = "from importer"
            try importer.save()
        }
        await recorder.wait(for: 2)
        let (name, price, hasChanges) = try await main.perform {
            let ticker = try main.existingObject(with: id) as! Ticker
            return (ticker.name, ticker.price, ticker.hasChanges)
        }
        #expect(name == "edited on main")
        #expect(price == 42)
        #expect(hasChanges)
        // Saving main now writes its edit over the importer's name.
        try await main.perform { try main.save() }
        let saved = try await importer.perform {
            importer.refreshAllObjects()
            return (try importer.existingObject(with: id) as! Ticker).name
        }
        #expect(saved == "edited on main")
    }

    @Test func conflictOnMainSaveResolvesByStoreTrump() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let id = try await importTickers(stack, count: 1)[0]
        await recorder.wait(for: 1)
        stack.mergesIncomingSavedObjects = false
        let main = stack.mainContext
        try await main.perform {
            let ticker = try main.existingObject(with: id) as! Ticker
            ticker.name = "main"
            ticker.price = 1
        }
        let importer = stack.importerContext()
        try await importer.perform {
            let ticker = try importer.existingObject(with: id) as! Ticker
            ticker.name = "importer"
            try importer.save()
        }
        await recorder.wait(for: 2)
        try await main.perform { try main.save() }
        let (name, price) = try await importer.perform {
            importer.refreshAllObjects()
            let ticker = try importer.existingObject(with: id) as! Ticker
            return (ticker.name, ticker.price)
        }
        // The store changed `name`: the store's value wins; `price` only main changed.
        #expect(name == "importer")
        #expect(price == 1)
    }

    @Test func withMergingOffTheStackPostsTheIDsAndTouchesNothing() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let id = try await importTickers(stack, count: 1)[0]
        await recorder.wait(for: 1)
        let main = stack.mainContext
        let holder = ObjectHolder()
        try await main.perform { holder.objects = [try main.existingObject(with: id)] }
        stack.mergesIncomingSavedObjects = false
        let importer = stack.importerContext()
        try await importer.perform {
            (try importer.existingObject(with: id) as! Ticker).price = 99
            try importer.save()
        }
        let merge = try #require(await recorder.wait(for: 2).last)
        #expect(!merge.merged)
        #expect(merge.save.updatedObjectIDs == [id])
        #expect(merge.refreshedObjectIDs.isEmpty)
        let price = try await main.perform { (try main.existingObject(with: id) as! Ticker).price }
        #expect(price == 0)
        withExtendedLifetime(holder) {}
    }

    @Test func savesOfMainAndItsChildrenNeverComeBackAsMerges() async throws {
        let (stack, directory) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let main = stack.mainContext
        try await main.perform {
            let ticker = Ticker(context: main)
            ticker.symbol = "MAIN"
            try main.save()
        }
        let creator = stack.creatorContext()
        try await creator.perform {
            let ticker = Ticker(context: creator)
            ticker.symbol = "CREATED"
            try creator.save()
        }
        // Another writer's save afterwards is merged after anything the saves
        // above would have brought back: if its merge is the only one, they brought none.
        try await mergeMarkerFromAnotherStack(recorder, directory: directory)
        #expect(recorder.all.count == 1)
    }

    @Test func eachImporterSaveIsMergedOnce() async throws {
        let (stack, directory) = try await makeStack()
        let recorder = MergeRecorder(stack)
        for round in 0..<5 { _ = try await importTickers(stack, count: 3, prefix: "R\(round)-") }
        let merges = await recorder.wait(for: 5)
        #expect(Set(merges.flatMap(\.save.insertedObjectIDs)).count == 15)
        // Another writer's save is merged after any second merge of the five would have.
        try await mergeMarkerFromAnotherStack(recorder, directory: directory)
        #expect(recorder.all.count == 6)
    }

    @Test func trackedChildContextsSeeMergedChanges() async throws {
        let (stack, _) = try await makeStack()
        let recorder = MergeRecorder(stack)
        let id = try await importTickers(stack, count: 1)[0]
        await recorder.wait(for: 1)
        let child = stack.newChildContext(concurrencyType: .privateQueue, tracksChanges: true)
        #expect(child.parent === stack.mainContext)
        let before = try await child.perform { (try child.existingObject(with: id) as! Ticker).price }
        #expect(before == 0)
        let childMerged = Signal.notification(ManagedObjectContext.objectsDidChangeNotification, from: child)
        let importer = stack.importerContext()
        try await importer.perform {
            (try importer.existingObject(with: id) as! Ticker).price = 7
            try importer.save()
        }
        await recorder.wait(for: 2)
        await childMerged.wait(for: "the merge reaching the tracked child")
        let after = try await child.perform { (try child.existingObject(with: id) as! Ticker).price }
        #expect(after == 7)
    }
}
