import DataStackSQLite
@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// A kind of persistent store, and how to make one (Core Data: `NSPersistentStore.StoreType`).
///
/// The built-in types, `.sqlite` and `.inMemory`, come with their stores from
/// the `DataStackStores` layer. Register your own with ``register(_:)``, so
/// that it can be found by name.
public struct StoreType: Sendable, Hashable, CustomStringConvertible {
    /// The type's name, as it appears in the metadata (`NSStoreType`).
    public let rawValue: String
    /// Whether stores of this type opened at one location share their data —
    /// a SQLite file, a database server — so that what one saves the others
    /// read. A stack gives such a store a writer and a main coordinator, each
    /// with a store of its own; a store that is not shared it opens once.
    public let isShared: Bool
    package let makeStore: @Sendable (StoreConfiguration) throws -> any PersistentStore
    let destroyStore: (@Sendable (URL) throws -> Void)?

    /// Describes a store type. `makeStore` creates an unopened store; the coordinator
    /// then calls its ``PersistentStore/loadMetadata()``.
    ///
    /// - Parameters:
    ///   - isShared: whether stores opened at one location share their data (see ``isShared``). The default is false.
    ///   - destroyStore: deletes the store at a location, for
    ///     ``PersistentStoreCoordinator/destroyPersistentStore(at:type:)`` (and a
    ///     stack's reset). The default, nil, removes the file at a file URL.
    public init(rawValue: String, isShared: Bool = false, destroyStore: (@Sendable (URL) throws -> Void)? = nil,
                makeStore: @escaping @Sendable (StoreConfiguration) throws -> any PersistentStore) {
        self.rawValue = rawValue
        self.isShared = isShared
        self.makeStore = makeStore
        self.destroyStore = destroyStore
    }

    private static let registry = Locked<[String: StoreType]>([:])

    /// Makes a store type known by name, for `PersistentStoreCoordinator.metadataForPersistentStore(type:at:)` (DataStackStores).
    public static func register(_ type: StoreType) {
        registry.withLock { $0[type.rawValue] = type }
    }

    /// The registered store type with this name.
    public static func named(_ name: String) -> StoreType? {
        registry.withLock { $0[name] }
    }

    private static let schemes = Locked<[String: StoreType]>([:])

    /// Makes `type` the store type of URLs with this scheme (`postgresql`), so
    /// that a stack set up with such a URL opens a store of it.
    public static func register(_ type: StoreType, forURLScheme scheme: String) {
        register(type)
        schemes.withLock { $0[scheme.lowercased()] = type }
    }

    /// The store type registered for URLs with this scheme, if any.
    public static func registered(forURLScheme scheme: String) -> StoreType? {
        schemes.withLock { $0[scheme.lowercased()] }
    }

    public static func == (lhs: StoreType, rhs: StoreType) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public var description: String { rawValue }
}

/// Everything a store needs to open: the model, the configuration, the location and the options.
public struct StoreConfiguration: Sendable {
    /// The coordinator's model.
    public var model: ManagedObjectModel
    /// The configuration the store holds, or nil for the whole model.
    public var configurationName: String?
    /// Where the store lives; nil for in-memory stores.
    public var url: URL?
    /// How to open it.
    public var options: StoreOptions

    /// The entities this store holds.
    public var entities: [EntityDescription] { model.entities(forConfigurationName: configurationName) }

    /// Describes a store to open, as the coordinator does for ``StoreType``'s `makeStore`;
    /// a store layer uses it to open a store outside any coordinator.
    public init(model: ManagedObjectModel, configurationName: String?, url: URL?, options: StoreOptions) {
        self.model = model
        self.configurationName = configurationName
        self.url = url
        self.options = options
    }
}

