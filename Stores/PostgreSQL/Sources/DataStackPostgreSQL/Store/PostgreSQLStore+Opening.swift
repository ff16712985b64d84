import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Opening and creating the database's tables

extension PostgreSQLStore {
    /// `Z_ENT` of the history transaction's row in `Z_PRIMARYKEY`, whose
    /// `Z_MAX` numbers history transactions (Core Data's number for its
    /// `TRANSACTION` entity).
    static let historyTransactionEntity: Int64 = 16002

    /// Connects, creates the tables when the database has none yet, and reads
    /// the metadata; or checks an existing store against the model.
    ///
    /// Creating runs in one transaction holding an advisory lock, which looks
    /// at the database again once it holds the lock: of several coordinators or
    /// machines opening a new database at once, one creates and the others
    /// find the tables.
    ///
    /// - Throws: ``ObjectGraph/PersistentStoreError``: `.cannotOpen` when the
    ///   server cannot be reached; `.notAStore` for a database with tables
    ///   but no `Z_METADATA`; `.incompatibleModel` naming each entity and
    ///   property that differs from the model the store was created with,
    ///   unless the options ask for lightweight migration
    ///   (PostgreSQLStore+Migration.swift), which then runs in the same
    ///   transaction; `.migrationFailed` when it cannot.
    public func loadMetadata() throws {
        let entities = configuration.entities
        var layout = try StoreLayout(model: configuration.model, configurationName: configuration.configurationName, dialect: .postgreSQL)
        let options = configuration.options
        if migratingSession != nil {
            return try loadMetadataOnMigratingSession(layout: layout)
        }
        let (metadata, history, migrated) = try withConnection { connection in
            try connection.transaction {
                _ = try connection.execute("SELECT pg_advisory_xact_lock(hashtext('datastack.schema'))")
                if try !Self.tableExists("z_metadata", connection) {
                    guard try Self.isEmpty(connection) else {
                        throw PersistentStoreError(.notAStore, url: reportedURL, message: """
                            the database has tables but no Z_METADATA: it is not a DataStack store, and nothing was changed in it
                            """)
                    }
                    if options.isReadOnly {
                        throw PersistentStoreError(.cannotOpen, url: reportedURL, message: """
                            the database has no store yet, and a store added read-only cannot create one
                            """)
                    }
                    try create(layout, connection)
                }
                var history = try Self.history(connection)
                if options.persistentHistoryTracking, !options.isReadOnly, history == .none {
                    try Self.createHistoryTables(connection)
                    history = .empty
                }
                var metadata = try Self.storedMetadata(connection)
                let problems = StoreLayout.differences(of: entities, fromModelRecordedIn: metadata)
                var migrated = false
                if !problems.isEmpty {
                    // Under the advisory lock: of several machines opening with a new model, one migrates.
                    metadata = try migrate(metadata, because: problems, connection)
                    history = try Self.history(connection)
                    migrated = true
                }
                try Self.synchronizeSearchIndexes(of: &layout, migrated: migrated, readOnly: options.isReadOnly, connection)
                _ = try connection.execute("SELECT pg_advisory_lock_shared(hashtext($1))", [.text(Self.openStoreLock)])
                return (metadata, history, migrated)
            }
        }
        if migrated { options.migrationProgress?(1) }
        try adopt(metadata, layout: layout, history: history)
    }

    /// Opens a staged migration's handler store on the migrating session
    /// (``migratingSession``), inside the migration's transaction: no lock of
    /// its own (the transaction holds them), and the store must already have
    /// the handler's model — the stage's, which the migration put there.
    ///
    /// - Throws: `.incompatibleModel` when it does not.
    private func loadMetadataOnMigratingSession(layout: StoreLayout) throws {
        let options = configuration.options
        let (metadata, history) = try withConnection { connection in
            var history = try Self.history(connection)
            if options.persistentHistoryTracking, history == .none {
                try Self.createHistoryTables(connection)
                history = .empty
            }
            return (try Self.storedMetadata(connection), history)
        }
        let problems = StoreLayout.differences(of: configuration.entities, fromModelRecordedIn: metadata)
        guard problems.isEmpty else {
            throw PersistentStoreError(.incompatibleModel, url: reportedURL, message: """
                the migrating store does not have the stage's model: \(problems.joined(separator: "; "))
                """)
        }
        try adopt(metadata, layout: layout, history: history)
    }

    /// Takes what opening read as the store's state.
    private func adopt(_ metadata: StoreMetadata, layout: StoreLayout, history: History) throws {
        guard let uuid = metadata[StoreMetadataKey.storeUUID] as? String else {
            throw PersistentStoreError(.notAStore, url: reportedURL, message: "the store's metadata has no NSStoreUUID")
        }
        let tracksHistory = configuration.options.persistentHistoryTracking
        stateLock.withLock {
            state.identifier = uuid
            state.metadata = metadata
            state.layout = layout
            state.tracksHistory = tracksHistory && history != .none
            // A save without its history transaction would be a gap other machines never merge.
            state.readOnlyReason = !tracksHistory && history == .holdsTransactions ? StoreLayout.untrackedHistoryReason : nil
        }
    }

