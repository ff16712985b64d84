import DataStack
import DataStackSync
import Foundation
import Testing

/// `datastack sync-status`: what a replica's store says about its sync, read
/// without opening the store.
@Suite struct SyncStatusCommandTests {
    static func model() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: "Note", properties: [AttributeDescription(name: "text", type: .string)]),
        ])
    }

    /// A replica that pushed two notes and has a third waiting.
    static func replica(in workspace: ToolWorkspace) async throws -> (store: URL, replica: UUID) {
        let store = workspace.url.appendingPathComponent("Replica.sqlite")
        let stack = StackManager()
        try await stack.setup(model: model(), storeURL: store)
        let hub = InMemorySyncHub()
        let engine = try SyncEngine(stack: stack, options: SyncOptions(hub: hub))
        func save(_ texts: [String]) throws {
            let context = stack.importerContext()
            try context.performAndWait {
                for text in texts {
                    let note = ManagedObject(entity: context.persistentStoreCoordinator!.managedObjectModel.entitiesByName["Note"]!, insertInto: context)
                    try note.setValue(text, forKey: "text")
                }
                try context.save()
            }
        }
        try save(["one", "two"])
        try engine.syncNow()
        try save(["three"])
        hub.isReachable = false
        #expect(throws: SyncError.self) { try engine.syncNow() }   // scanned, not pushed
        await stack.close()
        return (store, engine.replica)
    }

    @Test func aReplicaSaysWhatItPushedAndWhatWaits() async throws {
        let workspace = try ToolWorkspace()
        let (store, replica) = try await Self.replica(in: workspace)
        let result = try Tool.run(["sync-status", store.path])
        #expect(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains(replica.uuidString), "\(result.output)")
        #expect(result.output.contains("3 recorded, 1 waiting to be pushed"), "\(result.output)")
        #expect(result.output.contains("hub sequence 2"), "\(result.output)")

        let json = try Tool.run(["sync-status", store.path, "--json"])
        #expect(json.status == 0, "\(json.errorOutput)")
        let summary = try JSONDecoder().decode(SyncReplicaSummary.self, from: Data(json.output.utf8))
        #expect(summary.replica == replica)
        #expect(summary.pendingChanges == 1 && summary.recordedChanges == 3 && summary.objects == 3 && summary.pulledSequence == 2)
    }

    @Test func aStoreThatNeverSyncedIsNotAReplica() async throws {
        let workspace = try ToolWorkspace()
        let store = workspace.url.appendingPathComponent("Plain.sqlite")
        let stack = StackManager()
        try await stack.setup(model: Self.model(), storeURL: store)
        await stack.close()
        let result = try Tool.run(["sync-status", store.path])
        #expect(result.status == 65)
        #expect(result.errorOutput.contains("not a replica"), "\(result.errorOutput)")
    }

    @Test func aMissingFileExits66AndAFileThatIsNoDatabase65() throws {
        let workspace = try ToolWorkspace()
        let missing = try Tool.run(["sync-status", workspace.url.appendingPathComponent("none.sqlite").path])
        #expect(missing.status == 66)
        #expect(missing.errorOutput.contains("none.sqlite"))
        let garbage = workspace.url.appendingPathComponent("garbage.sqlite")
        try Data("not a database at all, but long enough to look at".utf8).write(to: garbage)
        let result = try Tool.run(["sync-status", garbage.path])
        #expect(result.status == 65, "\(result.errorOutput)")
        #expect(result.errorOutput.contains("garbage.sqlite"))
    }
}
