@_spi(DataStackInternal) import DataStackSQLite
import Foundation

/// The global IDs a replica's store file gives its rows, read from its sync
/// tables without opening the store — so a tool can name objects as every
/// replica names them (`datastack dump FILE --global-ids`), while the app runs.
///
/// Local primary keys differ from replica to replica by design (each store
/// numbers its own rows); global IDs are the same everywhere. A dump by global
/// IDs of two converged replicas is therefore the same text.
public final class SyncGlobalIDs {
    private let connection: Connection
    private let path: String

    /// Opens the sync tables of the store at `url` read-only; nil for a store
    /// that never synced (it has no sync tables).
    ///
    /// - Throws: ``SyncError`` `.localFailure` naming the file when it cannot be read.
    public init?(storeAt url: URL) throws(SyncError) {
        path = url.path
        do {
            var configuration = Connection.Configuration()
            configuration.isReadOnly = true
            connection = try Connection(path: url.path, configuration: configuration)
            let tables = try connection.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'DATASTACK_SYNC_OBJECT'")
            _ = try tables.step()
            guard tables.int64(at: 0) == 1 else { return nil }
        } catch {
            throw SyncError(.localFailure, message: "\(url.path): the sync tables cannot be read: \(error)")
        }
    }

    /// The global ID of the row `primaryKey` of `entity` (the object's own
    /// entity, not its root), nil when the row has none — it was saved after
    /// the replica last recorded its changes.
    ///
    /// - Throws: ``SyncError`` `.localFailure` when the tables cannot be read
    ///   or hold a global ID that is not 16 bytes.
    public func globalID(entity: String, primaryKey: Int64) throws(SyncError) -> UUID? {
        try reading("the global ID of \(entity) p\(primaryKey)") {
            let statement = try connection.cachedStatement("SELECT GLOBALID FROM DATASTACK_SYNC_OBJECT WHERE ENTITY = ?1 AND PK = ?2")
            defer { statement.reset() }
            try statement.bind(entity, at: 1)
            try statement.bind(primaryKey, at: 2)
            guard try statement.step() else { return nil }
            return try globalID(statement, column: 0)
        }
    }

    /// How many rows of `entity` have a global ID.
    public func count(of entity: String) throws(SyncError) -> Int {
        try reading("the global IDs of \(entity)") {
            let statement = try connection.cachedStatement("SELECT count(*) FROM DATASTACK_SYNC_OBJECT WHERE ENTITY = ?1 AND PK IS NOT NULL")
            defer { statement.reset() }
            try statement.bind(entity, at: 1)
            _ = try statement.step()
            return Int(statement.int64(at: 0))
        }
    }

    /// The rows of `entity` in the order of their global IDs (as bytes, which
    /// is also the order of their `uuidString`s), at most `limit`, after `globalID`.
    public func rows(of entity: String, after globalID: UUID?, limit: Int) throws(SyncError) -> [(globalID: UUID, primaryKey: Int64)] {
        try reading("the global IDs of \(entity)") {
            let statement = try connection.cachedStatement("""
                SELECT GLOBALID, PK FROM DATASTACK_SYNC_OBJECT WHERE ENTITY = ?1 AND PK IS NOT NULL AND GLOBALID > ?2
                ORDER BY GLOBALID LIMIT ?3
                """)
            defer { statement.reset() }
            try statement.bind(entity, at: 1)
            try statement.bind(globalID.map(SyncLedger.bytes) ?? [], at: 2)
            try statement.bind(Int64(limit), at: 3)
            var rows: [(globalID: UUID, primaryKey: Int64)] = []
            while try statement.step() {
                rows.append((try self.globalID(statement, column: 0), statement.int64(at: 1)))
            }
            return rows
        }
    }

    private func globalID(_ statement: Statement, column: Int32) throws -> UUID {
        guard let data = statement.data(at: column), let id = SyncLedger.uuid(data) else {
            throw SyncError(.localFailure, message: "\(path): a global ID in DATASTACK_SYNC_OBJECT is not 16 bytes")
        }
        return id
    }

    private func reading<T>(_ what: String, _ body: () throws -> T) throws(SyncError) -> T {
        do {
            return try connection.inReadTransaction(body)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.localFailure, message: "\(path): cannot read \(what): \(error)")
        }
    }
}
