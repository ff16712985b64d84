import Foundation
import Testing
import DataStack
@_spi(DataStackInternal) import DataStackSupport

/// `StackManager.close()`: saves in progress finish, the write-ahead log is
/// folded into the store's file, and the stack takes no new work.
@Suite struct StackCloseTests {
    @Test func closeLeavesEverySaveInTheStoreFileAndAnEmptyLog() async throws {
        let (stack, directory) = try await makeStack()
        for round in 0..<5 { _ = try await importTickers(stack, count: 100, prefix: "R\(round)-") }
        #expect(StoreFileChecks.logSize(of: directory.storeURL) > 0, "before closing, the saves are in the log")

        await stack.close()
        #expect(StoreFileChecks.logSize(of: directory.storeURL) == 0)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZTICKER") == 500)
        #expect(stack.isClosed && !stack.isReady)
    }

    /// SQLite folds the log in by itself only when the last connection to the
    /// file closes; a viewer in another process keeps its own open.
    @Test func closeFoldsTheLogInWhileAnotherConnectionKeepsTheFileOpen() async throws {
        let (stack, directory) = try await makeStack()
        for round in 0..<5 { _ = try await importTickers(stack, count: 100, prefix: "R\(round)-") }
        var configuration = Connection.Configuration()
        configuration.isReadOnly = true
        let other = try Connection(path: directory.storeURL.path, configuration: configuration)

        await stack.close()
        #expect(StoreFileChecks.logSize(of: directory.storeURL) == 0)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZTICKER") == 500)
        withExtendedLifetime(other) {}
    }

    @Test func afterCloseSavesThrowAndTheStackRefusesNewWork() async throws {
        let (stack, directory) = try await makeStack()
        _ = try await importTickers(stack, count: 10)
        let importer = stack.importerContext()
        await stack.close()

        await #expect(throws: (any Error).self, "a save after close") {
            try await importer.perform {
                let ticker = Ticker(context: importer)
                ticker.symbol = "LATE"
                try importer.save()
            }
        }
        let main = stack.mainContext
        await #expect(throws: (any Error).self, "a fetch after close is an error, never an empty result") {
            try await main.perform { try main.count(for: FetchRequest<Ticker>()) }
        }
        let imported = await #expect(throws: StackError.self) {
            try await stack.performImport(["X"], chunkSize: 1) { symbol, context in
                Ticker(context: context).symbol = symbol
            }
        }
        #expect(imported?.code == .closed, "\(String(describing: imported))")
        let purge = #expect(throws: StackError.self) { try stack.purgeHistory(olderThan: .seconds(0)) }
        #expect(purge?.code == .closed)
        let reset = await #expect(throws: StackError.self) { try await stack.resetPersistentStores() }
        #expect(reset?.code == .closed)
        let setup = await #expect(throws: StackError.self) {
            try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        }
        #expect(setup?.code == .closed)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZTICKER") == 10, "nothing was written after close")
    }

    @Test func closingTwiceAtOnceAndAgainIsHarmless() async throws {
        let (stack, directory) = try await makeStack()
        _ = try await importTickers(stack, count: 20)
        async let first: Void = stack.close()
        async let second: Void = stack.close()
        _ = await (first, second)
        await stack.close()
        #expect(stack.isClosed)
        #expect(StoreFileChecks.logSize(of: directory.storeURL) == 0)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZTICKER") == 20)

        let neverSetUp = StackManager()
        await neverSetUp.close()
        #expect(neverSetUp.isClosed && !neverSetUp.isReady)
    }

    /// A close while an import runs: the chunk being saved commits, the next
    /// one is refused, and every chunk reported saved is in the main file.
    @Test func anImportRunningWhenTheStackClosesEndsAfterTheChunkItSaves() async throws {
        let (stack, directory) = try await makeStack()
        let reported = Locked(0)
        let firstChunk = Semaphore()
        let symbols = (0..<1_000_000).lazy.map { "S\($0)" }
        let importing = Task {
            try await stack.performImport(symbols, chunkSize: 200) { symbol, context in
                Ticker(context: context).symbol = symbol
            } progress: { progress in
                if reported.withLock({ count in defer { count = progress.processedInputs }; return count == 0 }) { firstChunk.signal() }
            }
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { firstChunk.wait(); continuation.resume() }
        }
        await stack.close()
        let ended = await importing.result
        #expect(throws: StackError.self) { try ended.get() }
        let saved = reported.withLock { $0 }
        #expect(saved > 0 && saved < 1_000_000)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZTICKER") == saved, "every chunk reported saved, and no other")
    }
}
