import DataStack
import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// A persistent store in a PostgreSQL database, in Core Data's layout: the
/// stack's programming model across every machine that reaches the database.
///
/// ```swift
/// PostgreSQLStore.register()   // once, before the first setup
/// try await StackManager.default.setup(model: model,
///     storeURL: URL(string: "postgresql://app@db.internal/inventory")!)
/// ```
///
/// The database holds the tables the SQLite store keeps in its file —
/// `Z_PRIMARYKEY`, `Z_METADATA`, one `Z<ENTITY>` table per inheritance tree with
/// `Z_PK`, `Z_ENT` and `Z_OPT`, `Z_<n><REL>` join tables — created from the
/// model by ``StoreLayout`` in PostgreSQL's types, and the same storage form
/// of values (dates as seconds since 2001, booleans as 0/1), so predicates are
/// compiled by the same compiler and mean the same.
///
/// - Saves are one transaction each, with optimistic locking on `Z_OPT`: a row
///   whose version moved on is a conflict, which the context's merge policy
///   settles inside the transaction, as with SQLite
///   (``ObjectGraph/SaveConflictResolver``); under `.error` the save throws
///   ``ObjectGraph/ObjectGraphError/Code-swift.struct/mergeConflict``.
/// - With ``ObjectGraph/StoreOptions/persistentHistoryTracking`` every save also
///   records a history transaction (`ATRANSACTION`, `ACHANGE`) and sends its
///   number on the channel `datastack_history` (`NOTIFY`, delivered at commit).
///   Transaction numbers follow commit order with no gaps: a save takes the
///   history counter's row lock last, just before it commits.
/// - With ``ObjectGraph/StoreOptions/remoteChangeNotifications`` the store
///   `LISTEN`s on a connection of its own and reports every other
///   connection's commit; after a dropped connection it reconnects and reports
///   once, so a reader catches up from its last token.
///
/// Calls are serialized on the store's one connection (a lock); a stack opens
/// two stores, the writer's and the main coordinator's, so reads of the main
/// context never wait behind an import's save.
///
/// - A store written with another model version migrates in place, in the
///   opening transaction, by the engine's lightweight migration
///   (PostgreSQLStore+Migration.swift).
///
/// Batch inserts, updates and deletes run in the store as set-based SQL
/// (PostgreSQLStore+Batch.swift). Not yet kept here (each throws, never lost):
/// full-text search, `[d]` comparisons, staged migration.
public final class PostgreSQLStore: PersistentStore, @unchecked Sendable {
    // @unchecked Sendable: the mutable state is `state`, behind its lock, and
    // the connection, used only while `connectionLock` is held.

    /// The store type: `"PostgreSQL"`, for `postgresql://` and `postgres://` URLs.
    /// Its stores are shared (every connection sees every commit), and
    /// destroying one drops its tables (``destroy(at:)``).
    public static let storeType = StoreType(rawValue: "PostgreSQL", isShared: true, destroyStore: destroy(at:)) {
        try PostgreSQLStore(configuration: $0)
    }

    /// Registers the store type and its URL schemes, so that
    /// `StackManager.setup(model:storeURL:)` with a `postgresql://` URL opens it.
    public static func register() {
        StoreType.register(storeType, forURLScheme: "postgresql")
        StoreType.register(storeType, forURLScheme: "postgres")
    }

    /// The channel saves announce their history transaction on.
    static let historyChannel = "datastack_history"

    let configuration: StoreConfiguration
    let databaseURL: URL
    /// The URL errors name: ``databaseURL`` without its password.
    let reportedURL: URL
    /// Recursive: a save's conflict resolver reads the store on the saving
    /// thread while the save holds the connection, and those reads belong in
    /// its transaction (PostgreSQLStore+Save.swift).
    let connectionLock = NSRecursiveLock()
    private var connection: PostgreSQLConnection?
    let stateLock = NSLock()
    var state = State()

    struct State {
        var identifier = ""
        var metadata: StoreMetadata = [:]
        var layout: StoreLayout?
        var tracksHistory = false
        /// Why saves are refused although the store was not added read-only
        /// (as the SQLite store's: its history would have gaps). Work that
        /// changes no object, such as metadata, is still allowed.
        var readOnlyReason: String?
        var observer: RemoteChangeListener?
    }

