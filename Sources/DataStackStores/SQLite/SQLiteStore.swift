@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A store in a SQLite file, in Core Data's own format (Core Data: `NSSQLiteStoreType`).
///
/// Stores written by Apple's Core Data open here and stay in Core Data's
/// layout when saved: `Z<ENTITY>` tables with `Z_PK`, `Z_ENT` and `Z_OPT`,
/// `Z_PRIMARYKEY` for key allocation, and `Z_METADATA` with a binary property
/// list. A new store is created in WAL mode with `synchronous=NORMAL`.
///
/// The store keeps two kinds of connections: one writer, on which every save
/// is one `BEGIN IMMEDIATE` transaction, used under its own lock, and a pool
/// of readers (``ReaderPool``, up to ``StoreOptions/maximumReaderCount``), so
/// fetches and faults do not wait for a save in progress, nor for each other:
/// the contexts of a coordinator read at the same time, each read on a
/// connection of its own.
/// A save waits for another writer's lock as ``StoreOptions/busyMode`` says,
/// then throws ``PersistentStoreError/Code/busy``; a save into a file deleted
/// or moved since the store opened it throws instead of writing to it.
///
/// SQLite: <https://sqlite.org/wal.html>, <https://sqlite.org/lang_transaction.html>
public final class SQLiteStore: PersistentStore, BatchFaultingStore {
    public let url: URL?
    public let configurationName: String?
    public let isReadOnly: Bool
    public var type: StoreType { .sqlite }

    let configuration: StoreConfiguration
    let fileURL: URL
    /// The connection for saves.
    let writer = ConnectionLock()
    /// The connections for fetches and faults, so they never wait for a save nor for each other.
    let readers: ReaderPool
    let state = Locked(State())
    /// Where values of attributes with external binary storage live (ExternalBinaryStorage.swift).
    let externalStorage: ExternalBinaryStorage
    /// The watcher that posts remote-change notifications, while one runs (SQLiteStore+RemoteChanges.swift).
    let changeWatcher = Locked<SQLiteChangeWatcher?>(nil)
    /// What every connection the store opens reports its statements to (SQLiteStore+Tracing.swift).
    let statementObserver: Locked<(@Sendable (String) -> Void)?>

    struct State: @unchecked Sendable {
        // @unchecked Sendable: StoreMetadata values are Sendable; the struct is only touched under `state`.
        var identifier = ""
        var identity: StoreIdentity?
        var schema: TableLayout?
        var metadata: StoreMetadata = [:]
        var metadataNeedsWrite = false
        /// The history layout while the store records persistent history; nil when it does not.
        var history: HistoryLayout?
        /// Why saves are refused although the options allow them (a store with
        /// history opened without tracking); nil when they are not.
        var readOnlyReason: String?
        /// The query generations opened and not released yet (SQLiteStore+QueryGenerations.swift).
        var queryGenerations: [WeakQueryGeneration] = []
    }

    /// Creates an unopened store; the coordinator opens it with ``loadMetadata()``.
    ///
    /// - Throws: ``PersistentStoreError/Code/missingLocation`` without a file URL.
    public init(configuration: StoreConfiguration) throws {
        guard let url = configuration.url, url.isFileURL else {
            throw PersistentStoreError(.missingLocation, url: configuration.url, message: "a SQLite store needs a file URL")
        }
        self.url = url
        self.fileURL = url
        self.configuration = configuration
        self.configurationName = configuration.configurationName
        self.isReadOnly = configuration.options.isReadOnly
        self.readers = ReaderPool(maximumCount: configuration.options.maximumReaderCount, url: url)
        self.externalStorage = ExternalBinaryStorage(storeURL: url)
        self.statementObserver = Locked(configuration.options.statementTrace)
    }

    public var identifier: String { state.withLock { $0.identifier } }
    var identity: StoreIdentity { state.withLock { $0.identity } ?? StoreIdentity.named("") }
    var schema: TableLayout {
        get throws {
            guard let schema = state.withLock({ $0.schema }) else {
                throw PersistentStoreError(.ioFailure, url: url, message: "the store is not open")
            }
            return schema
        }
    }

