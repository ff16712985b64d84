import Foundation
import Testing
import DataStack

@Suite struct StackManagerSetupTests {
    @Test func setupBuildsTwoCoordinatorsOnOneWALFile() async throws {
        let (stack, directory) = try await makeStack()
        #expect(stack.isReady)
        #expect(stack.mainCoordinator !== stack.writerCoordinator)
        #expect(stack.mainCoordinator.persistentStores.first?.url?.path == directory.storeURL.path)
        #expect(stack.writerCoordinator.persistentStores.first?.url?.path == directory.storeURL.path)
        #expect(stack.mainCoordinator.persistentStores[0].identifier == stack.writerCoordinator.persistentStores[0].identifier)
        #expect(FileManager.default.fileExists(atPath: directory.storeURL.path + "-wal"))
        #expect(stack.storeURL == directory.storeURL)
    }

    @Test func contextsHaveTheirQueuesCoordinatorsAndPolicies() async throws {
        let (stack, _) = try await makeStack()
        let main = stack.mainContext
        #expect(main.concurrencyType == .mainQueue)
        #expect(main.mergePolicy == .mergeByPropertyStoreTrump)
        #expect(main.persistentStoreCoordinator === stack.mainCoordinator)

        let importer = stack.importerContext()
        #expect(importer.concurrencyType == .privateQueue)
        #expect(importer.mergePolicy == .mergeByPropertyObjectTrump)
        #expect(importer.persistentStoreCoordinator === stack.writerCoordinator)
        #expect(importer !== stack.importerContext())

        let temporary = stack.temporaryContext()
        #expect(temporary.parent === main)
        #expect(temporary.mergePolicy == .rollback)

        let creator = stack.creatorContext()
        #expect(creator.parent === main)
        #expect(creator.mergePolicy == .overwrite)
    }

    @Test func inMemoryStackUsesOneCoordinator() async throws {
        let stack = StackManager()
        try await stack.setup(model: StackTestModel.make(), storeType: .inMemory)
        #expect(stack.mainCoordinator === stack.writerCoordinator)
        #expect(stack.storeURL == nil)
        let importer = stack.importerContext()
        let recorder = MergeRecorder(stack)
        try await importer.perform {
            let ticker = Ticker(context: importer)
            ticker.symbol = "MEM"
            try importer.save()
        }
        let merges = await recorder.wait(for: 1)
        #expect(merges.count == 1)
        let count = try await stack.mainContext.perform { try stack.mainContext.count(for: FetchRequest<Ticker>()) }
        #expect(count == 1)
    }

    @Test func aStoreTypeThatIsNotSharedGetsOneCoordinatorAndItsResetTouchesNoFile() async throws {
        // A store of one's own at a URL that is not a file's: the stack must open it once (two
        // unshared stores would not see each other's saves), and a reset must not take the
        // URL's path for a local file.
        let scratch = StoreType(rawValue: "Scratch") { InMemoryStore(configuration: $0) }
        #expect(!scratch.isShared && StoreType.sqlite.isShared && !StoreType.inMemory.isShared)
        let directory = StackDirectory()
        let bystander = directory.url.appendingPathComponent("bystander")
        try Data("keep me".utf8).write(to: bystander)
        let url = try #require(URL(string: "scratch://server" + bystander.path))
        let stack = StackManager()
        try await stack.setup(model: StackTestModel.make(), storeURL: url, storeType: scratch)
        #expect(stack.mainCoordinator === stack.writerCoordinator)
        #expect(!stack.followsPersistentHistory, "one coordinator has no other writer's history to follow")
        try await stack.resetPersistentStores()
        #expect(FileManager.default.fileExists(atPath: bystander.path), "the reset removed a local file named by a non-file URL")
        #expect(stack.writerCoordinator.persistentStores.count == 1)
    }

