@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Lightweight migration

extension SQLiteStore {
    /// Whether the options ask for migration when the file does not match the
    /// model: `migratesAutomatically`, with `infersMappingModel` (lightweight
    /// migration) or a ``StoreOptions/stagedMigrationManager`` (staged migration,
    /// whose lightweight stages infer their mapping by definition).
    var migratesWhenIncompatible: Bool {
        let options = configuration.options
        return options.migratesAutomatically && (options.infersMappingModel || options.stagedMigrationManager != nil)
    }

    /// Migrates the store file to the model, in place of the file (Core Data's
    /// lightweight migration, or its staged migration when the options carry a
    /// ``StagedMigrationManager``; see ``StagedSQLiteMigration``). Called by
    /// ``loadMetadata()`` when the file does not match the model and the
    /// options allow it; no connection of this store may be open.
    ///
    /// The mapping is inferred first (``MappingModel``): a change it cannot
    /// infer throws before the file is touched. Then the file's write-ahead log
    /// is folded into it (which fails, with `.migrationFailed`, while another
    /// connection has the file open), the file is copied beside itself, the copy
    /// migrated in one transaction, and the copy renamed over the original. If
    /// anything fails, the copy is removed and the original keeps its data.
    ///
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` saying why.
    /// - Complexity: O(*n* log *n*), *n* = rows in the store; the file is copied once.
    func migrateStoreFile(because incompatibility: PersistentStoreError) throws {
        guard !isReadOnly else {
            throw PersistentStoreError(.migrationFailed, url: url,
                                       message: "the store needs migrating but is opened read-only: \(incompatibility.message)")
        }
        if let manager = configuration.options.stagedMigrationManager {
            try StagedSQLiteMigration(url: fileURL, configuration: configuration, manager: manager,
                                      incompatibility: incompatibility).run()
        } else {
            try SQLiteMigration(url: fileURL, configuration: configuration).run()
        }
    }
}

/// One lightweight migration of a store file.
struct SQLiteMigration {
    let url: URL
    let configuration: StoreConfiguration
    private var progress: (@Sendable (Double) -> Void)? { configuration.options.migrationProgress }

    init(url: URL, configuration: StoreConfiguration) {
        self.url = url
        self.configuration = configuration
    }

    func run() throws {
        progress?(0)
        let migration = try inferMappingAndLeaveWriteAheadLog()
        progress?(0.05)
        let copyURL = SQLiteStoreFile.temporarySibling(of: url, purpose: "migrating")
        // Nothing to report: the copy is ours, and a copy left behind is only litter beside the store.
        defer { try? SQLiteStoreFile.removeFiles(at: copyURL) }
        try migrateCopy(at: copyURL, migration: migration)
        progress?(0.95)
        try swapIn(copyURL)
        progress?(1)
    }

    /// Step 1: infers the mapping from the original, then folds its log into
    /// it, so the main file holds everything and nobody else has it open.
    private func inferMappingAndLeaveWriteAheadLog() throws -> SchemaMigration {
        do {
            let original = try SQLiteStoreFile.openExisting(url, readOnly: false, busyMode: configuration.options.busyMode)
            let migration = try Self.inferMapping(on: original, to: configuration.entities, url: url)
            guard SQLiteStoreFile.leaveWriteAheadLog(original) else {
                throw Self.failure("another connection has the store open; close it (remove the store from other coordinators) before migrating",
                                   underlying: nil, url: url)
            }
            return migration
        } catch let error as SQLiteError {
            throw Self.failure("reading the store failed", underlying: "\(error)", url: url)
        } catch let error as PersistentStoreError where error.code != .migrationFailed {
            throw Self.failure("the store could not be prepared: \(error.message)", underlying: error.underlyingDescription, url: url)
        }
    }

    /// Step 2: copies the original beside itself and migrates the copy in one transaction.
    private func migrateCopy(at copyURL: URL, migration: SchemaMigration) throws {
        do {
            try SQLiteStoreFile.copyFiles(from: url, to: copyURL)
        } catch {
            throw Self.failure("the store could not be copied", underlying: "\(error)", url: url)
        }
        do {
            let copy = try Self.openCopy(copyURL, busyMode: configuration.options.busyMode)
            try copy.inWriteTransaction {
                try Self.migrate(copy, migration, to: configuration.model,
                                 recordsHistory: configuration.options.persistentHistoryTracking) { fraction in
                    progress?(0.05 + 0.85 * fraction)
                }
            }
        } catch let error as SQLiteError {
            throw Self.failure(Self.reason(for: error), underlying: "\(error)", url: url)
        }
    }

    /// Step 3: renames the migrated copy over the original.
    private func swapIn(_ copyURL: URL) throws {
        do {
            try SQLiteStoreFile.swap(url, with: copyURL)
        } catch let error as PersistentStoreError {
            throw Self.failure(error.message, underlying: error.underlyingDescription, url: url)
        }
    }

    // MARK: - Steps shared with staged migration

    /// Reads the schema of the store on `connection` and infers the mapping to `entities`.
    ///
    /// - Parameter requiresValues: whether a required attribute or relationship
    ///   without a value (and without a default) in existing rows is refused;
    ///   a custom migration stage passes false, because its `didMigrate` fills them.
    static func inferMapping(on connection: Connection, to entities: [EntityDescription], url: URL,
                             requiresValues: Bool = true) throws -> SchemaMigration {
        try SchemaMigration(database: SQLiteMigratingDatabase(connection: connection),
                            metadata: try SQLiteStoreFile.readMetadata(connection, url: url),
                            entities: entities, url: url, requiresValues: requiresValues)
    }

    /// Opens a copy of a store for migrating it: never created, in rollback-journal
    /// mode, because the result must be one file to rename over the original
    /// (opening it also folds a copied `-wal` into it).
    static func openCopy(_ copyURL: URL, busyMode: BusyMode) throws -> Connection {
        var options = Connection.Configuration()
        options.createsIfMissing = false
        options.journalMode = .delete
        options.busyMode = busyMode
        return try Connection(path: copyURL.path, configuration: options)
    }

    /// What a SQLite failure while migrating a copy means, in words.
    static func reason(for error: SQLiteError) -> String {
        switch error.resultCode {
        case SQLiteError.SQLITE_CONSTRAINT: "rows of the store break a uniqueness constraint of the model"
        case SQLiteError.SQLITE_FULL: "the disk is full"
        default: "SQLite failed while migrating a copy of the store"
        }
    }

    static func failure(_ message: String, underlying: String?, url: URL) -> PersistentStoreError {
        SchemaMigration.failure(message, underlying: underlying, url: url)
    }

    // MARK: - The migration, inside one transaction on the copy

    /// Migrates the schema and rows on `connection` (inside the caller's
    /// transaction) to `model`, reporting the fraction done (0…1): the tables
    /// as every store migrates them (``SchemaMigration``), then what only a
    /// SQLite file keeps — full-text indexes, history, metadata, the model cache.
    static func migrate(_ connection: Connection, _ migration: SchemaMigration, to model: ManagedObjectModel,
                        recordsHistory: Bool, progress: (Double) -> Void) throws {
        try migration.migrateTables(of: SQLiteMigratingDatabase(connection: connection)) { progress(0.95 * $0) }
        // The tables were rebuilt, and their triggers with them: index every row again, in this transaction.
        try SQLiteStore.replaceSearchIndexes(with: migration.mapping.schema.searchIndexLayouts(), on: connection, rebuildingAll: true)
        try restartHistory(connection, migration: migration, recordsMigration: recordsHistory)
        try writeMetadata(connection, migration: migration, model: model)
        progress(1)
    }

    /// The metadata keeps the store UUID and takes the new model's hashes,
    /// digest and checksum; the compiled-model cache becomes the new model's,
    /// as Core Data's migrator leaves it.
    static func writeMetadata(_ connection: Connection, migration: SchemaMigration, model: ManagedObjectModel) throws {
        let metadata = migration.metadata(for: model, storeType: StoreType.sqlite.rawValue)
        let updateMetadata = try connection.prepare("UPDATE Z_METADATA SET Z_PLIST = ?")
        try updateMetadata.bind(try StoreMetadataCoding.encode(metadata), at: 1)
        try updateMetadata.execute()
        try SQLiteStoreFile.writeModelCache(model, connection, url: nil)
    }

    /// The history written before the migration is deleted, and with
    /// tracking the migration records a transaction of its own, as Core Data's
    /// schema migrator does (``SchemaMigration/historyAuthor``, no changes).
    ///
    /// Old `ACHANGE` rows name entities by their old `Z_ENT` numbers and
    /// properties by their old `ZCOLUMNS` bits, which the new model numbers
    /// differently. The transaction numbers continue from where they were.
    static func restartHistory(_ connection: Connection, migration: SchemaMigration, recordsMigration: Bool) throws {
        guard try connection.tableExists("ATRANSACTION") else { return }
        guard try connection.tableExists("ATRANSACTIONSTRING") else {
            // Core Data's older layout (names inline), read here but not written: with its
            // history gone nothing is left to read, and the next open with tracking makes
            // the layout saves are recorded in (numbers go on from Z_MAX).
            try connection.execute("DROP TABLE ACHANGE; DROP TABLE ATRANSACTION")
            return
        }
        try connection.execute("DELETE FROM ACHANGE; DELETE FROM ATRANSACTION; DELETE FROM ATRANSACTIONSTRING")
        guard recordsMigration else { return }
        _ = try HistoryLayout.insertTransaction(author: migration.historyAuthor, contextName: nil, connection: connection, url: nil)
    }
}
