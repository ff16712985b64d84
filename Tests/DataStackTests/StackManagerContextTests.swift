import Foundation
import Testing
import DataStack
import Synchronization

@Suite struct StackManagerContextTests {
    private func countOnDisk(_ stack: StackManager) async throws -> Int {
        let importer = stack.importerContext()
        return try await importer.perform { try importer.count(for: FetchRequest<Ticker>()) }
    }

    @Test func temporaryContextSaveThrowsReadOnlyAndReachesNothing() async throws {
        let (stack, _) = try await makeStack()
        let temporary = stack.temporaryContext()
        let error = await temporary.perform { () -> (any Error)? in
            let ticker = Ticker(context: temporary)
            ticker.symbol = "SCRATCH"
            do { try temporary.save(); return nil } catch { return error }
        }
        #expect((error as? ObjectGraphError)?.code == .readOnly)
        let mainCount = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<Ticker>()) }
        #expect(mainCount == 0)
        #expect(try await countOnDisk(stack) == 0)
        let stillThere = await temporary.perform { temporary.insertedObjects.count }
        #expect(stillThere == 1)
    }

    @Test func creatorContextSaveReachesMainAndDiskInOneCall() async throws {
        let (stack, _) = try await makeStack()
        let creator = stack.creatorContext()
        try await creator.perform {
            let ticker = Ticker(context: creator)
            ticker.symbol = "NEW"
            try creator.save()
        }
        #expect(try await countOnDisk(stack) == 1)
        let (mainHasChanges, mainCount) = try await stack.mainContext.perform {
            (stack.mainContext.hasChanges, try stack.mainContext.count(for: FetchRequest<Ticker>()))
        }
        #expect(!mainHasChanges)
        #expect(mainCount == 1)
    }

    @Test func readOnlyMainContextThrowsOnSaveAndKeepsItsChanges() async throws {
        let (stack, _) = try await makeStack()
        stack.isMainContextReadOnly = true
        let main = stack.mainContext
        let (failed, hasChanges) = await main.perform { () -> (Bool, Bool) in
            let ticker = Ticker(context: main)
            ticker.symbol = "RO"
            do { try main.save(); return (false, main.hasChanges) } catch { return (true, main.hasChanges) }
        }
        #expect(failed)
        #expect(hasChanges)
        #expect(try await countOnDisk(stack) == 0)
        stack.isMainContextReadOnly = false
        try await main.perform { try main.save() }
        #expect(try await countOnDisk(stack) == 1)
    }

    @Test func seedDatabaseIsCopiedWhenTheStoreDoesNotExist() async throws {
        // Build a seed with one ticker.
        let seedDirectory = StackDirectory()
        let (seedStack, _) = try await makeStack(directory: seedDirectory)
        let importer = seedStack.importerContext()
        try await importer.perform {
            let ticker = Ticker(context: importer)
            ticker.symbol = "SEED"
            try importer.save()
        }
        let (stack, directory) = try await makeStack(seed: seedDirectory.storeURL)
        #expect(FileManager.default.fileExists(atPath: directory.storeURL.path))
        #expect(try await countOnDisk(stack) == 1)

        // Reset removes the files and seeds again.
        let extra = stack.importerContext()
        try await extra.perform {
            let ticker = Ticker(context: extra)
            ticker.symbol = "EXTRA"
            try extra.save()
        }
        #expect(try await countOnDisk(stack) == 2)
        try await stack.resetPersistentStores()
        #expect(try await countOnDisk(stack) == 1)
        let mainCount = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<Ticker>()) }
        #expect(mainCount == 1)
    }

    @Test func resetPersistentStoresEmptiesTheStoreAndResetsMain() async throws {
        let (stack, directory) = try await makeStack()
        let importer = stack.importerContext()
        let id = try await importer.perform {
            let ticker = Ticker(context: importer)
            ticker.symbol = "GONE"
            try importer.save()
            return ticker.objectID
        }
        let main = stack.mainContext
        try await main.perform { _ = try main.existingObject(with: id) }
        let oldIdentifier = stack.writerCoordinator.persistentStores[0].identifier
        try await stack.resetPersistentStores()
        #expect(await main.perform { main.registeredObjectCount } == 0)
        #expect(try await countOnDisk(stack) == 0)
        #expect(stack.writerCoordinator.persistentStores[0].identifier != oldIdentifier)
        #expect(stack.mainCoordinator.persistentStores[0].identifier == stack.writerCoordinator.persistentStores[0].identifier)
        #expect(FileManager.default.fileExists(atPath: directory.storeURL.path))
    }

    @Test func importLoopSavesInChunksReportsProgressAndKeepsContextsSmall() async throws {
        let (stack, _) = try await makeStack()
        let log = ProgressLog()
        let result = try await stack.performImport(0..<2_500, chunkSize: 1_000, { index, context in
            let ticker = Ticker(context: context)
            ticker.symbol = "I\(index)"
            // Each chunk runs on a fresh context that holds at most one chunk.
            precondition(context.registeredObjectCount <= 1_000)
        }, progress: { log.append($0) })
        #expect(result.processedInputs == 2_500)
        #expect(result.savedChunks == 3)
        #expect(result.insertedObjects == 2_500)
        #expect(log.values.map(\.processedInputs) == [1_000, 2_000, 2_500])
        #expect(try await countOnDisk(stack) == 2_500)
    }

    @Test func cancelledImportStopsAfterASavedChunkAndLosesNothingReported() async throws {
        let (stack, _) = try await makeStack()
        let log = ProgressLog()
        let thirdChunkSaved = Signal()
        let task = Task {
            try await stack.performImport(0..<1_000_000, chunkSize: 100, { index, context in
                let ticker = Ticker(context: context)
                ticker.symbol = "C\(index)"
            }, progress: {
                log.append($0)
                if log.values.count >= 3 { thirdChunkSaved.fire() }
            })
        }
        await thirdChunkSaved.wait(for: "the import's third saved chunk")
        task.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        let reported = log.values.last?.processedInputs ?? 0
        let onDisk = try await countOnDisk(stack)
        #expect(onDisk >= reported)
        #expect(onDisk % 100 == 0)
        #expect(onDisk < 1_000_000)
    }

    @Test func importErrorStopsTheLoopWithEarlierChunksSaved() async throws {
        struct Bad: Error {}
        let (stack, _) = try await makeStack()
        await #expect(throws: Bad.self) {
            try await stack.performImport(0..<500, chunkSize: 100, { index, context in
                if index == 250 { throw Bad() }
                let ticker = Ticker(context: context)
                ticker.symbol = "E\(index)"
            })
        }
        #expect(try await countOnDisk(stack) == 200)
    }
}

