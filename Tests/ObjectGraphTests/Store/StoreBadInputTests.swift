import Foundation
import ObjectGraph
import Testing
import DataStackSQLite
import DataStackStores

/// Bad locations, bad files and mismatched models: each a thrown
/// `PersistentStoreError` that says what and where, and nothing on disk lost.
@Suite struct StoreBadInputTests {
    /// Adds a SQLite store at `url` and returns the error it must throw.
    private func addError(at url: URL?, model: ManagedObjectModel = TestModel.make(),
                          options: StoreOptions = StoreOptions()) -> PersistentStoreError? {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let error = #expect(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        }
        #expect(coordinator.persistentStores.isEmpty)
        return error
    }

    private func expect(_ error: PersistentStoreError?, _ code: PersistentStoreError.Code, at url: URL,
                        sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(error?.code == code, sourceLocation: sourceLocation)
        #expect(error?.url?.path == url.path, sourceLocation: sourceLocation)
        #expect(error.map { "\($0)" }?.contains(url.path) == true, "the message names the file", sourceLocation: sourceLocation)
    }

    // MARK: - Files that are not stores

    @Test(arguments: ["not a database", String(repeating: "plain text, not SQLite\n", count: 400)])
    func aTextFileIsNotAStore(text: String) throws {
        let directory = TemporaryDirectory()
        let url = directory.file("notes.txt")
        try Data(text.utf8).write(to: url)
        expect(addError(at: url), .notAStore, at: url)
        #expect(try Data(contentsOf: url) == Data(text.utf8), "the file is left as it was")
        #expect(!FileManager.default.fileExists(atPath: url.path + "-wal"))
    }

    @Test func aCorruptSQLiteFileIsNotAStore() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("corrupt.sqlite")
        var bytes = Data("SQLite format 3\0".utf8)
        bytes.append(contentsOf: (0..<4080).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try bytes.write(to: url)
        expect(addError(at: url), .notAStore, at: url)
        #expect(try Data(contentsOf: url) == bytes)
    }

