import DataStack
import Foundation
import Synchronization
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
/// Saves run on the store's writer session, one at a time (a lock); fetches,
/// faults and history reads run on a pool of reader sessions
/// (``ObjectGraph/StoreOptions/maximumReaderCount``, opened on demand), so the
/// contexts of a coordinator read at the same time and never wait behind a
/// save. Every session connects within ``ObjectGraph/StoreOptions/connectionTimeout``
/// and watches its link with TCP keepalives (``ObjectGraph/StoreOptions/keepAliveTimeout``),
/// or as the URL's `connect_timeout` and `keepalives_*` say; a session that broke is
/// opened again by the next call that needs it. A URL may name a streaming
/// standby (`standby=`) for the reads, which then wait until it has replayed
/// what they must see, or go to the primary (PostgreSQLStandby.swift).
///
/// - A store written with another model version migrates in place, in the
///   opening transaction, by the engine's lightweight migration
///   (PostgreSQLStore+Migration.swift), or through the stages of a
///   ``ObjectGraph/StagedMigrationManager`` (PostgreSQLStagedMigration.swift).
///
/// Batch inserts, updates and deletes run in the store as set-based SQL
/// (PostgreSQLStore+Batch.swift). `MATCHES[search]` and relevance sorts read
/// the store's own full-text index, kept in the same transactions
/// (PostgreSQLSearchIndex.swift). Not kept here (it throws, never lost):
/// `[d]` comparisons, whose folding PostgreSQL cannot reproduce (README).
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
    /// The session of the transaction that migrates the store, when this store
    /// is the one a staged migration's handlers work through: every statement
    /// runs on it, inside that transaction (PostgreSQLStagedMigration.swift).
    /// Nil for every other store.
    let migratingSession: PostgreSQLConnection?
    /// The primary's URL as libpq takes it: the store's URL without the standby's parameters.
    let databaseURL: URL
    /// The URL errors name: ``databaseURL`` without its password.
    let reportedURL: URL
    /// Recursive: a save's conflict resolver reads the store on the saving
    /// thread while the save holds the connection, and those reads belong in
    /// its transaction (PostgreSQLStore+Save.swift).
    let connectionLock = NSRecursiveLock()
    private var connection: PostgreSQLConnection?
    /// The thread inside ``withConnection(_:)``, whose reads go to the writer's
    /// session (they belong in its transaction); nil when none is.
    private let writerThread = Mutex<ObjectIdentifier?>(nil)
    /// The sessions reads run on, so that they never wait behind a save (PostgreSQLReaderPool.swift).
    let readers: PostgreSQLReaderPool
    /// The connect timeout and keepalives of every session the store opens.
    let connectionSettings: PostgreSQLConnectionSettings
    /// The streaming standby reads go to, when the URL names one (PostgreSQLStandby.swift).
    let standby: PostgreSQLStandby?
    /// Where every session of the store reports its statements
    /// (``ObjectGraph/StoreOptions/statementTrace``, ``traceStatements(_:)``).
    let tracer: StatementTracer
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

    public convenience init(configuration: StoreConfiguration) throws {
        try self.init(configuration: configuration, migratingSession: nil)
    }

    /// A store whose statements all run on `migratingSession`, when not nil
    /// (``migratingSession``); it opens no session of its own.
    init(configuration: StoreConfiguration, migratingSession: PostgreSQLConnection?) throws {
        guard let url = configuration.url else {
            throw PersistentStoreError(.missingLocation, url: nil, message: "a PostgreSQL store needs a postgresql:// URL")
        }
        let reportedURL = Self.withoutPassword(url)
        guard let scheme = url.scheme?.lowercased(), scheme == "postgresql" || scheme == "postgres" else {
            throw PersistentStoreError(.cannotOpen, url: reportedURL,
                                       message: "a PostgreSQL store's URL starts with postgresql://, not \(url.scheme ?? "nothing")")
        }
        self.configuration = configuration
        self.migratingSession = migratingSession
        (self.databaseURL, self.standby) = try PostgreSQLStandby.split(url, options: configuration.options, reportedURL: reportedURL)
        self.reportedURL = reportedURL
        self.readers = PostgreSQLReaderPool(maximumCount: configuration.options.maximumReaderCount, url: reportedURL)
        self.connectionSettings = Self.connectionSettings(configuration.options)
        self.tracer = StatementTracer(configuration.options.statementTrace)
    }

    /// The store's default connect timeout, when neither the options nor the URL give one.
    public static let defaultConnectionTimeout = Duration.seconds(10)
    /// The store's default keepalive time, when neither the options nor the URL give one.
    public static let defaultKeepAliveTimeout = Duration.seconds(30)

    static func connectionSettings(_ options: StoreOptions) -> PostgreSQLConnectionSettings {
        PostgreSQLConnectionSettings(connectTimeout: options.connectionTimeout ?? defaultConnectionTimeout,
                                     keepAliveTimeout: options.keepAliveTimeout ?? defaultKeepAliveTimeout)
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

    public var url: URL? { configuration.url }
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
        standby?.onReadSourceChange.withLock { $0 = nil }
        readers.close()
        standby?.readers.close()
        connectionLock.withLock {
            connection?.close()
            connection = nil
        }
    }

    // MARK: - The connection

    /// Runs `body` with the writer's session, held alone; connects (again)
    /// first when there is none or the last one broke (``PostgreSQLConnection/isAlive``:
    /// a server restart or a dead link noticed without a round trip).
    ///
    /// - Throws: ``ObjectGraph/PersistentStoreError`` for connection failures
    ///   (`.cannotOpen` before the store is loaded, `.ioFailure` after: an
    ///   outage, naming the server) and lost connections (`.ioFailure`).
    func withConnection<T>(_ body: (PostgreSQLConnection) throws -> T) throws -> T {
        try connectionLock.withLock {
            let thread = ObjectIdentifier(Thread.current)
            let outer = writerThread.withLock { owner in
                defer { owner = thread }
                return owner
            }
            defer { writerThread.withLock { $0 = outer } }
            do {
                let connection = try openConnection()
                let value = try body(connection)
                if standby != nil, outer == nil, !connection.isInTransaction {
                    // Reads on the standby wait until it has replayed what was just written. What was
                    // written stands even when the position cannot be read (the session broke just
                    // after): reads then go to the primary until a later position is known.
                    do {
                        PostgreSQLStandby.require(try PostgreSQLStandby.primaryPosition(connection), for: databaseURL)
                    } catch {
                        PostgreSQLStandby.requireUnknownPosition(for: databaseURL)
                    }
                }
                return value
            } catch let error as PostgreSQLError {
                throw storeError(error)
            }
        }
    }

    /// Runs `body` with a reader's session (``PostgreSQLReaderPool``), so that
    /// a fetch, a fault or a history read of one context neither waits for a
    /// save of another nor for another read; on the thread of a save (its
    /// conflict resolver, a uniqueness check inside it) with the writer's
    /// session instead, whose transaction the read belongs to.
    ///
    /// - Throws: as ``withConnection(_:)``.
    func withReader<T>(_ body: (PostgreSQLConnection) throws -> T) throws -> T {
        if migratingSession != nil || writerThread.withLock({ $0 == ObjectIdentifier(Thread.current) }) {
            return try withConnection(body)
        }
        do {
            if let standby, let value = try readFromStandby(standby, body) { return value }
            return try readers.withConnection(opening: openReader, body)
        } catch let error as PostgreSQLError {
            throw storeError(error)
        }
    }

    /// A new reader session: it holds the open-store lock like the writer's,
    /// so a migration elsewhere waits for it, and it checks the model as a
    /// reconnecting writer does.
    private func openReader() throws -> PostgreSQLConnection {
        let reader = try PostgreSQLConnection(url: databaseURL, settings: connectionSettings, tracer: tracer)
        do {
            try holdOpenStoreLock(reader)
        } catch {
            reader.close()
            throw error
        }
        return reader
    }

    /// The open connection; or connects again, and then — once the store is
    /// loaded — takes the open-store lock again and checks that the store was
    /// not migrated meanwhile (PostgreSQLStore+Migration.swift): with the lock
    /// gone, another machine may have renumbered the tables this store's
    /// statements name.
    private func openConnection() throws -> PostgreSQLConnection {
        // Never reconnected: a new session would be outside the migration's transaction.
        if let migratingSession { return migratingSession }
        if let connection, connection.isAlive { return connection }
        let made: PostgreSQLConnection
        if let connection {
            try connection.reconnect()
            made = connection
        } else {
            made = try PostgreSQLConnection(url: databaseURL, settings: connectionSettings, tracer: tracer)
            // A save whose COMMIT loses its answer is resolved, not reported as failed when it committed.
            made.verifiesCommits = true
            connection = made
        }
        guard isLoaded else { return made }
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

    private var isLoaded: Bool { stateLock.withLock { state.layout != nil } }

    /// A connection error as the store error a coordinator's caller expects.
    ///
    /// A server that cannot be reached once the store is open is an outage
    /// (`.ioFailure`), not a store that cannot be opened (`.cannotOpen`, as
    /// when adding it): the save or read that met it can be tried again.
    ///
    /// A lost or failed connection names the server (`PostgreSQL server at
    /// 10.0.0.2:5432: …`): libpq's message for a connection lost mid-statement does not.
    func storeError(_ error: PostgreSQLError) -> PersistentStoreError {
        Self.storeError(error, url: reportedURL, isOpen: isLoaded)
    }

    static func storeError(_ error: PostgreSQLError, url: URL, isOpen: Bool = false) -> PersistentStoreError {
        let code: PersistentStoreError.Code
        switch error.kind {
        case .connectionFailed: code = isOpen ? .ioFailure : .cannotOpen
        case .serializationFailure: code = .busy
        default: code = .ioFailure
        }
        let isConnection = error.kind == .connectionFailed || error.kind == .connectionLost
        let head = isConnection ? "PostgreSQL server \(server(of: url))" : "PostgreSQL"
        return PersistentStoreError(code, url: url, message: "\(head): \(error)", underlying: error)
    }

    /// The server a URL names, as messages say it: `at 10.0.0.2:5432`, `on socket /run/postgresql/.s.PGSQL.5432`.
    static func server(of url: URL) -> String {
        let parameters = PostgreSQLConnection.parsedParameters(url.absoluteString)
        let host = parameters["host"] ?? parameters["hostaddr"] ?? ""
        let port = parameters["port"] ?? "5432"
        if host.isEmpty { return "on the default socket (port \(port))" }
        if host.hasPrefix("/") || host.hasPrefix("@") { return "on socket \(host)/.s.PGSQL.\(port)" }
        return "at \(host):\(port)"
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