/// Progress values reported from an import, in order.
final class ProgressLog: Sendable {
    private let storage = Mutex<[ImportProgress]>([])
    func append(_ progress: ImportProgress) { storage.withLock { $0.append(progress) } }
    var values: [ImportProgress] { storage.withLock { $0 } }
}

/// A creator context under a read-only main context refuses before pushing
/// anything: the changes stay in the creator, none get stranded in main.
@Suite struct CreatorUnderReadOnlyMainTests {
    /// Inserts a ticker in `context` and saves; returns the save's error and whether the context and main have changes.
    private func insertAndSave(_ context: ManagedObjectContext, in stack: StackManager) async -> (error: (any Error)?, creatorHasChanges: Bool, mainHasChanges: Bool) {
        let outcome = await context.perform { () -> ((any Error)?, Bool) in
            let ticker = Ticker(context: context)
            ticker.symbol = "NEW"
            do { try context.save(); return (nil, context.hasChanges) } catch { return (error, context.hasChanges) }
        }
        let main = stack.mainContext
        return (outcome.0, outcome.1, await main.perform { main.hasChanges })
    }

    private func countOnDisk(_ stack: StackManager) async throws -> Int {
        let importer = stack.importerContext()
        return try await importer.perform { try importer.count(for: FetchRequest<Ticker>()) }
    }

    private func expectRefused(_ result: (error: (any Error)?, creatorHasChanges: Bool, mainHasChanges: Bool), _ stack: StackManager,
                               sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let error = try #require(result.error as? ObjectGraphError, "\(String(describing: result.error))", sourceLocation: sourceLocation)
        #expect(error == .readOnly("context main (a parent of creator)"), sourceLocation: sourceLocation)
        #expect(result.creatorHasChanges, sourceLocation: sourceLocation)
        #expect(!result.mainHasChanges, sourceLocation: sourceLocation)
        #expect(try await countOnDisk(stack) == 0, sourceLocation: sourceLocation)
    }

    @Test func aCreatorMadeWhileMainIsReadOnlyRefusesAndKeepsItsChanges() async throws {
        let (stack, _) = try await makeStack()
        stack.isMainContextReadOnly = true
        let creator = stack.creatorContext()
        try await expectRefused(await insertAndSave(creator, in: stack), stack)
    }

    @Test func aCreatorFollowsMainBecomingReadOnlyAndWritableAgain() async throws {
        let (stack, _) = try await makeStack()
        let creator = stack.creatorContext()
        stack.isMainContextReadOnly = true
        try await expectRefused(await insertAndSave(creator, in: stack), stack)

        stack.isMainContextReadOnly = false
        try await creator.perform { try creator.save() }
        #expect(try await countOnDisk(stack) == 1)
        let (creatorHasChanges, mainHasChanges) = await creator.perform { (creator.hasChanges, stack.mainContext.hasChanges) }
        #expect(!creatorHasChanges && !mainHasChanges)
    }

    @Test func aReadOnlyMainStillLetsOtherChildrenSaveIntoIt() async throws {
        // Only creators save on to disk; a plain child's save into main is not refused.
        let (stack, _) = try await makeStack()
        stack.isMainContextReadOnly = true
        let child = stack.newChildContext(concurrencyType: .mainQueue, tracksChanges: false)
        let result = await insertAndSave(child, in: stack)
        #expect(result.error == nil)
        #expect(result.mainHasChanges)
    }
}
