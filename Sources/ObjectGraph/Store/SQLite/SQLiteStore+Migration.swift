import Foundation

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
        let (snapshot, mapping) = try inferMappingAndLeaveWriteAheadLog()
        progress?(0.05)
        let copyURL = SQLiteStoreFile.temporarySibling(of: url, purpose: "migrating")
        // Nothing to report: the copy is ours, and a copy left behind is only litter beside the store.
        defer { try? SQLiteStoreFile.removeFiles(at: copyURL) }
        try migrateCopy(at: copyURL, snapshot: snapshot, mapping: mapping)
        progress?(0.95)
        try swapIn(copyURL)
        progress?(1)
    }

    /// Step 1: infers the mapping from the original, then folds its log into
    /// it, so the main file holds everything and nobody else has it open.
    private func inferMappingAndLeaveWriteAheadLog() throws -> (StoreSchemaSnapshot, MappingModel) {
        do {
            let original = try SQLiteStoreFile.openExisting(url, readOnly: false, busyMode: configuration.options.busyMode)
            let (snapshot, mapping) = try Self.inferMapping(on: original, to: configuration.entities, url: url)
            guard SQLiteStoreFile.leaveWriteAheadLog(original) else {
                throw Self.failure("another connection has the store open; close it (remove the store from other coordinators) before migrating",
                                   underlying: nil, url: url)
            }
            return (snapshot, mapping)
        } catch let error as SQLiteError {
            throw Self.failure("reading the store failed", underlying: "\(error)", url: url)
        } catch let error as PersistentStoreError where error.code != .migrationFailed {
            throw Self.failure("the store could not be prepared: \(error.message)", underlying: error.underlyingDescription, url: url)
        }
    }

    /// Step 2: copies the original beside itself and migrates the copy in one transaction.
    private func migrateCopy(at copyURL: URL, snapshot: StoreSchemaSnapshot, mapping: MappingModel) throws {
        do {
            try SQLiteStoreFile.copyFiles(from: url, to: copyURL)
        } catch {
            throw Self.failure("the store could not be copied", underlying: "\(error)", url: url)
        }
        do {
            let copy = try Self.openCopy(copyURL, busyMode: configuration.options.busyMode)
            try copy.inWriteTransaction {
                try Self.migrate(copy, snapshot: snapshot, mapping: mapping, to: configuration.model) { fraction in
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
                             requiresValues: Bool = true) throws -> (StoreSchemaSnapshot, MappingModel) {
        let snapshot = try StoreSchemaSnapshot(connection: connection, url: url)
        let counter = StoreRowCounter(connection: connection, snapshot: snapshot)
        let mapping = try MappingModel(from: snapshot, to: entities, url: url, requiresValues: requiresValues) { table, numbers, column in
            try counter.count(in: table, entityNumbers: numbers, whereNull: column)
        } countRowsOutside: { table, numbers, column, range in
            try MappingModel.countRows(in: table, entityNumbers: numbers, column: column, outside: range, connection: connection)
        }
        return (snapshot, mapping)
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
        var error = PersistentStoreError(.migrationFailed, url: url, message: "migrating the store failed, and the store was not changed: " + message)
        error.underlyingDescription = underlying
        return error
    }

    // MARK: - The migration, inside one transaction on the copy

    /// Migrates the schema and rows on `connection` (inside the caller's
    /// transaction) from `snapshot` to `model`, reporting the fraction done (0…1).
    static func migrate(_ connection: Connection, snapshot: StoreSchemaSnapshot, mapping: MappingModel,
                        to model: ManagedObjectModel, progress: (Double) -> Void) throws {
        // Tables that only gain columns keep their rows (SQLiteMigration+InPlace.swift).
        let inPlace = mapping.tables.compactMap { inPlacePlan(for: $0, snapshot: snapshot) }
        let inPlaceNames = Set(inPlace.map(\.name))
        for table in inPlace { try alter(table, connection) }

        // Move the other old entity and join tables aside, without their indexes and triggers.
        var renamed: [String: String] = [:]
        for table in snapshot.rootsWithTables.compactMap(\.table) + snapshot.joinTables.keys.sorted() {
            guard renamed[table] == nil, !inPlaceNames.contains(table) else { continue }
            try dropIndexesAndTriggers(of: table, connection)
            let aside = "Z_MIGRATING_" + table
            try connection.execute("ALTER TABLE \(quoted(table)) RENAME TO \(quoted(aside))")
            renamed[table] = aside
        }
        for table in mapping.schema.tables where !inPlaceNames.contains(table.name) {
            guard try !connection.tableExists(table.name) else {
                throw SQLiteError(resultCode: SQLiteError.SQLITE_ERROR,
                                  message: "the file already has a table \(table.name) that is not an entity table of the store")
            }
        }
        for statement in try statementsLeft(mapping.schema.creationStatements(), inPlace: inPlace, connection) {
            try connection.execute(statement)
        }

        // Copy the rows, table by table (progress weighed by each table's Z_MAX).
        let total = max(1, mapping.tables.reduce(0) { $0 + Int($1.sourceMaxPrimaryKey) })
        var copied = 0
        for table in mapping.tables {
            guard let source = table.sourceTable.flatMap({ renamed[$0] }), !table.entityNumbers.isEmpty else { continue }
            let targets = ["Z_PK", "Z_ENT", "Z_OPT"] + table.columns.map { quoted($0.destination) }
            let entityCase = "CASE Z_ENT " + table.entityNumbers.map { "WHEN \($0.source) THEN \($0.destination)" }.joined(separator: " ") + " END"
            let values = ["Z_PK", entityCase, "Z_OPT"] + table.columns.map { quoted($0.source) }
            try connection.execute("""
                INSERT INTO \(quoted(table.table.name)) (\(targets.joined(separator: ", "))) \
                SELECT \(values.joined(separator: ", ")) FROM \(quoted(source)) \
                WHERE Z_ENT IN (\(table.entityNumbers.map { String($0.source) }.joined(separator: ",")))
                """)
            copied += Int(table.sourceMaxPrimaryKey)
            progress(0.9 * Double(copied) / Double(total))
        }

        // Join tables: the pairs whose two rows both still exist.
        for join in mapping.joins {
            guard let source = renamed[join.sourceTable] else { continue }
            let table = join.table
            try connection.execute("""
                INSERT OR IGNORE INTO \(quoted(table.name)) (\(join.columns.map { quoted($0.destination) }.joined(separator: ", "))) \
                SELECT \(join.columns.map { quoted($0.source) }.joined(separator: ", ")) FROM \(quoted(source)) s \
                WHERE EXISTS (SELECT 1 FROM \(quoted(table.ownerTable)) o WHERE o.Z_PK = s.\(quoted(join.columns[0].source))) \
                AND EXISTS (SELECT 1 FROM \(quoted(table.memberTable)) m WHERE m.Z_PK = s.\(quoted(join.columns[1].source)))
                """)
        }

        // Defaults for new and newly required attributes.
        for table in mapping.tables {
            for fill in table.fills where !fill.entityNumbers.isEmpty {
                let statement = try connection.prepare(
                    "UPDATE \(quoted(table.table.name)) SET \(quoted(fill.column)) = ? WHERE \(quoted(fill.column)) IS NULL AND Z_ENT IN (\(fill.entityNumbers.map(String.init).joined(separator: ",")))")
                try statement.bind(fill.value, at: 1)
                try statement.execute()
            }
        }

        // Foreign keys to rows that were not carried over are cleared; entity columns are recomputed.
        for table in mapping.tables {
            for toOne in table.toOnes where toOne.isCopied {
                let name = quoted(table.table.name)
                let key = quoted(toOne.column)
                try connection.execute("""
                    UPDATE \(name) SET \(key) = NULL WHERE \(key) IS NOT NULL AND NOT EXISTS \
                    (SELECT 1 FROM \(quoted(toOne.destinationTable)) d WHERE d.Z_PK = \(name).\(key) \
                    AND d.Z_ENT IN (\(toOne.destinationNumbers.map(String.init).joined(separator: ","))))
                    """)
                if let entityColumn = toOne.entityColumn {
                    try connection.execute("""
                        UPDATE \(name) SET \(quoted(entityColumn)) = (SELECT d.Z_ENT FROM \(quoted(toOne.destinationTable)) d \
                        WHERE d.Z_PK = \(name).\(key)) WHERE \(key) IS NOT NULL
                        """)
                }
            }
        }
        progress(0.95)

        for aside in renamed.values {
            try connection.execute("DROP TABLE \(quoted(aside))")
        }

        // Z_PRIMARYKEY with the new numbering; each root keeps its counter.
        try connection.execute("DELETE FROM Z_PRIMARYKEY WHERE Z_ENT < \(StoreSchemaSnapshot.firstHistoryEntityNumber)")
        var maxByRoot: [String: Int64] = [:]
        for table in mapping.tables {
            let statement = try connection.prepare("SELECT max(Z_PK) FROM \(quoted(table.table.name))")
            let highest = try statement.step() ? statement.int64(at: 0) : 0
            maxByRoot[table.table.root.name] = max(highest, table.sourceMaxPrimaryKey)
        }
        let insertKey = try connection.prepare("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, ?)")
        for row in mapping.schema.primaryKeyRows() {
            insertKey.reset()
            try insertKey.bind(row.number, at: 1)
            try insertKey.bind(row.name, at: 2)
            try insertKey.bind(row.superNumber, at: 3)
            try insertKey.bind(row.superNumber == 0 ? maxByRoot[row.name] ?? 0 : 0, at: 4)
            try insertKey.execute()
        }

        // Metadata: the same store UUID, the new model's hashes, digest and
        // checksum. The compiled-model cache describes the old model, so it goes.
        var metadata = snapshot.metadata
        metadata.recordModel(model)
        let identifiers = model.versionIdentifiers.sorted()
        metadata[StoreMetadataKey.modelVersionIdentifiers] = identifiers.isEmpty ? [""] : identifiers
        metadata[StoreMetadataKey.storeType] = "SQLite"
        let updateMetadata = try connection.prepare("UPDATE Z_METADATA SET Z_PLIST = ?")
        try updateMetadata.bind(try StoreMetadataCoding.encode(metadata), at: 1)
        try updateMetadata.execute()
        if try connection.tableExists("Z_MODELCACHE") {
            try connection.execute("DELETE FROM Z_MODELCACHE")
        }
        progress(1)
    }

    private static func dropIndexesAndTriggers(of table: String, _ connection: Connection) throws {
        let statement = try connection.prepare(
            "SELECT type, name FROM sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND type IN ('index', 'trigger') AND sql IS NOT NULL")
        try statement.bind(table, at: 1)
        var drops: [String] = []
        while try statement.step() {
            guard let type = statement.string(at: 0), let name = statement.string(at: 1) else { continue }
            drops.append("DROP \(type == "index" ? "INDEX" : "TRIGGER") \(quoted(name))")
        }
        for drop in drops { try connection.execute(drop) }
    }

    private static func quoted(_ name: String) -> String { Connection.quotedIdentifier(name) }
}