    public var metadata: StoreMetadata { state.withLock { $0.metadata } }

    public func setMetadata(_ metadata: StoreMetadata) throws {
        if isReadOnly { throw PersistentStoreError.readOnly(url: url) }
        state.withLock { state in
            var merged = metadata
            merged[StoreMetadataKey.storeType] = "SQLite"
            merged[StoreMetadataKey.storeUUID] = state.identifier
            // Only a migration changes the model record: a caller's copy, stale or not, never replaces it.
            for key in StoreMetadataKey.modelRecord { merged[key] = state.metadata[key] }
            state.metadata = merged
            state.metadataNeedsWrite = true
        }
    }

    // MARK: - Opening

    public func loadMetadata() throws {
        try copySeedIfNeeded()
        do {
            try openAndReadStore()
        } catch let error as PersistentStoreError where error.code == .incompatibleModel && migratesWhenIncompatible {
            // Lightweight or staged migration (SQLiteStore+Migration.swift); the failed read closed its connection.
            try migrateStoreFile(because: error)
            try openAndReadStore()
        }
    }

    /// Opens the writer connection and reads the store on it, creating the
    /// store first in an empty database.
    ///
    /// Nothing writes to the file before it is known to be a Core Data store or
    /// an empty database: no journal-mode switch, no pragma. A SQLite file of
    /// another program is refused (``PersistentStoreError/Code/notAStore``) byte
    /// for byte as it was. A 0-byte file is an empty database, as SQLite treats
    /// it, and becomes a new store. An existing store is checked against the
    /// model before its journal mode is set, so an incompatible one is refused
    /// unchanged too.
    private func openAndReadStore() throws {
        let connection = try open(readOnly: isReadOnly, defersSettings: true)
        do {
            switch try contents(of: connection) {
            case .store:
                break
            case .foreign:
                throw notACoreDataStore()
            case .empty:
                guard !isReadOnly else {
                    throw PersistentStoreError(.readOnly, url: url, message: "no store exists here and the store is opened read-only")
                }
                try createStoreIfStillEmpty(connection)
            }
            try readExistingStore(connection)
            try connection.applySettings()
            try prepareHistory(connection)
            try synchronizeSearchIndexes(connection)
        } catch let error as SQLiteError {
            throw Self.storeError(error, url: url, doing: "reading the store")
        }
        let readConnection = try open(readOnly: isReadOnly)
        writer.set(connection)
        readers.start(with: readConnection)
    }

    private func notACoreDataStore() -> PersistentStoreError {
        PersistentStoreError(.notAStore, url: url, message: "the file is a SQLite database but not a Core Data store (no Z_METADATA table)")
    }

    /// What a database file holds, as one snapshot shows it.
    private enum FileContents {
        /// A Core Data store: it has `Z_METADATA`.
        case store
        /// No table at all: a new or 0-byte file.
        case empty
        /// Tables, but not a Core Data store's.
        case foreign
    }

    /// Looks at the tables in one statement, so one snapshot answers both
    /// questions even while another connection creates the store.
    private func contents(of connection: Connection) throws -> FileContents {
        let statement = try connection.prepare("""
            SELECT count(*), coalesce(max(name = 'Z_METADATA' COLLATE NOCASE), 0) FROM sqlite_master WHERE type = 'table'
            """)
        _ = try statement.step()
        if statement.int64(at: 1) != 0 { return .store }
        return statement.int64(at: 0) == 0 ? .empty : .foreign
    }

    /// Closes the store's connections: the readers once their reads
    /// returned, then the writer once the save in progress committed, after
    /// folding the write-ahead log into the main file (a `TRUNCATE`
    /// checkpoint), so that the file alone holds the store.
    ///
    /// SQLite folds the log in by itself only when the last connection to the
    /// file closes, which a second coordinator or another process on the file
    /// prevents; and a process that exits without closing leaves every row
    /// since the last automatic checkpoint in the `-wal`.
    /// SQLite: <https://sqlite.org/c3ref/wal_checkpoint_v2.html>
    public func willRemove() {
        stopObservingRemoteChanges()
        // First: a checkpoint cannot truncate a log that an open read still uses.
        closeQueryGenerations()
        readers.close()
        writer.close { connection in
            guard !isReadOnly else { return }
            // Not an error to report: a checkpoint another connection holds up past the busy
            // mode (another process reading an older snapshot, or writing) leaves the rows in
            // the log, which is the store's data as much as the file is; the last connection
            // to close folds them in.
            _ = try? connection.checkpoint(mode: .truncate)
        }
    }

