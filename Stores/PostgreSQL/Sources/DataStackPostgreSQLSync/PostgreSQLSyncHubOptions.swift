import DataStackPostgreSQL

/// How a ``PostgreSQLSyncHub`` connects, and how long a push waits for
/// another replica's push before it gives up.
///
/// ```swift
/// var options = PostgreSQLSyncHubOptions()
/// options.connection.connectTimeout = .seconds(2)
/// let hub = try PostgreSQLSyncHub(url: hubURL, options: options)
/// ```
public struct PostgreSQLSyncHubOptions: Sendable, Hashable {
    /// The connect timeout and keepalives of the hub's sessions.
    ///
    /// The default gives up connecting after 5 seconds and counts a silent
    /// link as broken after 30: a replica is offline-first, so it learns soon
    /// that the hub is unreachable (``DataStackSync/SyncError/Code/offline``)
    /// and tries later, instead of hanging for the operating system's two
    /// minutes (connect) or two hours (keepalive).
    public var connection = PostgreSQLConnectionSettings(connectTimeout: .seconds(5), keepAliveTimeout: .seconds(30))

    /// How long a push waits for the pushes ahead of it (pushes take turns,
    /// see ``PostgreSQLSyncHub/push(_:)``) before it throws `.offline`, so
    /// that the engine tries again later. Nil waits as long as it takes; zero
    /// or less gives up at once (after 1 ms). The default is 10 seconds.
    ///
    /// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-LOCK-TIMEOUT>
    public var lockTimeout: Duration? = .seconds(10)

    /// The defaults above.
    public init() {}
}
