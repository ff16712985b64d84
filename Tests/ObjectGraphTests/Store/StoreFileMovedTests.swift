import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A save into a store file that was deleted or renamed while the store was
/// open throws, instead of writing to an inode nobody can open again.
@Suite struct StoreFileMovedTests {
    /// A stack with one saved company, and a pending change to save next.
    private func stackWithPendingChange() throws -> (TestStack, ManagedObjectContext) {
        let stack = try TestStack()
        try stack.seedCompanies(["FIRST"])
        let context = stack.newContext()
        context.performAndWait { Company(context: context).symbol = "SECOND" }
        return (stack, context)
    }

    private func expectSaveRefused(_ context: ManagedObjectContext, url: URL,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
        context.performAndWait {
            let error = #expect(throws: PersistentStoreError.self, sourceLocation: sourceLocation) { try context.save() }
            #expect(error?.code == .ioFailure, sourceLocation: sourceLocation)
            #expect(error?.message.contains("deleted or moved") == true, sourceLocation: sourceLocation)
            #expect(error.map { "\($0)" }?.contains(url.path) == true, "the message names the file", sourceLocation: sourceLocation)
            #expect(context.hasChanges, "the context keeps its changes", sourceLocation: sourceLocation)
            #expect(context.insertedObjects.count == 1, sourceLocation: sourceLocation)
        }
    }

    @Test func aSaveIntoADeletedStoreFileThrows() throws {
        let (stack, context) = try stackWithPendingChange()
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: stack.storeURL.path + suffix)   // -shm may not exist
        }
        expectSaveRefused(context, url: stack.storeURL)
        #expect(!FileManager.default.fileExists(atPath: stack.storeURL.path), "nothing re-created the file")
    }

    @Test func aSaveIntoARenamedStoreFileThrowsAndTheMovedFileKeepsItsData() throws {
        let (stack, context) = try stackWithPendingChange()
        let moved = stack.directory.file("Moved.sqlite")
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: stack.storeURL.path + suffix) {
            try FileManager.default.moveItem(atPath: stack.storeURL.path + suffix, toPath: moved.path + suffix)
        }
        expectSaveRefused(context, url: stack.storeURL)
        #expect(try RawStore.texts(moved, "SELECT ZSYMBOL FROM ZCOMPANY") == ["FIRST"])
    }

    @Test func aStoreFileReplacedByAnotherFileIsNotWrittenThrough() throws {
        let (stack, context) = try stackWithPendingChange()
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: stack.storeURL.path + suffix)   // -shm may not exist
        }
        try Data("a new file at the old path".utf8).write(to: stack.storeURL)
        expectSaveRefused(context, url: stack.storeURL)
        #expect(try Data(contentsOf: stack.storeURL) == Data("a new file at the old path".utf8))
    }

    @Test func savesInPlaceKeepWorking() throws {
        let (stack, context) = try stackWithPendingChange()
        try context.performAndWait { try context.save() }
        #expect(try RawStore.texts(stack.storeURL, "SELECT ZSYMBOL FROM ZCOMPANY ORDER BY ZSYMBOL") == ["FIRST", "SECOND"])
    }
}