/// How a store is opened (Core Data's store options, as a typed value).
public struct StoreOptions: Sendable {
    /// Refuse saves. The default is false.
    public var isReadOnly = false
    /// Migrate a store written with an older model when it is added. The default is false.
    public var migratesAutomatically = false
    /// Infer the mapping between model versions when migrating. The default is false.
    public var infersMappingModel = false
    /// Called with the fraction done, from 0 to 1, while a store is migrated
    /// (on the queue that adds the store). The default is none.
    public var migrationProgress: (@Sendable (Double) -> Void)?
    /// Migrates a store written with an older model through these stages, one
    /// after another, when the store is added with ``migratesAutomatically``
    /// (Core Data: `NSPersistentStoreStagedMigrationManagerOptionKey`). The
    /// last stage must end with the coordinator's model. Without it, a store
    /// is migrated in one lightweight step (with ``infersMappingModel``).
    /// The default is none. See ``StagedMigrationManager``.
    public var stagedMigrationManager: StagedMigrationManager?
    /// SQLite journal mode. The default is `.wal`. SQLite: <https://sqlite.org/wal.html>
    public var journalMode: JournalMode = .wal
    /// SQLite `synchronous` setting. The default is `.normal`, safe in WAL mode.
    public var synchronous: Synchronous = .normal
    /// How a write waits for another connection's lock before it throws
    /// ``PersistentStoreError/Code/busy``. The default is ``BusyMode/default``,
    /// a 5 second timeout. SQLite: <https://sqlite.org/c3ref/busy_handler.html>
    public var busyMode: BusyMode = .default
    /// Extra SQLite settings for every connection of a SQLite store, run in
    /// name order after the file is checked and before the journal mode is
    /// set, so that ``SQLitePragma/pageSize(_:)`` applies to a new file. For a
    /// name given twice, the last value wins. The default is none; other
    /// stores ignore them.
    ///
    /// The journal mode, synchronous level and busy timeout are set by
    /// ``journalMode``, ``synchronous`` and ``busyMode`` alone
    /// (``SQLitePragma/custom(name:value:)`` refuses them), and a new store is
    /// set to incremental auto-vacuum after these, as Core Data sets it
    /// (`_NSAutoVacuumLevel` 2).
    ///
    /// ```swift
    /// options.pragmas = [.pageSize(8192), .cacheSize(kibibytes: 64_000)]
    /// ```
    public var pragmas: [SQLitePragma] = []
    /// Called with the SQL of every statement a SQLite or PostgreSQL store
    /// runs, as it starts (Core Data: the `-com.apple.CoreData.SQLDebug 1`
    /// launch argument; GRDB: `Database.trace(options:_:)`). The default is
    /// none; other stores ignore it.
    ///
    /// Every connection the store opens reports, from the statements that open
    /// the store on: the writer and each reader, so calls come from several
    /// threads at once. The text is the statement as prepared, with `?` (SQLite)
    /// or `$1`…`$n` (PostgreSQL) where values are bound; the values are never
    /// passed. The remote-change watcher's check or listener
    /// (``remoteChangeNotifications``) and the copy a SQLite migration works
    /// on are not reported. To start or stop tracing an open store, use
    /// `SQLiteStore/traceStatements(_:)` or `PostgreSQLStore.traceStatements(_:)`.
    ///
    /// ```swift
    /// options.statementTrace = { sql in print("SQL:", sql) }
    /// ```
    public var statementTrace: (@Sendable (String) -> Void)?
    /// A database copied to the store's location when no store exists there yet.
    public var seedDatabaseURL: URL?
    /// Destroy the store and create an empty one in its place when it was
    /// written with another model and cannot be migrated (RestKit's way with a
    /// store that is only a cache of a server's data): only when the model is
    /// what does not fit (``PersistentStoreError/isModelMismatch``), never for
    /// a full disk, a busy file or a failed copy. The default is false: the
    /// store is left as it was and adding it throws, saying so.
    public var recreatesStoreWhenMigrationFails = false
    /// Record persistent history: every save writes, in its own transaction,
    /// one transaction and one change per object into Core Data's history
    /// tables (`ATRANSACTION`, `ACHANGE`, `ATRANSACTIONSTRING`), which
    /// ``PersistentStoreCoordinator/fetchHistory(_:)`` reads (Core Data:
    /// `NSPersistentHistoryTrackingKey`). SQLite stores only. The tables are
    /// added to a store that lacks them. A store whose history holds
    /// transactions, opened without this option, refuses saves (Core Data forces
    /// it read-only), because they would leave gaps in its history that its
    /// readers could not see; delete its history first to stop tracking.
    /// The default is false.
    public var persistentHistoryTracking = false
    /// Notice commits made to the store's file by any other connection — another
    /// process, or another coordinator of this one — and post
    /// ``PersistentStoreCoordinator/storeRemoteChangeNotification`` after them
    /// (several commits between two checks make one notification; Core Data:
    /// `NSPersistentStoreRemoteChangeNotificationPostOptionKey`).
    /// SQLite stores only; other stores ignore it. With
    /// ``persistentHistoryTracking`` the notification carries the history
    /// token to fetch up to. The default is false. See ``SQLiteChangeWatcher``
    /// for how commits are noticed and what it costs.
    public var remoteChangeNotifications = false
    /// The most connections a SQLite or PostgreSQL store reads on at once:
    /// the fetches and faults of all the contexts of its coordinator run at
    /// the same time, each on a connection of its own, opened when first
    /// needed and kept open; a read beyond this many waits for one of them.
    /// The default is 5 (GRDB's `DatabasePool` default); 1 makes every read
    /// wait for the one before it. Values below 1 count as 1. Other stores
    /// ignore it.
    public var maximumReaderCount = 5
    /// How long a store that reaches its database over a network (the
    /// PostgreSQL store) waits for a connection to open before the call that
    /// needed it throws; a parameter in the store's URL (`connect_timeout`)
    /// wins. Nil: the store's default (PostgreSQL: 10 s). Stores in a file
    /// ignore it.
    public var connectionTimeout: Duration?
    /// How long a network store's connection may hear nothing from the
    /// server before it counts as lost (TCP keepalives, on both ends), so that
    /// a call over a dead link throws rather than hang, and the server ends
    /// the session of a client that vanished; parameters in the store's URL
    /// win. Nil: the store's default (PostgreSQL: 30 s). Stores in a file
    /// ignore it.
    public var keepAliveTimeout: Duration?
    /// A replica of the database that the store reads from while it writes to
    /// the primary: for the PostgreSQL store, a streaming standby's
    /// `postgresql://` URL (a `standby=` parameter in the store's URL wins).
    /// Fetches, faults and history reads run on it once it has replayed every
    /// save the process knows of; saves run on the primary. Nil (the default):
    /// reads run on the primary. Stores without replicas ignore it. See
    /// ``ReplicaReadingStore`` for the events when reads move.
    public var standbyURL: URL?
    /// How long a read waits for the standby to replay what it must see before
    /// it runs on the primary instead (a `standby_max_lag_ms` parameter in the
    /// store's URL wins). Nil: the store's default (PostgreSQL: 1 s).
    public var standbyMaximumLag: Duration?

    public init() {}

    /// SQLite journal modes: ``SQLiteJournalMode``.
    public typealias JournalMode = SQLiteJournalMode
    /// SQLite `synchronous` levels: ``SQLiteSynchronous``.
    public typealias Synchronous = SQLiteSynchronous
}
