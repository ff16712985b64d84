import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Core Data's inferred lightweight migration of a store's tables, in the SQL
/// of any ``SQLDialect``: the one migration the SQLite store and the
/// PostgreSQL store both run.
///
/// Creating one reads the store's schema (``StoreSchemaSnapshot``) and infers
/// the mapping to the model (``MappingModel``); a change it cannot infer
/// throws, naming each entity and property, before anything is written.
/// ``migrateTables(of:progress:)`` then rewrites the tables and rows inside
/// the caller's transaction (SchemaMigration+Steps.swift). What a store keeps
/// beside its tables — its metadata, history, full-text indexes — the store
/// migrates itself, with ``metadata(for:storeType:)`` and ``historyAuthor``.
///
/// ```swift
/// try connection.transaction {
///     let migration = try SchemaMigration(database: database, metadata: metadata,
///                                         model: model, configurationName: nil, url: url)
///     try migration.migrateTables(of: database) { fraction in … }
///     try write(migration.metadata(for: model, storeType: "PostgreSQL"))
/// }
/// ```
@_spi(StoreImplementation)
public struct SchemaMigration {
    let snapshot: StoreSchemaSnapshot
    package let mapping: MappingModel
    let url: URL?

    /// Reads the schema of the store in `database` and infers the mapping to
    /// the entities of `model`'s configuration (all of them for nil).
    ///
    /// - Parameters:
    ///   - metadata: the store's metadata, as it reads it (the model it
    ///     records lets type changes be checked).
    ///   - url: the store's location, named in errors.
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` listing every
    ///   change that cannot be inferred; the database's errors reading it.
    public init(database: some MigratingDatabase, metadata: StoreMetadata, model: ManagedObjectModel,
                configurationName: String?, url: URL?) throws {
        try model.freeze()
        try self.init(database: database, metadata: metadata,
                      entities: model.entities(forConfigurationName: configurationName), url: url)
    }

    /// Infers the mapping to `entities`.
    ///
    /// - Parameter requiresValues: whether a required attribute or relationship
    ///   without a value (and without a default) in existing rows is refused;
    ///   a custom migration stage passes false, because its `didMigrate` fills them.
    public init(database: some MigratingDatabase, metadata: StoreMetadata, entities: [EntityDescription], url: URL?,
                requiresValues: Bool = true) throws {
        self.url = url
        snapshot = try StoreSchemaSnapshot(database: database, metadata: metadata)
        let counter = StoreRowCounter(database: database, snapshot: snapshot)
        mapping = try MappingModel(from: snapshot, to: entities, url: url, dialect: database.dialect,
                                   requiresValues: requiresValues) { table, numbers, column in
            try counter.count(in: table, entityNumbers: numbers, whereNull: column)
        } countRowsOutside: { table, numbers, column, range in
            try MappingModel.countRows(in: table, entityNumbers: numbers, column: column, outside: range, database: database)
        }
    }

    /// Rewrites the tables and rows of the store in `database` to the model,
    /// inside the caller's transaction, reporting the fraction done (0…1).
    ///
    /// Tables that only gain columns are altered in place; the others are
    /// rebuilt (the old one renamed aside, a new one created, the rows copied
    /// with their new entity numbers, the old one dropped). Join tables keep
    /// the pairs whose two rows remain; new and newly required attributes get
    /// their defaults; foreign keys to rows that are gone are cleared;
    /// `Z_PRIMARYKEY` takes the new numbering, each root keeping its counter.
    ///
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` when the
    ///   database has a table in the way of a new one; the database's errors
    ///   (a uniqueness constraint the rows break, a full disk…). The caller's
    ///   transaction must then be rolled back.
    /// - Complexity: O(*n* log *n*), *n* = rows of the rebuilt tables.
    public func migrateTables(of database: some MigratingDatabase, progress: (Double) -> Void) throws {
        let renamed = try prepareTables(database)
        try copyRows(database, from: renamed) { progress(0.9 * $0) }
        try copyJoins(database, from: renamed)
        try fillDefaults(database)
        try clearDanglingForeignKeys(database)
        progress(0.95)
        for aside in renamed.values {
            try database.execute("DROP TABLE \(database.dialect.quotedIdentifier(aside))", [])
        }
        try rewritePrimaryKeys(database)
        progress(1)
    }

    /// The store's metadata after the migration: its UUID kept, the new
    /// model's version identifiers and hashes recorded.
    public func metadata(for model: ManagedObjectModel, storeType: String) -> StoreMetadata {
        var metadata = snapshot.metadata
        metadata.recordModel(model)
        let identifiers = model.versionIdentifiers.sorted()
        metadata[StoreMetadataKey.modelVersionIdentifiers] = identifiers.isEmpty ? [""] : identifiers
        metadata[StoreMetadataKey.storeType] = storeType
        return metadata
    }

    /// The author of the history transaction that records a migration, as
    /// Core Data's schema migrator writes it: `com.apple.coredata.schemamigrator:
    /// lightweight migration from model with digest { … }`.
    ///
    /// A store with persistent history deletes the history written before the
    /// migration: its changes name entities and properties by the old model's
    /// numbers, which would name the wrong ones now. A reader holding an older
    /// token is told its history expired and refetches, as it must after a
    /// schema change anyway.
    public var historyAuthor: String {
        let digest = (snapshot.metadata[StoreMetadataKey.modelVersionHashesDigest] as? String).map { " from model with digest { \($0) }" }
        return "com.apple.coredata.schemamigrator: lightweight migration" + (digest ?? "")
    }

    /// A migration failure: nothing was changed (the caller's transaction is rolled back).
    package static func failure(_ message: String, underlying: String?, url: URL?) -> PersistentStoreError {
        var error = PersistentStoreError(.migrationFailed, url: url, message: "migrating the store failed, and the store was not changed: " + message)
        error.underlyingDescription = underlying
        return error
    }
}
