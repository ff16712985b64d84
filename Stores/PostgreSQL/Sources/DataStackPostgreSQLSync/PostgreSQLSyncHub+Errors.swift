import DataStackPostgreSQL
import DataStackSync

// MARK: - Mapping errors to SyncError

extension PostgreSQLSyncHub {
    /// Whether the session is gone: the server cannot be reached, or went away
    /// (shut down, restarted, the link broke).
    static func isConnectionFailure(_ error: PostgreSQLError) -> Bool {
        error.kind == .connectionFailed || error.kind == .connectionLost
    }

    /// SQLSTATE of `lock_not_available`: a push waited longer than ``PostgreSQLSyncHubOptions/lockTimeout``.
    static let lockNotAvailable = "55P03"

    /// What the engine is told of `error`, thrown while the hub was doing `what`.
    ///
    /// - A ``DataStackSync/SyncError`` the hub threw itself passes unchanged.
    /// - A connection failure is `.offline` (transient): the engine keeps its
    ///   changes and tries again later. A push whose COMMIT lost its answer is
    ///   one of them: it may have committed or not, and pushing the same changes
    ///   again is safe either way, because a push is idempotent.
    /// - A push that waited too long for the pushes ahead of it is `.offline`
    ///   too: the hub is busy, not broken, and a later try succeeds.
    /// - Any other error is `.hubFailure`, with the server's message and SQL
    ///   (``DataStackPostgreSQL/PostgreSQLError``'s description never holds the
    ///   values bound to the statement, which are replicas' data).
    func syncError(_ error: any Error, while what: String) -> SyncError {
        switch error {
        case let error as SyncError:
            return error
        case let error as PostgreSQLError where Self.isConnectionFailure(error):
            return SyncError(.offline, message: "the sync hub at \(reportedURL) cannot be reached (\(what)): \(error)")
        case let error as PostgreSQLError where error.code == Self.lockNotAvailable:
            let waited = options.lockTimeout.map { "\($0)" } ?? "its lock timeout"
            return SyncError(.offline, message: """
                the sync hub at \(reportedURL) is busy (\(what)): other pushes held the push lock for longer than \(waited): \(error)
                """)
        default:
            return SyncError(.hubFailure, message: "the sync hub at \(reportedURL) failed \(what): \(error)")
        }
    }
}
