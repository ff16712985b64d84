import DataStackPostgreSQL
import DataStackSync
import Foundation
import Synchronization

/// A ``DataStackSync/SyncHub`` on a PostgreSQL database: the one log of
/// changes that offline replicas (local SQLite stacks) push to and pull from.
///
/// ```swift
/// let hub = try PostgreSQLSyncHub(url: URL(string: "postgresql://sync@hub.example.com/shop")!)
/// let registration = try hub.register(replica: replicaID, modelVersion: "shop-7")
/// let sequences = try hub.push(localChanges)              // one transaction, in order
/// let page = try hub.pull(after: lastApplied, limit: 500)
/// try hub.acknowledge(replica: replicaID, through: page.last?.sequence ?? lastApplied)
/// if try hub.waitForChanges(after: lastApplied, timeout: .seconds(30)) { /* pull again */ }
/// ```
///
/// The hub keeps three tables in the database, which it creates when they are
/// missing (``init(url:options:)``): `datastack_sync_meta` (the model version,
/// the last sequence given and the oldest still kept), `datastack_sync_chunk`
/// (the changes, a row per pushed chunk, ``DataStackSync/SyncCodec``)
/// and `datastack_sync_replicas` (what each replica acknowledged and pushed).
///
/// Every call blocks until the server answers and throws
/// ``DataStackSync/SyncError``: `.offline` when the server cannot be reached
/// (the cause in its message; the next call connects again), `.hubFailure`
/// naming the SQL for any other server error.
///
/// ## Thread safety
///
/// A hub may be shared by threads: its calls take turns on one session, except
/// ``waitForChanges(after:timeout:)``, which waits on a session of its own so
/// that pushes and pulls go on meanwhile.
///
/// ## Topics
///
/// ### Opening
/// - ``init(url:options:)``
/// - ``PostgreSQLSyncHubOptions``
///
/// ### The SyncHub contract
/// - ``register(replica:modelVersion:)``
/// - ``push(_:)``
/// - ``push(_:encodedBy:)``
/// - ``pull(after:limit:)``
/// - ``pull(after:limit:decodedBy:)``
/// - ``acknowledge(replica:through:)``
///
/// ### Beyond the contract
/// - ``purge()``
/// - ``waitForChanges(after:timeout:)``
public final class PostgreSQLSyncHub: SyncHub {
    /// What the hub was opened with.
    public let options: PostgreSQLSyncHubOptions

    // MARK: - Internal properties

    let url: URL
    /// The URL without its password, for error messages.
    let reportedURL: String
    /// The session of push, pull, register, acknowledge and purge, one call at a
    /// time; nil after a connection failure, until the next call opens a new one.
    let session: Mutex<PostgreSQLConnection?>  // protected by itself
    /// The session ``waitForChanges(after:timeout:)`` listens on, opened on its
    /// first call; nil after a connection failure.
    let listener: Mutex<PostgreSQLConnection?>  // protected by itself

    // MARK: - Opening

    /// Connects to the hub's database and creates the hub's tables if they are
    /// missing.
    ///
    /// Creating is idempotent and safe when several replicas start at once: it
    /// runs in one transaction holding an advisory lock, so one of them creates
    /// the tables and the others find them (`CREATE TABLE IF NOT EXISTS` alone
    /// can fail on a concurrent creation of the same table).
    ///
    /// - Parameter url: a `postgresql://` URL, given to libpq as is.
    /// - Throws: ``DataStackSync/SyncError``: `.offline` when the server cannot be
    ///   reached (within ``PostgreSQLSyncHubOptions/connection``'s connect timeout);
    ///   `.hubFailure` when the tables cannot be created (for example, no rights).
    public init(url: URL, options: PostgreSQLSyncHubOptions = PostgreSQLSyncHubOptions()) throws {
        self.url = url
        self.options = options
        self.reportedURL = Self.withoutPassword(url)
        self.session = Mutex(nil)
        self.listener = Mutex(nil)
        try withSession("creating the hub's tables") { connection in
            try Self.createTables(connection, reportedURL: reportedURL)
        }
    }

    deinit {
        session.withLock { $0?.close() }
        listener.withLock { $0?.close() }
    }

    // MARK: - Sessions

    /// Runs `body` on the hub's session, opening one first if there is none,
    /// and maps what it throws to a ``DataStackSync/SyncError`` (`what` says what
    /// the hub was doing). After a connection failure the session is dropped, so
    /// the next call connects again: the engine's retry finds a hub that is back.
    func withSession<T: Sendable>(_ what: String, _ body: (PostgreSQLConnection) throws -> T) throws -> T {
        do {
            return try session.withLock { slot throws -> T in
                let connection = try slot ?? openSession(applicationName: "datastack_sync")
                slot = connection
                do {
                    return try body(connection)
                } catch let error as PostgreSQLError where Self.isConnectionFailure(error) {
                    connection.close()
                    slot = nil
                    throw error
                }
            }
        } catch {
            throw syncError(error, while: what)
        }
    }

    /// A new session, named (`application_name`) so that the server's
    /// `pg_stat_activity` tells the hub's sessions apart, with the push lock's timeout.
    func openSession(applicationName: String) throws -> PostgreSQLConnection {
        let connection = try PostgreSQLConnection(url: url, settings: options.connection)
        do {
            let timeout = options.lockTimeout.map(Self.milliseconds) ?? 0
            try connection.executeScript("SET application_name = '\(applicationName)'; SET lock_timeout = \(timeout)")
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    /// Whole milliseconds, at least 1: PostgreSQL reads a `lock_timeout` of 0 as
    /// "no limit", the opposite of what a zero duration asks.
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let millis = seconds.multipliedReportingOverflow(by: 1000)
        return millis.overflow ? .max : max(1, millis.partialValue + attoseconds / 1_000_000_000_000_000)
    }

    /// The URL as it may appear in a message: without its password.
    static func withoutPassword(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.password != nil else {
            return url.absoluteString
        }
        components.password = "***"
        return components.string ?? "the hub"
    }
}
