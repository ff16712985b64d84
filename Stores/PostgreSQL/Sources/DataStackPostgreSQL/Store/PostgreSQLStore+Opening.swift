import Foundation
@_spi(StoreImplementation) import ObjectGraph

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
    ///   server cannot be reached or the model uses what this store does not
    ///   keep (ordered relationships); `.notAStore` for a database with tables
    ///   but no `Z_METADATA`; `.incompatibleModel` naming each entity and
    ///   property that differs from the model the store was created with.
    public func loadMetadata() throws {
        let entities = configuration.entities
        let layout = try StoreLayout(entities: entities, dialect: .postgreSQL)
        let unsupported = layout.unsupportedFeatures(for: entities)
        guard unsupported.isEmpty else {
            throw PersistentStoreError(.cannotOpen, url: databaseURL, message: """
                the PostgreSQL store does not keep the order of ordered relationships yet: \
                \(unsupported.joined(separator: "; "))
                """)
        }
        let options = configuration.options
        let metadata: StoreMetadata = try withConnection { connection in
            try connection.transaction {
                _ = try connection.execute("SELECT pg_advisory_xact_lock(hashtext('datastack.schema'))")
                if try !Self.tableExists("z_metadata", connection) {
                    guard try Self.isEmpty(connection) else {
                        throw PersistentStoreError(.notAStore, url: databaseURL, message: """
                            the database has tables but no Z_METADATA: it is not a DataStack store, and nothing was changed in it
                            """)
                    }
                    if options.isReadOnly {
                        throw PersistentStoreError(.cannotOpen, url: databaseURL, message: """
                            the database has no store yet, and a store added read-only cannot create one
                            """)
                    }
                    try create(layout, connection)
                }
                if options.persistentHistoryTracking, !options.isReadOnly, try !Self.tableExists("atransaction", connection) {
                    try Self.createHistoryTables(connection)
                }
                let result = try connection.execute("SELECT Z_PLIST FROM Z_METADATA")
                let data = try result.rowCount > 0 ? result.bytes(row: 0, column: 0).map { Data($0) } : nil
                return try StoreLayout.decodeMetadata(data)
            }
        }
        let problems = StoreLayout.differences(of: entities, fromModelRecordedIn: metadata)
        guard problems.isEmpty else {
            throw PersistentStoreError(.incompatibleModel, url: databaseURL, message: """
                the store does not match the model (the PostgreSQL store does not migrate yet): \(problems.joined(separator: "; "))
                """)
        }
        guard let uuid = metadata[StoreMetadataKey.storeUUID] as? String else {
            throw PersistentStoreError(.notAStore, url: databaseURL, message: "the store's metadata has no NSStoreUUID")
        }
        let hasHistoryTables = try withConnection { try Self.tableExists("atransaction", $0) }
        let tracksHistory = options.persistentHistoryTracking && hasHistoryTables
        stateLock.withLock {
            state.identifier = uuid
            state.metadata = metadata
            state.layout = layout
            state.tracksHistory = tracksHistory
        }
    }

    private func create(_ layout: StoreLayout, _ connection: PostgreSQLConnection) throws {
        _ = try connection.execute("CREATE TABLE Z_PRIMARYKEY (Z_ENT BIGINT PRIMARY KEY, Z_NAME TEXT, Z_SUPER BIGINT, Z_MAX BIGINT)")
        _ = try connection.execute("CREATE TABLE Z_METADATA (Z_VERSION BIGINT PRIMARY KEY, Z_UUID TEXT, Z_PLIST BYTEA)")
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
            ZENTITY BIGINT NOT NULL, ZENTITYPK BIGINT NOT NULL)
            """)
        _ = try connection.execute("CREATE INDEX ACHANGE_ZTRANSACTIONID_INDEX ON ACHANGE (ZTRANSACTIONID)")
        _ = try connection.execute("""
            INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES ($1, 'TRANSACTION', 0, 0) ON CONFLICT DO NOTHING
            """, [PostgreSQLValue(historyTransactionEntity)])
    }

    static func tableExists(_ name: String, _ connection: PostgreSQLConnection) throws -> Bool {
        try connection.execute("SELECT to_regclass($1) IS NOT NULL", [.text(name)]).string(row: 0, column: 0) == "t"
    }

    private static func isEmpty(_ connection: PostgreSQLConnection) throws -> Bool {
        try connection.execute("""
            SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()
            """).int64(row: 0, column: 0) == 0
    }
}
