@_spi(DataStackInternal) import DataStackSQLite
import Foundation

/// What a store file's sync tables say about the replica it is: its ID, how
/// far it has pushed and pulled, and what waits to be pushed — read without
/// opening the store, so a tool can ask while the app runs
/// (`datastack sync-status FILE`).
public struct SyncReplicaSummary: Sendable, Hashable, Codable {
    /// The replica's ID.
    public var replica: UUID
    /// The last local history transaction read into changes.
    public var scannedTransaction: Int64
    /// The last hub sequence pulled and applied.
    public var pulledSequence: Int64
    /// Local changes recorded so far (the last local sequence).
    public var recordedChanges: Int64
    /// Local changes not yet on the hub.
    public var pendingChanges: Int
    /// Objects with a global ID, here or deleted here.
    public var objects: Int
    /// Of those, deleted here (or not made here yet).
    public var objectsWithoutRow: Int
    /// The replica's hybrid clock when it last recorded, in milliseconds since 1970.
    public var clockMilliseconds: Int64

    /// Reads the summary of the store at `url`; nil for a store that never synced.
    ///
    /// - Throws: ``SyncError`` `.localFailure` naming the file when it cannot be read.
    public static func read(storeAt url: URL) throws(SyncError) -> SyncReplicaSummary? {
        do {
            var configuration = Connection.Configuration()
            configuration.isReadOnly = true
            let connection = try Connection(path: url.path, configuration: configuration)
            return try connection.inReadTransaction { () throws -> SyncReplicaSummary? in
                let tables = try connection.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'DATASTACK_SYNC_STATE'")
                _ = try tables.step()
                guard tables.int64(at: 0) == 1 else { return nil }
                func value(_ key: String) throws -> Int64 {
                    let statement = try connection.prepare("SELECT VALUE FROM DATASTACK_SYNC_STATE WHERE KEY = ?1")
                    try statement.bind(key, at: 1)
                    return try statement.step() && !statement.isNull(at: 0) ? statement.int64(at: 0) : 0
                }
                func count(_ sql: String) throws -> Int {
                    let statement = try connection.prepare(sql)
                    _ = try statement.step()
                    return Int(statement.int64(at: 0))
                }
                let replicaStatement = try connection.prepare("SELECT VALUE FROM DATASTACK_SYNC_STATE WHERE KEY = 'replica'")
                guard try replicaStatement.step(), let text = replicaStatement.string(at: 0), let replica = UUID(uuidString: text) else {
                    throw SyncError(.localFailure, message: "\(url.path): the sync tables hold no replica ID")
                }
                return SyncReplicaSummary(
                    replica: replica, scannedTransaction: try value("scanned"), pulledSequence: try value("pulled"),
                    recordedChanges: try value("localSequence"),
                    pendingChanges: try count("SELECT count(*) FROM DATASTACK_SYNC_OUTBOX"),
                    objects: try count("SELECT count(*) FROM DATASTACK_SYNC_OBJECT"),
                    objectsWithoutRow: try count("SELECT count(*) FROM DATASTACK_SYNC_OBJECT WHERE PK IS NULL"),
                    clockMilliseconds: try value("clock"))
            }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.localFailure, message: "\(url.path): the sync tables cannot be read: \(error)")
        }
    }
}