    @Test(arguments: ["X'00FF00FF'", "NULL", "X''", "'text'"])
    func damagedMetadataIsAnErrorNotEmptyMetadata(plist: String) throws {
        let stack = try TestStack()
        for store in stack.coordinator.persistentStores { try stack.coordinator.remove(store) }
        try RawStore.open(stack.storeURL).execute("UPDATE Z_METADATA SET Z_PLIST = \(plist)")
        let error = addError(at: stack.storeURL)
        expect(error, .notAStore, at: stack.storeURL)
        #expect(error?.message.contains("Z_METADATA.Z_PLIST") == true)
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(at: stack.storeURL)
        }
    }

    @Test func aSQLiteDatabaseThatIsNotACoreDataStoreIsNotAStore() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("other.sqlite")
        try Connection(path: url.path).execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')")
        let error = addError(at: url)
        expect(error, .notAStore, at: url)
        #expect(error?.message.contains("Z_METADATA") == true)
        #expect(try RawStore.text(url, "SELECT body FROM notes") == "keep me")
        #expect(try RawStore.texts(url, "SELECT name FROM sqlite_master WHERE type = 'table'") == ["notes"])
    }

    @Test func aMissingDirectoryCannotBeOpened() throws {
        let directory = TemporaryDirectory()
        let url = directory.url.appendingPathComponent("missing/deeper/Store.sqlite")
        expect(addError(at: url), .cannotOpen, at: url)
        #expect(!FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("missing").path))
    }

    @Test func aLocationInsideAFileCannotBeOpened() throws {
        let directory = TemporaryDirectory()
        let file = directory.file("plain.txt")
        try Data("x".utf8).write(to: file)
        let url = file.appendingPathComponent("Store.sqlite")
        expect(addError(at: url), .cannotOpen, at: url)
        #expect(try Data(contentsOf: file) == Data("x".utf8))
    }

    @Test(.enabled(if: geteuid() != 0, "root writes anywhere"))
    func aReadOnlyDirectoryCannotBeWritten() throws {
        let directory = TemporaryDirectory()
        let locked = directory.file("locked")
        try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: locked.path)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: locked.path) }
        let url = locked.appendingPathComponent("Store.sqlite")
        let error = addError(at: url)
        #expect(error?.code == .cannotOpen || error?.code == .readOnly)
        #expect(error?.url?.path == url.path)
    }

    @Test func aSQLiteStoreWithoutALocationThrowsMissingLocation() throws {
        let error = addError(at: nil)
        #expect(error?.code == .missingLocation)
        #expect(error?.url == nil)
        #expect(error.map { "\($0)" }?.contains("file URL") == true)

        let web = try #require(URL(string: "https://example.com/Store.sqlite"))
        let remote = addError(at: web)
        #expect(remote?.code == .missingLocation)
        #expect(remote?.url == web)
    }

    // MARK: - Models that do not match

    @Test func aModelWithAnExtraEntityIsIncompatible() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = TestModel.make()
        model.entities.append(EntityDescription(name: "Sector", properties: [AttributeDescription(name: "title", type: .string)]))
        let error = addError(at: url, model: model)
        expect(error, .incompatibleModel, at: url)
        #expect(error?.message.contains("Sector") == true)
        try expectStoreIntact(at: url)
    }

    @Test func aModelWithARequiredAttributeTheStoreLacksIsIncompatible() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = TestModel.make()
        try #require(model.entitiesByName["Company"]).properties.append(
            AttributeDescription(name: "ticker", type: .string, isOptional: false, defaultValue: .string("")))
        let error = addError(at: url, model: model)
        expect(error, .incompatibleModel, at: url)
        #expect(error?.message.contains("Company.ticker") == true)
        #expect(error?.message.contains("ZTICKER") == true)
        try expectStoreIntact(at: url)
    }

    @Test func aModelWithARenamedEntityIsIncompatible() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let model = TestModel.make()
        try #require(model.entitiesByName["StockUpdate"]).name = "Quote"
        try #require(model.entitiesByName["Company"]).relationshipsByName["updates"]?.destinationEntityName = "Quote"
        let error = addError(at: url, model: model)
        expect(error, .incompatibleModel, at: url)
        #expect(error?.message.contains("Quote") == true)
        try expectStoreIntact(at: url)
    }

    // MARK: - Read-only stores

    @Test func aReadOnlyStoreReadsButRefusesToSaveAndLeavesTheFileAlone() throws {
        let directory = TemporaryDirectory()
        let url = try makeStoreWithOneSavedCompany(in: directory)
        let before = try Data(contentsOf: url)

        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        #expect(store.isReadOnly)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let company = try #require(try context.fetch(FetchRequest<Company>()).first)
            #expect(company.symbol == "SAVED")
            company.symbol = "CHANGED"
            Company(context: context).symbol = "NEW"
            let error = #expect(throws: PersistentStoreError.self) { try context.save() }
            #expect(error?.code == .readOnly)
            #expect(error?.url?.path == url.path)
            #expect(context.hasChanges)
            #expect(company.symbol == "CHANGED")
            #expect(company.isUpdated)
        }
        #expect(throws: PersistentStoreError.self) { try coordinator.setMetadata(["key": "value"], for: store) }
        #expect(try Data(contentsOf: url) == before)
        #expect(try RawStore.texts(url, "SELECT ZSYMBOL || ':' || Z_OPT FROM ZCOMPANY") == ["SAVED:1"])
    }

    @Test func aReadOnlyStoreWhereNoFileExistsThrowsAndCreatesNothing() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Nothing.sqlite")
        var options = StoreOptions()
        options.isReadOnly = true
        let error = addError(at: url, options: options)
        #expect(error?.code == .cannotOpen || error?.code == .readOnly)
        #expect(error?.url?.path == url.path)
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
    // MARK: - Rows the model does not describe

    /// A row whose `Z_ENT` no entity of the model has (a store written by
    /// another model, or damaged) is an error naming the row, for every kind
    /// of read: never a row left out of a fetch, a count that disagrees with
    /// the objects, or a relationship that lost a member.
    @Test func aRowOfAnUnknownEntityNumberIsAnErrorNotAMissingRow() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            for price in [1.0, 2.0, 3.0] {
                let update = StockUpdate(context: context)
                update.price = price
                update.company = company
            }
            try context.save()
        }
        try RawStore.open(stack.storeURL).execute("UPDATE ZSTOCKUPDATE SET Z_ENT = 99 WHERE ZPRICE = 2")
        // A new coordinator, so that nothing is cached.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.model)
        try coordinator.addPersistentStore(type: .sqlite, at: stack.storeURL)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            func expectUnknownEntity(_ what: Comment, _ body: () throws -> Void) {
                let error = #expect(throws: PersistentStoreError.self, what) { try body() }
                #expect(error?.code == .incompatibleModel, what)
                #expect(error?.url?.path == stack.storeURL.path, what)
                #expect(error?.message.contains("99") == true, "the message names the entity number: \(String(describing: error))")
            }
            expectUnknownEntity("objects") { _ = try reader.fetch(FetchRequest<StockUpdate>()) }
            expectUnknownEntity("faults") {
                var request = FetchRequest<StockUpdate>()
                request.includesPropertyValues = false
                _ = try reader.fetch(request)
            }
            expectUnknownEntity("object IDs") {
                var request = FetchRequest<ObjectID>(entityName: "StockUpdate")
                request.resultType = .managedObjectID
                _ = try reader.fetch(request)
            }
            let company = try #require(try reader.fetch(FetchRequest<Company>()).first)
            let error = #expect(throws: (any Error).self, "the to-many that holds the row") { _ = try company.value(forKey: "updates") }
            #expect("\(String(describing: error))".contains("99"))
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT COUNT(*) FROM ZSTOCKUPDATE") == 3, "nothing was deleted")
    }
}
