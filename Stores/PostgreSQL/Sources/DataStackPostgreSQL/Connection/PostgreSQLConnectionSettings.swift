/// How a ``PostgreSQLConnection`` connects, and how soon it gives up on a
/// server it can no longer hear: what a connection over a real network needs
/// beyond the URL.
///
/// ```swift
/// let settings = PostgreSQLConnectionSettings(connectTimeout: .seconds(3), keepAliveTimeout: .seconds(10))
/// let connection = try PostgreSQLConnection(url: url, settings: settings)
/// ```
///
/// The same libpq parameters in the URL or connection string win over these:
/// `connect_timeout` over ``connectTimeout``; `keepalives`, `keepalives_idle`,
/// `keepalives_interval`, `keepalives_count` and `tcp_user_timeout` over
/// ``keepAliveTimeout``. A URL says what one database needs; these say what an
/// application wants of every connection.
///
/// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS>
public struct PostgreSQLConnectionSettings: Sendable, Hashable {
    /// The longest a connection may take to open: name lookup, TCP handshake,
    /// TLS and login, over every host the URL names together. Counted by this
    /// layer to the millisecond (libpq's own `connect_timeout` counts whole
    /// seconds, at least 2, per host), so a caller can retry often. A
    /// `connect_timeout` in the URL, in seconds, replaces it. Nil waits as
    /// long as the operating system does (a dropped SYN: about two minutes).
    public var connectTimeout: Duration?

    /// How long a connection may go without hearing from the other end before
    /// it counts as broken: the TCP keepalive settings and `tcp_user_timeout`
    /// of the client, and the same settings of the server's end of the session
    /// (`SET tcp_keepalives_idle …`), so that a server whose client vanished
    /// (a partitioned link) ends the session — rolls back its transaction,
    /// releases its locks — after about as long. Whole seconds, at least 2.
    /// Ignored on a Unix socket, where nothing is lost in between. Nil keeps
    /// the operating system's keepalive settings (two hours).
    public var keepAliveTimeout: Duration?

    /// Settings that change nothing: libpq's defaults.
    public init(connectTimeout: Duration? = nil, keepAliveTimeout: Duration? = nil) {
        self.connectTimeout = connectTimeout
        self.keepAliveTimeout = keepAliveTimeout
    }

    /// The keepalive parameters ``keepAliveTimeout`` comes to: the first probe
    /// after half the time, then probes a quarter apart, so that the last one
    /// goes unanswered when the time is up.
    var keepAliveParameters: [(keyword: String, value: String)] {
        guard let timeout = keepAliveTimeout else { return [] }
        let seconds = max(2, Int(timeout.components.seconds))
        let idle = max(1, seconds / 2)
        let interval = max(1, seconds / 4)
        let count = max(1, (seconds - idle) / interval)
        return [("keepalives", "1"), ("keepalives_idle", "\(idle)"), ("keepalives_interval", "\(interval)"),
                ("keepalives_count", "\(count)"), ("tcp_user_timeout", "\(seconds * 1000)")]
    }
}