    @Test func aURLOfAnUnregisteredSchemeIsASetupError() async throws {
        let stack = StackManager()
        let error = await #expect(throws: StackError.self) {
            try await stack.setup(model: StackTestModel.make(), storeURL: URL(string: "nosuchdb://host/app")!)
        }
        #expect(error?.code == .unknownStoreScheme)
        #expect(error?.message.contains("nosuchdb://") == true)
        #expect(!stack.isReady)
    }

    @Test func secondSetupThrowsAlreadySetUp() async throws {
        let (stack, directory) = try await makeStack()
        await #expect(throws: StackError.self) {
            try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
        }
    }

    @Test func setupAtALocationThatCannotBeCreatedThrowsWithThePath() async throws {
        let directory = StackDirectory()
        let blocker = directory.url.appendingPathComponent("file")
        try Data("not a folder".utf8).write(to: blocker)
        let url = blocker.appendingPathComponent("Stack.sqlite")
        let stack = StackManager()
        do {
            try await stack.setup(model: StackTestModel.make(), storeURL: url)
            Issue.record("setup should fail")
        } catch let error as PersistentStoreError {
            #expect(error.code == .cannotOpen)
            #expect(error.description.contains(url.path))
        }
        #expect(!stack.isReady)
    }

    @Test func setupOnANonSQLiteFileThrowsAndLeavesTheFileAlone() async throws {
        let directory = StackDirectory()
        let text = Data(String(repeating: "hello ", count: 700).utf8)
        try text.write(to: directory.storeURL)
        do {
            try await StackManager().setup(model: StackTestModel.make(), storeURL: directory.storeURL)
            Issue.record("setup should fail")
        } catch let error as PersistentStoreError {
            #expect(error.code == .notAStore)
            #expect(error.description.contains(directory.storeURL.path))
        }
        #expect(try Data(contentsOf: directory.storeURL) == text)
    }

    @Test func setupWithAModelThatDoesNotMatchTheStoreNamesWhatDiffers() async throws {
        let directory = StackDirectory()
        _ = try await makeStack(directory: directory)
        let other = ManagedObjectModel(entities: [
            EntityDescription(name: "Ticker", properties: [ // unbound: Ticker declares properties this model lacks
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "exchange", type: .string, isOptional: false),
            ]),
        ])
        do {
            // Without migration (the defaults would migrate this empty store).
            try await StackManager().setup(model: other, storeURL: directory.storeURL, options: StoreOptions())
            Issue.record("setup should fail")
        } catch let error as PersistentStoreError {
            #expect(error.code == .incompatibleModel)
            #expect(error.description.contains("exchange"))
        }
    }

    @Test func callbackSetupCallsBackOnTheMainQueue() async throws {
        let directory = StackDirectory()
        let stack = StackManager()
        let result: String = await withCheckedContinuation { continuation in
            stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL) { error in
                dispatchPrecondition(condition: .onQueue(.main))
                continuation.resume(returning: error.map { "\($0)" } ?? "ok")
            }
        }
        #expect(result == "ok")
        #expect(stack.isReady)
    }

    @Test func defaultStoreURLIsUnderTheDataHomeInAFolderNamedAfterTheExecutable() {
        let url = StackManager.defaultStoreURL
        let name = url.deletingPathExtension().lastPathComponent
        #expect(url.pathExtension == "sqlite")
        #expect(url.deletingLastPathComponent().lastPathComponent == name)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: url.deletingLastPathComponent().path, isDirectory: &isDirectory))
        #expect(isDirectory.boolValue)
    }

    @Test func defaultStackIsOneSharedInstance() {
        #expect(StackManager.default === StackManager.default)
    }

    @Test func modelNamedThatIsMissingThrowsModelNotFound() async throws {
        let stack = StackManager()
        do {
            try await stack.setup(modelNamed: "NoSuchModel", in: .main, storeURL: StackDirectory().storeURL)
            Issue.record("setup should fail")
        } catch let error as StackError {
            #expect(error.code == .modelNotFound)
            #expect(error.description.contains("NoSuchModel"))
        }
    }

    @Test("a stack used before setup traps, naming the call to make first")
    func aStackUsedBeforeSetupTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = StackManager().mainContext
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("StackManager used before setup; call setup(model:storeURL:) first"))
    }
}