    /// Opens a connection to the store's file with the store's options.
    ///
    /// - Parameters:
    ///   - defersSettings: leaves the pragmas, journal mode and synchronous
    ///     level for the caller's ``Connection/applySettings(beforeJournalMode:)``.
    ///   - traced: whether the connection reports its statements to the
    ///     store's observer (``traceStatements(_:)``) from its first setting on.
    func open(readOnly: Bool, defersSettings: Bool = false, traced: Bool = true) throws -> Connection {
        var options = Connection.Configuration()
        options.isReadOnly = readOnly
        options.createsIfMissing = !readOnly
        // Always deferred here, so that the trace is installed before the settings run.
        options.defersSettings = true
        let storeOptions = configuration.options
        options.journalMode = storeOptions.journalMode
        options.synchronous = storeOptions.synchronous
        options.busyMode = storeOptions.busyMode
        options.pragmas = Dictionary(storeOptions.pragmas.map { ($0.name, $0.value.sql) }, uniquingKeysWith: { $1 })
        do {
            let connection = try Connection(path: fileURL.path, configuration: options)
            if traced, let observer = statementObserver.withLock({ $0 }) { connection.trace(observer) }
            if !defersSettings { try connection.applySettings() }
            // Predicates compile to SQL that calls these (case and diacritic folding, LIKE, MATCHES).
            try FetchPredicate.registerFunctions(on: connection)
            return connection
        } catch let error as SQLiteError {
            throw Self.storeError(error, url: url, doing: "opening the store")
        }
    }

    private func copySeedIfNeeded() throws {
        guard let seed = configuration.options.seedDatabaseURL,
              !FileManager.default.fileExists(atPath: fileURL.path) else { return }
        guard FileManager.default.fileExists(atPath: seed.path) else {
            throw PersistentStoreError(.cannotOpen, url: url, message: "the seed database \(seed.path) does not exist")
        }
        do {
            for suffix in ["", "-wal", "-shm"] {
                let source = URL(fileURLWithPath: seed.path + suffix)
                guard FileManager.default.fileExists(atPath: source.path) else { continue }
                try FileManager.default.copyItem(at: source, to: URL(fileURLWithPath: fileURL.path + suffix))
            }
        } catch {
            throw PersistentStoreError(.cannotOpen, url: url, message: "could not copy the seed database \(seed.path)", underlying: error)
        }
    }