    /// The metadata in the store's `Z_METADATA` as `connection` sees it (empty when there is none).
    static func storedMetadata(_ connection: PostgreSQLConnection) throws -> StoreMetadata {
        let result = try connection.execute("SELECT Z_PLIST FROM Z_METADATA")
        let data = try result.rowCount > 0 ? result.bytes(row: 0, column: 0).map { Data($0) } : nil
        return try StoreLayout.decodeMetadata(data)
    }

    /// What a database holds of persistent history.
    enum History {
        case none, empty, holdsTransactions
    }

    static func history(_ connection: PostgreSQLConnection) throws -> History {
        guard try tableExists("atransaction", connection) else { return .none }
        let any = try connection.execute("SELECT EXISTS (SELECT 1 FROM ATRANSACTION)").string(row: 0, column: 0) == "t"
        return any ? .holdsTransactions : .empty
    }

    private func create(_ layout: StoreLayout, _ connection: PostgreSQLConnection) throws {
        for sql in layout.creationStatements() { _ = try connection.execute(sql) }
        for row in layout.entityRows {
            _ = try connection.execute("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES ($1, $2, $3, 0)",
                                       [PostgreSQLValue(row.number), .text(row.name), PostgreSQLValue(row.superNumber)])
        }
        let uuid = UUID().uuidString
        let metadata = StoreLayout.newMetadata(for: configuration.model, storeType: Self.storeType.rawValue, uuid: uuid)
        _ = try connection.execute("INSERT INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, $1, $2)",
                                   [.text(uuid), .bytes(Array(try StoreLayout.encode(metadata)))])
    }

    /// The history tables, and the counter row that numbers transactions in commit order.
    private static func createHistoryTables(_ connection: PostgreSQLConnection) throws {
        _ = try connection.execute("""
            CREATE TABLE ATRANSACTION (Z_PK BIGINT PRIMARY KEY, ZTIMESTAMP DOUBLE PRECISION, ZAUTHOR TEXT, \
            ZCONTEXTNAME TEXT, ZPROCESSID TEXT, ZBUNDLEID TEXT)
            """)
        _ = try connection.execute("""
            CREATE TABLE ACHANGE (Z_PK BIGSERIAL PRIMARY KEY, ZTRANSACTIONID BIGINT NOT NULL, ZCHANGETYPE BIGINT NOT NULL, \
            ZENTITY BIGINT NOT NULL, ZENTITYPK BIGINT NOT NULL, ZCOLUMNS BYTEA)
            """)
        _ = try connection.execute("CREATE INDEX ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)")
        _ = try connection.execute("""
            INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES ($1, 'TRANSACTION', 0, 0) ON CONFLICT DO NOTHING
            """, [PostgreSQLValue(historyTransactionEntity)])
    }

    static func tableExists(_ name: String, _ connection: PostgreSQLConnection) throws -> Bool {
        try connection.execute("SELECT to_regclass($1) IS NOT NULL", [.text(name)]).string(row: 0, column: 0) == "t"
    }

    /// Drops the store at `url`: `Z_PRIMARYKEY`, `Z_METADATA`, each entity
    /// table `Z_PRIMARYKEY` names, the join tables (`Z_<n>…`) and the history
    /// tables, in one transaction — and nothing else of the database. A database
    /// without `Z_METADATA` holds no store: nothing is dropped, and that is not an error.
    public static func destroy(at url: URL) throws {
        let reportedURL = withoutPassword(url)
        do {
            let connection = try PostgreSQLConnection(url: url, settings: PostgreSQLConnectionSettings(connectTimeout: defaultConnectionTimeout))
            defer { connection.close() }
            try connection.transaction {
                _ = try connection.execute("SELECT pg_advisory_xact_lock(hashtext('datastack.schema'))")
                guard try tableExists("z_metadata", connection) else { return }
                // Root entities' tables (Z_SUPER 0) below the history's numbers (16001…), join tables, bookkeeping, history.
                let tables = try connection.execute("""
                    SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND (
                        tablename IN (SELECT lower('Z' || Z_NAME) FROM Z_PRIMARYKEY WHERE Z_SUPER = 0 AND Z_ENT < 16000)
                        OR tablename ~ '^z_[0-9]' OR tablename IN ('z_primarykey', 'z_metadata', 'atransaction', 'achange')
                        OR tablename LIKE 'ds\\_search\\_%')
                    """)
                let names = (0..<tables.rowCount).compactMap { tables.string(row: $0, column: 0) }
                    .map(PostgreSQLMigratingDatabase.quoted)
                _ = try connection.execute("DROP TABLE " + names.joined(separator: ", ") + " CASCADE")
                // The search index's functions (PostgreSQLSearchIndex), with the tables that used them.
                _ = try connection.execute("""
                    DROP FUNCTION IF EXISTS ds_search_forget(), ds_search_refuse(text, bigint), \
                    ds_search_occurrences(tsvector, text[], boolean), ds_search_relevance(tsvector, jsonb) CASCADE
                    """)
            }
        } catch let error as PostgreSQLError {
            throw storeError(error, url: reportedURL)
        }
    }

    private static func isEmpty(_ connection: PostgreSQLConnection) throws -> Bool {
        try connection.execute("""
            SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()
            """).int64(row: 0, column: 0) == 0
    }
}
