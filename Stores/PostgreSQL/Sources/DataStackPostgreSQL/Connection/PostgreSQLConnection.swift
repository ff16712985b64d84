import CLibPQ
import Foundation

/// One session with a PostgreSQL server, over libpq, with synchronous calls.
///
/// ```swift
/// let connection = try PostgreSQLConnection(url: URL(string: "postgresql://app@/shop?host=%2Fvar%2Frun%2Fpostgresql")!)
/// try connection.executeScript("CREATE TABLE IF NOT EXISTS item (id int8 PRIMARY KEY, name text)")
/// try connection.transaction {
///     try connection.execute(cached: "INSERT INTO item VALUES ($1, $2)", [PostgreSQLValue(1), .text("pen")])
/// }
/// let names = try connection.execute("SELECT name FROM item")
/// ```
///
/// Every call blocks until the server answers, which is what the store contract's
/// synchronous `execute` needs.
///
/// ## Thread safety
///
/// A connection is **not** thread-safe: libpq allows one thread at a time per PGconn.
/// Callers serialize access (the store uses each connection under a lock or on a serial
/// queue). It is `Sendable` so it can be handed to that lock or queue.
///
/// ## Topics
///
/// ### Opening and closing
/// - ``init(url:settings:preparedStatementCacheCapacity:)``
/// - ``init(conninfo:settings:preparedStatementCacheCapacity:)``
/// - ``PostgreSQLConnectionSettings``
/// - ``isConnected``
/// - ``isAlive``
/// - ``ping(timeout:)``
/// - ``server``
/// - ``parameters``
/// - ``reconnect()``
/// - ``close()``
/// - ``serverProcessID``
///
/// ### Statements
/// - ``execute(_:_:)``
/// - ``execute(cached:_:)``
/// - ``executeScript(_:)``
/// - ``transaction(_:)``
///
/// ### Tracing
/// - ``traceStatements(_:)``
///
/// ### Notifications
/// - ``listen(_:)``
/// - ``notify(_:payload:)``
/// - ``notifications(waitingUpTo:)``
///
/// ### Bulk loading
/// - ``copy(into:columns:rows:)``
// @unchecked Sendable: all mutable state (the PGconn, the statement cache, the listened
// channels) is touched by one caller at a time; callers serialize access (see above).
public final class PostgreSQLConnection: @unchecked Sendable {
    // MARK: - Internal properties

    /// The libpq connection; nil once closed.  // protected by the caller's serialization
    var connection: OpaquePointer?
    /// Statements prepared on this session by `execute(cached:)`.  // protected by the caller's serialization
    var statementCache: PreparedStatementCache
    /// Channels LISTENed to, so `reconnect()` can listen again.  // protected by the caller's serialization
    var listenedChannels: [String] = []
    /// How long opening may take, for ``reconnect()`` as for the first time; nil: no limit.
    let connectTimeout: Duration?
    /// What the session was opened with, for a second session that asks how a
    /// transaction whose COMMIT lost its answer ended (PostgreSQLConnection+Transactions.swift).
    let conninfo: String
    let settings: PostgreSQLConnectionSettings
    /// Whether ``transaction(_:)`` learns its transaction ID, so that a COMMIT
    /// whose answer is lost can be resolved rather than reported as failed.  // protected by the caller's serialization
    var verifiesCommits = false
    /// Whether ``transaction(_:)`` inside an open transaction runs as a savepoint
    /// of it instead of throwing: set while the session that migrates a store
    /// is lent to a staged migration's handlers, whose saves belong in the
    /// migration's transaction (PostgreSQLStagedMigration.swift).  // protected by the caller's serialization
    var nestsTransactions = false
    /// How many transactions run as savepoints of an open one (``nestsTransactions``).  // protected by the caller's serialization
    var savepointDepth = 0
    /// The ID of the open transaction, learnt with its `BEGIN` when ``verifiesCommits``,
    /// to settle a COMMIT whose answer is lost; a restart (``restartTransaction()``) learns the new one.  // protected by the caller's serialization
    var transactionID: String?
    /// Set by the connection's owner once it checked what it needs of the session (the
    /// store: the model a standby's copy holds, once the standby has replayed it).  // protected by the caller's serialization
    var isVerified = false
    /// Where the session reports its statements (``traceStatements(_:)``): its own,
    /// or its store's, shared by every session of the store.
    let tracer: StatementTracer

    // MARK: - Opening

    /// Opens a connection from a `postgresql://` URL.
    ///
    /// The URL goes to libpq as is, so everything libpq's URI syntax allows works,
    /// including a Unix socket folder in the query: `postgresql://user@/db?host=%2Ftmp%2Fpg`,
    /// and parameters such as `connect_timeout` and `keepalives_idle`.
    ///
    /// - Parameter settings: the connect timeout and keepalives, where the URL does not
    ///   give them (``PostgreSQLConnectionSettings``). The default changes nothing.
    /// - Parameter preparedStatementCacheCapacity: how many statements ``execute(cached:_:)``
    ///   keeps prepared. The default is 256.
    /// - Throws: ``PostgreSQLError`` of kind ``PostgreSQLError/Kind/connectionFailed``.
    ///
    /// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING>
    public convenience init(url: URL, settings: PostgreSQLConnectionSettings = PostgreSQLConnectionSettings(),
                            preparedStatementCacheCapacity: Int = 256) throws {
        try self.init(conninfo: url.absoluteString, settings: settings, preparedStatementCacheCapacity: preparedStatementCacheCapacity)
    }

