import DataStackPostgreSQL
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The peer's hub: a ``PostgreSQLSyncHub`` opened on first use (a peer may
/// start while its link is cut), with fault injection for the crash tests.
///
/// With `DATASTACK_SYNC_PEER_KILL_AFTER_PUSH=N`, the process kills itself with
/// SIGKILL right after the Nth push returned — the hub holds the changes, the
/// engine has not yet recorded that it does. With
/// `DATASTACK_SYNC_PEER_KILL_AFTER_PULL=N`, right after the Nth pull that
/// returned changes — before the engine applied them. Either way it first
/// writes `{"sync":"killing after push"}` (or pull), so the test knows the
/// kill came where it meant it to.
final class SyncPeerHub: SyncHub {
    private let url: URL
    private let killAfterPush: Int?
    private let killAfterPull: Int?
    private let hub = Mutex<PostgreSQLSyncHub?>(nil)   // opened on first use
    private let counts = Mutex((pushes: 0, pulls: 0))

    private let connection: PostgreSQLConnectionSettings

    /// A hub on `url`; `connection` bounds connecting and a dead link (the peer's
    /// `--connect-timeout-ms` and `--keepalive-s`; by default 2 s and 30 s).
    init(url: URL, connection: PostgreSQLConnectionSettings = PostgreSQLConnectionSettings(connectTimeout: .seconds(2), keepAliveTimeout: .seconds(30)),
         environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.url = url
        self.connection = connection
        killAfterPush = environment["DATASTACK_SYNC_PEER_KILL_AFTER_PUSH"].flatMap(Int.init)
        killAfterPull = environment["DATASTACK_SYNC_PEER_KILL_AFTER_PULL"].flatMap(Int.init)
    }

    /// The real hub, opened now if it is not yet (throws `.offline` while the link is cut).
    private func opened() throws -> PostgreSQLSyncHub {
        try hub.withLock { slot in
            if let slot { return slot }
            var options = PostgreSQLSyncHubOptions()
            options.connection = connection
            let opened = try PostgreSQLSyncHub(url: url, options: options)
            slot = opened
            return opened
        }
    }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration {
        try opened().register(replica: replica, modelVersion: modelVersion)
    }

    func push(_ changes: [SyncChange]) throws -> [Int64] {
        try push(changes, encodedBy: .modelFree)
    }

    func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        let sequences = try opened().push(changes, encodedBy: codec)
        let count = counts.withLock { $0.pushes += 1; return $0.pushes }
        if count == killAfterPush { die("push") }
        return sequences
    }

    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try pull(after: sequence, limit: limit, decodedBy: .modelFree)
    }

    func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        let changes = try opened().pull(after: sequence, limit: limit, decodedBy: codec)
        if !changes.isEmpty {
            let count = counts.withLock { $0.pulls += 1; return $0.pulls }
            if count == killAfterPull { die("pull") }
        }
        return changes
    }

    func acknowledge(replica: UUID, through sequence: Int64) throws {
        try opened().acknowledge(replica: replica, through: sequence)
    }

    func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        try opened().putSnapshotPage(objects, through: sequence, publisher: publisher)
    }

    func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool {
        try opened().commitSnapshot(through: sequence, publisher: publisher)
    }

    func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        try opened().snapshotPage(after: objectID, limit: limit)
    }

    private func die(_ after: String) -> Never {
        SyncPeerOutput.write(SyncPeerOutput.Synced(sync: "killing after \(after)"))
        kill(getpid(), SIGKILL)
        // SIGKILL cannot be caught; this line is never reached.
        exit(137)
    }
}