    private func readExistingStore(_ connection: Connection) throws {
        let metadataRow = try connection.prepare("SELECT Z_UUID, Z_PLIST FROM Z_METADATA LIMIT 1")
        guard try metadataRow.step() else {
            throw PersistentStoreError(.notAStore, url: url, message: "Z_METADATA has no row")
        }
        let uuid = metadataRow.string(at: 0) ?? UUID().uuidString
        var metadata = try StoreMetadataCoding.decode(metadataRow.data(at: 1), of: url)
        metadata[StoreMetadataKey.storeUUID] = uuid
        metadata[StoreMetadataKey.storeType] = metadata[StoreMetadataKey.storeType] ?? "SQLite"

        var numbers: [String: Int64] = [:]
        let keys = try connection.prepare("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY")
        while try keys.step() {
            if let name = keys.string(at: 1) { numbers[name] = keys.int64(at: 0) }
        }
        let entities = configuration.entities
        // A store migrated by Core Data can keep an entity's old name in Z_NAME;
        // the model's renaming identifier leads to it.
        for entity in entities where numbers[entity.name] == nil {
            if let oldName = entity.renamingIdentifier, let number = numbers[oldName] { numbers[entity.name] = number }
        }
        // Every table's columns with their declared types: entity tables, and the
        // join tables of many-to-many relationships.
        var declaredTypes: [String: [String: String]] = [:]
        let tables = try connection.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%'")
        while try tables.step() {
            guard let table = tables.string(at: 0) else { continue }
            declaredTypes[table] = Dictionary(try connection.columns(in: table).map { ($0.name, $0.declaredType) },
                                              uniquingKeysWith: { first, _ in first })
        }
        // For a store written here, the version hashes decide (and the recorded
        // summaries name what differs); the schema is checked for every store:
        // tables, columns, their declared types and the model's indexes, which
        // is all a store written by Apple's Core Data can be judged by, since
        // its hashes cannot be compared with ours.
        let schema = try TableLayout(entities: entities, numbers: numbers,
                                      existingColumns: declaredTypes.mapValues { Set($0.keys) }, url: url)
        let problems = ManagedObjectModel.differences(of: entities, fromModelRecordedIn: metadata)
            + schema.columnDifferences(declaredTypes: declaredTypes)
            + schema.indexDifferences(existing: try TableLayout.existingIndexes(connection))
        if !problems.isEmpty { throw TableLayout.incompatible(problems, url: url) }
        state.withLock { state in
            state.identifier = uuid
            state.identity = StoreIdentity.named(uuid)
            state.schema = schema
            state.metadata = metadata
        }
    }

    /// Creates the store's tables and metadata in one `BEGIN IMMEDIATE`
    /// transaction that looks at the file again once it holds the write lock:
    /// when several coordinators (or processes) create the same new store at
    /// once, the first creates it and the others find it there and create
    /// nothing; each then reads and checks it as an existing store.
    private func createStoreIfStillEmpty(_ connection: Connection) throws {
        // Core Data's incremental auto-vacuum, which must be set before the first
        // write of the file: after the user's pragmas (page_size), before WAL.
        try connection.applySettings { try connection.execute("PRAGMA auto_vacuum = 2") }
        try connection.inWriteTransaction {
            switch try contents(of: connection) {
            case .store: return   // another coordinator or process created it meanwhile
            case .foreign: throw notACoreDataStore()
            case .empty: break
            }
            let entities = configuration.entities
            let schema = try TableLayout(entities: entities, numbers: TableLayout.coreDataNumbers(for: entities),
                                          existingColumns: nil, url: url)
            let uuid = UUID().uuidString
            var metadata = StoreLayout.newMetadata(for: configuration.model, storeType: "SQLite", uuid: uuid)
            metadata["NSPersistenceFrameworkVersion"] = 1
            metadata["_NSAutoVacuumLevel"] = "2"
            for sql in TableLayout.bookkeepingTableStatements(.sqlite) { try connection.execute(sql) }
            try SQLiteStoreFile.writeModelCache(configuration.model, connection, url: url)
            for sql in schema.creationStatements() { try connection.execute(sql) }
            try Self.replaceSearchIndexes(with: schema.searchIndexLayouts(), on: connection, rebuildingAll: false)
            let insertKey = try connection.prepare("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, 0)")
            for row in schema.primaryKeyRows() {
                insertKey.reset()
                try insertKey.bind(row.number, at: 1)
                try insertKey.bind(row.name, at: 2)
                try insertKey.bind(row.superNumber, at: 3)
                try insertKey.execute()
            }
            let insertMetadata = try connection.prepare("INSERT INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)")
            try insertMetadata.bind(uuid, at: 1)
            try insertMetadata.bind(try StoreMetadataCoding.encode(metadata), at: 2)
            try insertMetadata.execute()
        }
    }

    /// Writes metadata changed with `setMetadata`, inside the caller's transaction.
    func writeMetadataIfNeeded(_ connection: Connection) throws {
        guard let metadata = state.withLock({ $0.metadataNeedsWrite ? $0.metadata : nil }) else { return }
        let statement = try connection.cachedStatement("UPDATE Z_METADATA SET Z_PLIST = ?")
        try statement.bind(try StoreMetadataCoding.encode(metadata), at: 1)
        try statement.execute()
        state.withLock { $0.metadataNeedsWrite = false }
    }