    public init(configuration: StoreConfiguration) throws {
        guard let url = configuration.url else {
            throw PersistentStoreError(.missingLocation, url: nil, message: "a PostgreSQL store needs a postgresql:// URL")
        }
        let reportedURL = Self.withoutPassword(url)
        guard let scheme = url.scheme?.lowercased(), scheme == "postgresql" || scheme == "postgres" else {
            throw PersistentStoreError(.cannotOpen, url: reportedURL,
                                       message: "a PostgreSQL store's URL starts with postgresql://, not \(url.scheme ?? "nothing")")
        }
        self.configuration = configuration
        self.databaseURL = url
        self.reportedURL = reportedURL
    }

    /// `url` without a password, for messages: errors are logged and shown.
    static func withoutPassword(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.password != nil else { return url }
        components.password = nil
        return components.url ?? url
    }

    deinit {
        connection?.close()
    }

    public var url: URL? { databaseURL }
    public var identifier: String { stateLock.withLock { state.identifier } }
    public var type: StoreType { Self.storeType }
    public var configurationName: String? { configuration.configurationName }
    public var isReadOnly: Bool { configuration.options.isReadOnly }
    public var metadata: StoreMetadata { stateLock.withLock { state.metadata } }

    var layout: StoreLayout {
        get throws {
            guard let layout = stateLock.withLock({ state.layout }) else {
                throw PersistentStoreError(.cannotOpen, url: reportedURL, message: "the store is not open: add it to a coordinator first")
            }
            return layout
        }
    }

    public func setMetadata(_ metadata: StoreMetadata) throws {
        if isReadOnly { throw PersistentStoreError.readOnly(url: reportedURL) }
        var merged = metadata
        let current = self.metadata
        for key in [StoreMetadataKey.storeType, StoreMetadataKey.storeUUID] { merged[key] = current[key] }
        let data = try StoreLayout.encode(merged)
        try withConnection { connection in
            _ = try connection.execute("UPDATE Z_METADATA SET Z_PLIST = $1", [.bytes(Array(data))])
        }
        stateLock.withLock { state.metadata = merged }
    }

    public func willRemove() {
        stopObservingRemoteChanges()
        connectionLock.withLock {
            connection?.close()
            connection = nil
        }
    }

    // MARK: - The connection

    /// Runs `body` with the store's connection, held alone; connects (again)
    /// first when there is none or the last one broke.
    ///
    /// - Throws: ``ObjectGraph/PersistentStoreError`` for connection failures
    ///   (`.cannotOpen`) and lost connections (`.ioFailure`), saying which database.
    func withConnection<T>(_ body: (PostgreSQLConnection) throws -> T) throws -> T {
        try connectionLock.withLock {
            do {
                let connection = try openConnection()
                return try body(connection)
            } catch let error as PostgreSQLError {
                throw storeError(error)
            }
        }
    }

    /// The open connection; or connects again, and then — once the store is
    /// loaded — takes the open-store lock again and checks that the store was
    /// not migrated meanwhile (PostgreSQLStore+Migration.swift): with the lock
    /// gone, another machine may have renumbered the tables this store's
    /// statements name.
    private func openConnection() throws -> PostgreSQLConnection {
        if let connection, connection.isConnected { return connection }
        let made: PostgreSQLConnection
        if let connection {
            try connection.reconnect()
            made = connection
        } else {
            made = try PostgreSQLConnection(url: databaseURL)
            connection = made
        }
        guard stateLock.withLock({ state.layout != nil }) else { return made }
        do {
            try holdOpenStoreLock(made)
        } catch {
            // Dropped, so that each later call connects and checks again rather than use a store that moved on.
            made.close()
            connection = nil
            throw error
        }
        return made
    }

    /// A connection error as the store error a coordinator's caller expects.
    func storeError(_ error: PostgreSQLError) -> PersistentStoreError {
        Self.storeError(error, url: reportedURL)
    }

    static func storeError(_ error: PostgreSQLError, url: URL) -> PersistentStoreError {
        let code: PersistentStoreError.Code
        switch error.kind {
        case .connectionFailed: code = .cannotOpen
        case .serializationFailure: code = .busy
        default: code = .ioFailure
        }
        return PersistentStoreError(code, url: url, message: "PostgreSQL: \(error)", underlying: error)
    }

    /// Throws unless the store may save objects: added read-only, or refusing
    /// saves for a reason of its own (``State/readOnlyReason``).
    func requireObjectSaves() throws {
        if isReadOnly { throw PersistentStoreError.readOnly(url: reportedURL) }
        if let reason = stateLock.withLock({ state.readOnlyReason }) {
            throw PersistentStoreError(.readOnly, url: reportedURL, message: reason)
        }
    }
}
