import Foundation
import Testing
@testable import DataStack

/// Where a stack that follows the store's history starts reading it: at the
/// store's last transaction when the store was there before, before the
/// first one when the stack created it — so that a viewer started on a new
/// store counts every save another process makes there, however soon after
/// the file appeared that process saved. (The race itself, a process saving
/// while the viewer still sets up, is `TickerImportTests`' view-only test:
/// two stacks of one process set up one after the other.)
@Suite struct StackHistoryBookmarkTests {
    /// The file's absence decides it, read before the store opens (the
    /// token read after opening could already count another process's save);
    /// a seeded store brings history of its own, which came before the stack.
    @Test func theStackCreatesTheStoreOnlyWhereNoFileIsAndNoSeedIsCopied() async throws {
        let directory = StackDirectory()
        #expect(StackManager.createsStore(at: directory.storeURL, options: .stackDefaults))
        var seeded = StoreOptions.stackDefaults
        seeded.seedDatabaseURL = directory.url.appendingPathComponent("Seed.sqlite")
        #expect(!StackManager.createsStore(at: directory.storeURL, options: seeded))
        #expect(!StackManager.createsStore(at: URL(string: "postgresql://app@/db")!, options: .stackDefaults))

        let stack = StackManager()
        try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        #expect(stack.lastMergedHistoryToken?.transactionNumber == 0)
        await stack.close()
        #expect(!StackManager.createsStore(at: directory.storeURL, options: .stackDefaults))
    }

    /// History saved before the stack opened an existing store is not merged:
    /// the main context fetches what it shows after setup.
    @Test func aStackOnAnExistingStoreStartsAtItsLastTransaction() async throws {
        let directory = StackDirectory()
        let first = StackManager()
        try await first.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        for round in 0..<3 { _ = try await importTickers(first, count: 5, prefix: "R\(round)-") }
        await first.close()

        let stack = StackManager()
        let recorder = MergeRecorder(stack)
        try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        let token = try #require(stack.lastMergedHistoryToken)
        #expect(token.transactionNumber == 3)
        // The read the setup makes once its observer is in place finds nothing after the bookmark.
        let other = StackManager()
        try await other.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        _ = try await importTickers(other, count: 2, prefix: "N")
        await recorder.wait(until: "the other stack's save") { $0.contains { $0.merge.save.insertedObjectIDs.count == 2 } }
        #expect(recorder.all.map(\.save.insertedObjectIDs.count) == [2], "only the save made after setup is merged")
        await stack.close()
        await other.close()
    }
}
