import Foundation
import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite
import DataStackStores

/// Opening a store changes nothing until the file is known to be a store (or an
/// empty database), and several coordinators creating one store at the same
/// moment all end up on the same store.
@Suite struct StoreOpeningTests {
    // MARK: - A refused file is left byte for byte as it was

    /// The bytes of the file and of any sidecar file beside it.
    private func contents(of url: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: url.path + suffix) {
            files[suffix] = try Data(contentsOf: URL(fileURLWithPath: url.path + suffix))
        }
        return files
    }

    /// Adds a SQLite store at `url` (which must be refused as not a store) and
    /// checks that neither the file nor its sidecars changed.
    private func expectRefusedUnchanged(_ url: URL, options: StoreOptions = StoreOptions(),
                                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try contents(of: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let error = #expect(throws: PersistentStoreError.self, sourceLocation: sourceLocation) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        }
        #expect(error?.code == .notAStore, sourceLocation: sourceLocation)
        #expect(error?.message.contains("Z_METADATA") == true, sourceLocation: sourceLocation)
        #expect(try contents(of: url) == before, "the refused file and its sidecars are byte-identical", sourceLocation: sourceLocation)
    }

    /// A database of another program, in rollback-journal mode, with two tables and rows.
    private func foreignDatabase(in directory: TemporaryDirectory, journalMode: String = "delete") throws -> URL {
        let url = directory.file("other.sqlite")
        try Connection(path: url.path).execute("""
            PRAGMA journal_mode = \(journalMode);
            CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
            CREATE TABLE tags (name TEXT UNIQUE);
            INSERT INTO notes (body) VALUES ('keep me'), ('and me');
            INSERT INTO tags VALUES ('a'), ('b');
            """)
        return url
    }

    @Test func aForeignRollbackJournalDatabaseIsRefusedByteIdentical() throws {
        let directory = TemporaryDirectory()
        let url = try foreignDatabase(in: directory)
        try expectRefusedUnchanged(url)
        // Header bytes 18 and 19, the file format versions: 1 for a rollback journal, 2 for WAL.
        let header = try Data(contentsOf: url).prefix(20)
        #expect(Array(header.suffix(2)) == [1, 1], "the file was not switched to WAL")
    }

    @Test func aForeignDatabaseIsRefusedByteIdenticalWhateverThePragmasAsk() throws {
        let directory = TemporaryDirectory()
        let url = try foreignDatabase(in: directory)
        var options = StoreOptions()
        options.pragmas = [try .custom(name: "user_version", value: 7), try .custom(name: "auto_vacuum", value: 1)]   // both would write the header
        options.journalMode = .truncate
        try expectRefusedUnchanged(url, options: options)
    }

    @Test func aForeignWALDatabaseIsRefusedByteIdentical() throws {
        let directory = TemporaryDirectory()
        let url = try foreignDatabase(in: directory, journalMode: "wal")
        try expectRefusedUnchanged(url)
    }

    @Test func aForeignDatabaseOpenedReadOnlyIsRefusedByteIdentical() throws {
        let directory = TemporaryDirectory()
        let url = try foreignDatabase(in: directory)
        var options = StoreOptions()
        options.isReadOnly = true
        try expectRefusedUnchanged(url, options: options)
    }

    /// SQLite treats a 0-byte file as an empty database, and so does the store: it becomes a new store.
    @Test func aZeroByteFileBecomesANewStoreInWALMode() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("empty.sqlite")
        #expect(FileManager.default.createFile(atPath: url.path, contents: Data()))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        #expect(try RawStore.text(url, "SELECT Z_UUID FROM Z_METADATA") == store.identifier)
        #expect(try RawStore.text(url, "PRAGMA journal_mode") == "wal")
        #expect(try RawStore.int(url, "PRAGMA auto_vacuum") == 2)
    }

    // MARK: - Creating one store from several coordinators at once

    /// Opens a new store at `url` from `openers` threads released together, each
    /// with its own coordinator; returns each one's store identifier or error.
    private func openAtOnce(_ url: URL, openers: Int) -> [Result<String, any Error>] {
        let race = Race()
        let done = DispatchGroup()
        for _ in 0..<openers {
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
                race.ready.add(1, ordering: .sequentiallyConsistent)
                while race.ready.load(ordering: .sequentiallyConsistent) < openers {}   // all start together
                let result = Result { try coordinator.addPersistentStore(type: .sqlite, at: url).identifier }
                race.results.withLock { $0.append(result) }
            }
            thread.start()
        }
        done.wait()
        return race.results.withLock { $0 }
    }

    /// What the racing threads share.
    private final class Race: Sendable {
        let ready = Atomic<Int>(0)
        let results = Mutex<[Result<String, any Error>]>([])
    }

    @Test func coordinatorsCreatingTheSameNewStoreAtOnceAllOpenOneStore() throws {
        let directory = TemporaryDirectory()
        let entityCount = Int64(TestModel.make().entities.count)
        for round in 0..<50 {
            let url = directory.file("Race-\(round).sqlite")
            let results = openAtOnce(url, openers: 4)
            let identifiers = try results.map { try $0.get() }
            #expect(Set(identifiers).count == 1, "round \(round): every opener sees one store")
            #expect(try RawStore.int(url, "SELECT count(*) FROM Z_METADATA") == 1)
            #expect(try RawStore.text(url, "SELECT Z_UUID FROM Z_METADATA") == identifiers.first)
            #expect(try RawStore.int(url, "SELECT count(*) FROM Z_PRIMARYKEY") == entityCount)
            #expect(try RawStore.text(url, "PRAGMA integrity_check") == "ok")
        }
    }

    /// The same race between processes, which SQLite's file locks arbitrate the same way.
    @Test func processesCreatingTheSameNewStoreAtOnceAllOpenOneStore() async throws {
        let directory = TemporaryDirectory()
        for round in 0..<3 {
            let path = directory.file("Processes-\(round).sqlite").path
            // Every child waits for this moment, so that they open together once launched.
            let start = Date().timeIntervalSince1970 + 3
            await withTaskGroup { group in
                for _ in 0..<4 {
                    group.addTask {
                        await #expect(processExitsWith: .success) { [path = path as String, start = start as Double] in
                            // Behaviour under test: the processes start together; the shared
                            // wall-clock moment is the only barrier separate processes share here.
                            while Date().timeIntervalSince1970 < start { usleep(200) }
                            let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
                            try coordinator.addPersistentStore(type: .sqlite, at: URL(fileURLWithPath: path))
                        }
                    }
                }
            }
            let url = URL(fileURLWithPath: path)
            #expect(try RawStore.int(url, "SELECT count(*) FROM Z_METADATA") == 1)
            #expect(try RawStore.int(url, "SELECT count(*) FROM Z_PRIMARYKEY") == Int64(TestModel.make().entities.count))
            #expect(try RawStore.text(url, "PRAGMA integrity_check") == "ok")
        }
    }

    @Test func aStoreCreatedByAnotherCoordinatorMeanwhileIsOpenedAndUsable() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Shared.sqlite")
        let results = openAtOnce(url, openers: 3)
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        // Every coordinator that lost the race writes through the store the winner made.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            Company(context: context).symbol = "AFTER"
            try context.save()
        }
        #expect(try RawStore.texts(url, "SELECT ZSYMBOL FROM ZCOMPANY") == ["AFTER"])
    }
}