    // MARK: - Connections

    /// Runs `body` with a reader connection of its own (``ReaderPool``), held
    /// for the body only; other reads run meanwhile on other connections.
    ///
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` once the store was
    ///   removed from its coordinator, a store error for a SQLite failure, and
    ///   what `body` throws.
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try readers.withConnection(opening: { try open(readOnly: isReadOnly) }, body)
        } catch let error as SQLiteError {
            throw Self.storeError(error, url: url, doing: "reading")
        }
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction on the writer connection.
    ///
    /// Waiting for another writer's lock is the busy handler's job alone, as
    /// ``StoreOptions/busyMode`` says; when it gives up, this throws
    /// ``PersistentStoreError/Code/busy`` at once. The store never sleeps on
    /// its own, so a save on the main queue blocks it no longer than the busy
    /// mode allows. A transaction whose WAL snapshot went stale
    /// (`SQLITE_BUSY_SNAPSHOT`, which the busy handler never sees) rolled back
    /// cleanly and is started again at once, a few times.
    ///
    /// A file deleted, renamed or replaced since the store opened it
    /// (`SQLITE_FCNTL_HAS_MOVED`) is refused before the transaction begins:
    /// its writes would reach an inode no path leads to and vanish.
    ///
    /// - Parameter changesObjects: false for work that changes no object
    ///   (rebuilding an index), which a store refusing saves for another reason
    ///   than being read-only (``State/readOnlyReason``) still allows.
    func write<T>(changesObjects: Bool = true, _ body: (Connection) throws -> T) throws -> T {
        if isReadOnly { throw PersistentStoreError.readOnly(url: url) }
        if changesObjects, let reason = state.withLock({ $0.readOnlyReason }) {
            throw PersistentStoreError(.readOnly, url: url, message: reason)
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                guard let result = try writer.withConnection({ connection in
                    guard !connection.hasMoved else {
                        throw PersistentStoreError(.ioFailure, url: url, message: """
                            the store file was deleted or moved since it was opened; nothing was saved, \
                            because the writes would go to a file that no path leads to
                            """)
                    }
                    return try connection.inWriteTransaction { try body(connection) }
                }) else {
                    throw PersistentStoreError(.ioFailure, url: url, message: "the store was removed from its coordinator")
                }
                return result
            } catch let error as SQLiteError where error.extendedResultCode == SQLiteError.SQLITE_BUSY_SNAPSHOT && attempt < 4 {
                continue
            } catch let error as SQLiteError {
                throw Self.storeError(error, url: url, doing: "saving")
            }
        }
    }

    /// A store error for a SQLite failure, with the store's location.
    static func storeError(_ error: SQLiteError, url: URL?, doing activity: String) -> PersistentStoreError {
        let code: PersistentStoreError.Code = switch error.resultCode {
        case SQLiteError.SQLITE_NOTADB, SQLiteError.SQLITE_CORRUPT: .notAStore
        case SQLiteError.SQLITE_CANTOPEN: .cannotOpen
        case SQLiteError.SQLITE_READONLY: .readOnly
        case SQLiteError.SQLITE_BUSY, SQLiteError.SQLITE_LOCKED, SQLiteError.SQLITE_PROTOCOL: .busy
        default: .ioFailure
        }
        let what = switch error.resultCode {
        case SQLiteError.SQLITE_NOTADB: "the file is not a SQLite database"
        case SQLiteError.SQLITE_CORRUPT: "the database file is corrupt"
        case SQLiteError.SQLITE_CANTOPEN: "the file cannot be opened or created"
        case SQLiteError.SQLITE_READONLY: "the location is read-only"
        case SQLiteError.SQLITE_FULL: "the disk is full"
        case SQLiteError.SQLITE_BUSY, SQLiteError.SQLITE_LOCKED, SQLiteError.SQLITE_PROTOCOL:
            "the database was locked by another connection (another coordinator or process) while \(activity), for longer than the store's busy mode waits"
        default: "SQLite failed while \(activity)"
        }
        return PersistentStoreError(code, url: url, message: what, underlying: error)
    }
}
