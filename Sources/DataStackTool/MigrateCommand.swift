import Foundation
import DataStack

/// `datastack migrate FILE --model PATH`: migrates the store in place to the
/// model at PATH with a lightweight migration (the store's own migration:
/// the mapping is inferred first, then a copy is migrated in one transaction
/// and renamed over the file, so a failure leaves the store as it was).
///
/// The store is looked at read-only first, so that a store with nothing to
/// migrate, or one that cannot be migrated safely, is left byte for byte as
/// it was: a store that already fits the model is reported and not opened for
/// writing (a writable open would set the store's journal mode, turning a
/// rollback-journal file into a WAL one), and a damaged model cache
/// (`Z_MODELCACHE`) is an error (65), as `inspect` reports it. A migration
/// keeps the file's journal mode: it changes the schema, nothing else.
///
/// Progress goes to standard error: a bar redrawn in place when it is a
/// terminal, otherwise a line per step (see ``ProgressReporter``).
struct MigrateCommand: ToolCommand {
    let file: URL
    let modelPath: String

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: [], options: ["--model"])
        file = storeURL(try parsed.file())
        guard let modelPath = parsed.values["--model"] else {
            throw ToolError.usage("migrate needs --model PATH, the model to migrate the store to")
        }
        self.modelPath = modelPath
    }

    func run() throws {
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw ToolError(.noInput, "\(file.path): no store file exists at this location")
        }
        let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: modelPath))
        try checkModelCache()
        if try fitsWithoutMigrating(model) {
            Output.standard.write("\(file.path) already fits \(modelPath); nothing to migrate")
            return
        }
        let reporter = ProgressReporter(drawsBar: Output.standardErrorIsTerminal)
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        options.journalMode = try journalMode()
        options.migrationProgress = { reporter.report($0) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store: any PersistentStore
        do {
            defer { reporter.finish() }
            store = try coordinator.addPersistentStore(type: .sqlite, at: file, options: options)
        }
        try coordinator.remove(store)
        Output.standard.write("migrated \(file.path) to \(modelPath)")
    }

    /// Throws when the store caches a model that does not load: a damaged
    /// `Z_MODELCACHE` is reported before anything is written, as `inspect`
    /// reports it, rather than left for the next reader to find (or replaced
    /// by a migration that would hide the damage). A store that caches no model
    /// passes: Core Data before 2012 wrote none.
    private func checkModelCache() throws {
        do {
            _ = try CompiledModelLoader.loadModel(cachedInStoreAt: file)
        } catch let error as ModelLoadingError where error.code == .notAModel {
            return
        }
    }

    /// Whether the store opens with `model` as it is: checked on a read-only
    /// open, which writes nothing to the file.
    private func fitsWithoutMigrating(_ model: ManagedObjectModel) throws -> Bool {
        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        do {
            let store = try coordinator.addPersistentStore(type: .sqlite, at: file, options: options)
            try coordinator.remove(store)
            return true
        } catch let error as PersistentStoreError where error.code == .incompatibleModel {
            return false
        }
    }

    /// The file's journal mode, from its header (byte 18 is 2 in WAL mode, 1
    /// with a rollback journal), so that the migrated store keeps it.
    /// SQLite: <https://sqlite.org/fileformat2.html#the_database_header>
    private func journalMode() throws -> SQLiteJournalMode {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: file)
        } catch {
            throw ToolError(.noInput, "\(file.path): the store file cannot be read: \(error)")
        }
        defer { try? handle.close() }   // read-only: closing can lose nothing
        let header = try handle.read(upToCount: 20) ?? Data()
        return header.count == 20 && header[18] == 2 ? .wal : .delete
    }
}
