import DataStackSync
import Foundation

extension PostgreSQLSyncHub {
    /// The URL schemes ``register()`` makes PostgreSQL's, as libpq takes both.
    public static let urlSchemes = ["postgresql", "postgres"]

    /// Makes `postgresql://` and `postgres://` hub URLs open a
    /// ``PostgreSQLSyncHub`` (``DataStackSync/SyncHubs``), with the default
    /// ``PostgreSQLSyncHubOptions``, so that an app taking a hub URL from its
    /// user (`ticker-import-postgresql --sync postgresql://…`) makes one
    /// without naming this type. Registering again changes nothing.
    ///
    /// ```swift
    /// PostgreSQLSyncHub.register()
    /// let hub = try SyncHubs.hub(for: URL(string: "postgresql://localhost/hub")!)
    /// ```
    public static func register() {
        for scheme in urlSchemes {
            SyncHubs.register(scheme: scheme) { url in try PostgreSQLSyncHub(url: url) }
        }
    }
}