    /// Opens a connection from a libpq connection string (`"host=/tmp dbname=shop"`) or URI.
    ///
    /// The session always uses UTF-8 as its client encoding, whatever the string says,
    /// because ``PostgreSQLResult`` decodes text as UTF-8. Over TCP, the server's end of
    /// the session gets the keepalives the client's end has (``PostgreSQLConnectionSettings/keepAliveTimeout``).
    ///
    /// - Parameter settings: the connect timeout and keepalives, where the string does not
    ///   give them. The default changes nothing.
    /// - Parameter preparedStatementCacheCapacity: how many statements ``execute(cached:_:)``
    ///   keeps prepared. The default is 256.
    /// - Throws: ``PostgreSQLError`` of kind ``PostgreSQLError/Kind/connectionFailed``.
    public convenience init(conninfo: String, settings: PostgreSQLConnectionSettings = PostgreSQLConnectionSettings(),
                            preparedStatementCacheCapacity: Int = 256) throws {
        try self.init(conninfo: conninfo, settings: settings, preparedStatementCacheCapacity: preparedStatementCacheCapacity,
                      tracer: StatementTracer())
    }

    /// A session of a store: it reports its statements, from the first, to the store's `tracer`.
    convenience init(url: URL, settings: PostgreSQLConnectionSettings, tracer: StatementTracer) throws {
        try self.init(conninfo: url.absoluteString, settings: settings, preparedStatementCacheCapacity: 256, tracer: tracer)
    }

    init(conninfo: String, settings: PostgreSQLConnectionSettings, preparedStatementCacheCapacity: Int,
         tracer: StatementTracer) throws {
        statementCache = PreparedStatementCache(capacity: max(1, preparedStatementCacheCapacity))
        self.tracer = tracer
        let (connection, timeout) = try Self.open(conninfo: conninfo, settings: settings, tracer: tracer)
        self.connection = connection
        self.connectTimeout = timeout
        self.conninfo = conninfo
        self.settings = settings
        // Notices (for example "relation already exists, skipping" from CREATE TABLE IF
        // NOT EXISTS) would otherwise go to stderr; nothing here acts on them.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit {
        close()
    }

    // MARK: - State

    /// Whether the connection is open and usable (PQstatus is CONNECTION_OK).
    ///
    /// libpq notices a broken connection only when it next talks to the server, so
    /// this can be true for a connection whose server just died.
    public var isConnected: Bool {
        guard let connection else { return false }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// The process ID of the server backend serving this session (PQbackendPID);
    /// 0 when closed. Notifications carry the sender's process ID.
    public var serverProcessID: Int32 {
        guard let connection else { return 0 }
        return PQbackendPID(connection)
    }

    /// Opens the session again with the same parameters and connect timeout
    /// (PQresetStart), for example after ``PostgreSQLError/Kind/connectionLost``.
    ///
    /// Session state does not survive: prepared statements are forgotten (and will be
    /// prepared again on use), an open transaction is gone, and channels passed to
    /// ``listen(_:)`` are listened to again.
    ///
    /// - Throws: ``PostgreSQLError`` of kind ``PostgreSQLError/Kind/connectionFailed``
    ///   when the server still cannot be reached, or when the connection was closed.
    public func reconnect() throws {
        guard let connection else {
            throw PostgreSQLError(kind: .connectionFailed, message: "the connection was closed; open a new one")
        }
        statementCache.removeAll()
        guard PQresetStart(connection) == 1 else {
            throw PostgreSQLError(connection: connection, kind: .connectionFailed)
        }
        try Self.waitUntilConnected(connection, within: connectTimeout) { PQresetPoll($0) }
        try Self.applyServerKeepAlives(connection, tracer: tracer)
        for channel in listenedChannels {
            try executeListen(channel)
        }
    }

    /// Closes the session (PQfinish). Closing twice does nothing; later calls throw
    /// ``PostgreSQLError/Kind/connectionLost``. Also done when the connection is deinitialized.
    public func close() {
        guard let connection else { return }
        PQfinish(connection)
        self.connection = nil
        statementCache.removeAll()
    }

    // MARK: - Internal helpers

    /// The open PGconn, or an error saying the connection was closed.
    func openConnection(sql: String? = nil) throws -> OpaquePointer {
        guard let connection else {
            throw PostgreSQLError(kind: .connectionLost, message: "the connection was closed", sql: sql)
        }
        return connection
    }

    /// Calls `body` with a NULL-terminated array of C strings that live during the call.
    static func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        var storage: [CChar] = []
        var offsets: [Int] = []
        for string in strings {
            offsets.append(storage.count)
            storage.append(contentsOf: string.utf8CString)
        }
        return storage.withUnsafeBufferPointer { buffer in
            var pointers: [UnsafePointer<CChar>?] = offsets.map { buffer.baseAddress! + $0 }
            pointers.append(nil)
            return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
        }
    }
}
