import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Lightweight migration

extension PostgreSQLStore {
    /// Migrates the store to the coordinator's model inside the opening
    /// transaction (which holds the schema's advisory lock) and returns the
    /// migrated metadata; or says why it does not.
    ///
    /// The migration is the SQLite store's (``DataStackStorage/SchemaMigration``,
    /// Core Data's inferred lightweight migration), or the stages of the
    /// options' ``ObjectGraph/StagedMigrationManager`` (PostgreSQLStagedMigration.swift), run in place: PostgreSQL
    /// changes tables transactionally, so a failure leaves every table, row
    /// and the metadata as they were. Coordinators on other machines opening
    /// the database meanwhile wait for the lock and then find it migrated;
    /// those still open with the old model get errors from their next
    /// statements on the changed tables, never other data.
    ///
    /// - Parameter problems: how the model differs from the store's, for the error when it does not migrate.
    /// - Throws: ``ObjectGraph/PersistentStoreError``: `.incompatibleModel`
    ///   without `migratesAutomatically` and `infersMappingModel`;
    ///   `.migrationFailed` read-only, for a change that cannot be inferred
    ///   (naming it), rows the new model refuses, or a stage that fails (naming it).
    func migrate(_ metadata: StoreMetadata, because problems: [String], _ connection: PostgreSQLConnection) throws -> StoreMetadata {
        let options = configuration.options
        guard options.migratesAutomatically, options.infersMappingModel || options.stagedMigrationManager != nil else {
            throw PersistentStoreError(.incompatibleModel, url: reportedURL, message: """
                the store does not match the model: \(problems.joined(separator: "; ")) \
                (add it with migratesAutomatically and infersMappingModel to migrate it)
                """)
        }
        guard !options.isReadOnly else {
            throw migrationFailure("the store needs migrating but is added read-only: \(problems.joined(separator: "; "))")
        }
        do {
            // A closed connection's lock is released when its server process exits, a moment after
            // the close: wait that moment, not for machines that keep running the old model.
            _ = try connection.execute("SET LOCAL lock_timeout = '\(Self.openStoreLockWait)s'")
            _ = try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [.text(Self.openStoreLock)])
            _ = try connection.execute("SET LOCAL lock_timeout = DEFAULT")
        } catch let error as PostgreSQLError where error.code == "55P03" {   // lock_not_available
            throw migrationFailure("""
                other coordinators have had the store open with the model it has now for \(Self.openStoreLockWait) s \
                (on this machine or others); migrating would change the tables under them: close them (stop the \
                machines running the old model), then add the store with the new model
                """)
        }
        if let manager = options.stagedMigrationManager {
            return try PostgreSQLStagedMigration(store: self, connection: connection, manager: manager, problems: problems)
                .run(from: metadata)
        }
        let progress = options.migrationProgress
        progress?(0)
        do {
            let migrated = try migrateSchema(from: metadata, to: configuration.model, requiresValues: true, connection) {
                progress?(0.05 + 0.85 * $0)
            }
            progress?(0.95)
            return migrated
        } catch let error as PostgreSQLError {
            throw migrationFailure(Self.reason(for: error), underlying: error)
        }
    }

    /// One lightweight migration of the tables, inside the caller's transaction:
    /// the tables and rows from the model recorded in `metadata` to `model`,
    /// the history restarted, the metadata written; returns the new metadata.
    /// The whole migration, or one step of a staged migration.
    ///
    /// - Parameter requiresValues: whether a required attribute or relationship
    ///   without a value in existing rows is refused; a custom migration stage
    ///   passes false, because its `didMigrate` fills them.
    func migrateSchema(from metadata: StoreMetadata, to model: ManagedObjectModel, requiresValues: Bool,
                       _ connection: PostgreSQLConnection, progress: (Double) -> Void) throws -> StoreMetadata {
        // Laying out the model validates and freezes it, as a coordinator does before a migration uses it.
        _ = try StoreLayout(model: model, configurationName: configuration.configurationName, dialect: .postgreSQL)
        let database = PostgreSQLMigratingDatabase(connection: connection)
        let migration = try SchemaMigration(database: database, metadata: metadata,
                                            entities: model.entities(forConfigurationName: configuration.configurationName),
                                            url: reportedURL, requiresValues: requiresValues)
        try migration.migrateTables(of: database, progress: progress)
        try restartHistory(after: migration, storeIdentifier: metadata[StoreMetadataKey.storeUUID] as? String, connection)
        let migrated = migration.metadata(for: model, storeType: Self.storeType.rawValue)
        _ = try connection.execute("UPDATE Z_METADATA SET Z_PLIST = $1", [.bytes(Array(try StoreLayout.encode(migrated)))])
        return migrated
    }

    /// What a PostgreSQL failure while migrating means, in words.
    static func reason(for error: PostgreSQLError) -> String {
        error.kind == .uniqueViolation ? "rows of the store break a uniqueness constraint of the model" : "PostgreSQL failed while migrating"
    }

    /// The session-level advisory lock every open store's connection holds
    /// shared while it is open, and a migration takes exclusively (waiting
    /// ``openStoreLockWait`` at most): a migration renumbers entities and rebuilds tables, so it
    /// runs only while no coordinator has the store open with the model it
    /// replaces — as SQLite's migration refuses a file another connection has open.
    static let openStoreLock = "datastack.open"

    /// How long, in seconds, a migration waits for other coordinators to close the store.
    static let openStoreLockWait = 5

    /// After connecting again: takes the open-store lock again (waiting for a
    /// migration under way) and checks that the store still has this store's
    /// model.
    ///
    /// - Throws: `.incompatibleModel` when another machine migrated the store
    ///   while the connection was down.
    func holdOpenStoreLock(_ connection: PostgreSQLConnection) throws {
        _ = try connection.execute("SELECT pg_advisory_lock_shared(hashtext($1))", [.text(Self.openStoreLock)])
        let problems = StoreLayout.differences(of: configuration.entities, fromModelRecordedIn: try Self.storedMetadata(connection))
        guard problems.isEmpty else {
            throw PersistentStoreError(.incompatibleModel, url: reportedURL, message: """
                the store was migrated to another model while this store's connection was down, and this store's \
                statements would name the wrong tables and entities: \(problems.joined(separator: "; ")) \
                (add the store again with the new model)
                """)
        }
    }

    /// The history written before the migration is deleted — its changes name
    /// entities by the old model's numbers — and with tracking the migration
    /// records a transaction of its own, as Core Data's schema migrator does
    /// and the SQLite store does. Readers on other machines are notified: a
    /// token from before the migration then reads as expired, and they refetch.
    private func restartHistory(after migration: SchemaMigration, storeIdentifier: String?, _ connection: PostgreSQLConnection) throws {
        guard try Self.tableExists("atransaction", connection) else { return }
        _ = try connection.execute("DELETE FROM ACHANGE")
        _ = try connection.execute("DELETE FROM ATRANSACTION")
        guard configuration.options.persistentHistoryTracking, let storeIdentifier else { return }
        let number = try insertHistoryTransaction(author: migration.historyAuthor, contextName: nil, connection)
        _ = try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.historyChannel), .text("\(storeIdentifier):\(number)")])
    }

    private func migrationFailure(_ message: String, underlying: PostgreSQLError? = nil) -> PersistentStoreError {
        PersistentStoreError(.migrationFailed, url: reportedURL,
                             message: "migrating the store failed, and the store was not changed: " + message, underlying: underlying)
    }
}
