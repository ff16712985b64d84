@_spi(DataStackInternal) import DataStackSQLite
import Foundation

/// A replica's sync bookkeeping, in tables of its own in the store's file
/// (as Core Data's CloudKit mirror keeps its record metadata beside the
/// entity tables): the global ID and merge state of each object, the changes
/// not yet pushed, and the bookmarks — the last local history transaction
/// read and the last hub sequence applied.
///
/// Its own connection: a ledger write never holds the store's writer. Each
/// step of the engine writes the ledger in one transaction, after the store
/// save it describes, so a crash between them repeats the step — which the
/// merge makes harmless (a change applied twice is applied once).
final class SyncLedger {
    let connection: Connection

    init(storePath: String) throws(SyncError) {
        do {
            var configuration = Connection.Configuration()
            configuration.createsIfMissing = false
            connection = try Connection(path: storePath, configuration: configuration)
            try connection.inWriteTransaction {
                try connection.execute("""
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_STATE (KEY TEXT PRIMARY KEY, VALUE BLOB);
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_OBJECT (GLOBALID BLOB PRIMARY KEY, ENTITY TEXT NOT NULL,
                        PK INTEGER, STATE BLOB);
                    CREATE UNIQUE INDEX IF NOT EXISTS DATASTACK_SYNC_OBJECT_ROW ON DATASTACK_SYNC_OBJECT (ENTITY, PK);
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_OUTBOX (LOCALSEQ INTEGER PRIMARY KEY, CHANGE BLOB NOT NULL);
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_ALIAS (GLOBALID BLOB PRIMARY KEY, SURVIVOR BLOB NOT NULL);
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_KEY (KEY TEXT PRIMARY KEY, GLOBALID BLOB NOT NULL);
                    CREATE TABLE IF NOT EXISTS DATASTACK_SYNC_NUMBER (NUMBER INTEGER PRIMARY KEY, GLOBALID BLOB NOT NULL);
                    CREATE INDEX IF NOT EXISTS DATASTACK_SYNC_KEY_OBJECT ON DATASTACK_SYNC_KEY (GLOBALID);
                    CREATE INDEX IF NOT EXISTS DATASTACK_SYNC_NUMBER_OBJECT ON DATASTACK_SYNC_NUMBER (GLOBALID, NUMBER);
                    """)
            }
        } catch {
            throw SyncError(.localFailure, message: "the sync tables of \(storePath) cannot be opened: \(error)")
        }
    }

    /// Runs `body` in one write transaction of the ledger.
    func write<T>(_ what: String, _ body: () throws -> T) throws(SyncError) -> T {
        do {
            return try connection.inWriteTransaction(body)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.localFailure, message: "the sync ledger of \(connection.path) failed while \(what): \(error)")
        }
    }

    func read<T>(_ what: String, _ body: () throws -> T) throws(SyncError) -> T {
        do {
            return try connection.inReadTransaction(body)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.localFailure, message: "the sync ledger of \(connection.path) failed while \(what): \(error)")
        }
    }

    // MARK: - Bookmarks

    func integer(_ key: String) throws -> Int64? {
        let statement = try connection.cachedStatement("SELECT VALUE FROM DATASTACK_SYNC_STATE WHERE KEY = ?1")
        defer { statement.reset() }
        try statement.bind(key, at: 1)
        guard try statement.step(), !statement.isNull(at: 0) else { return nil }
        return statement.int64(at: 0)
    }

    func setInteger(_ value: Int64, for key: String) throws {
        let statement = try connection.cachedStatement("INSERT OR REPLACE INTO DATASTACK_SYNC_STATE (KEY, VALUE) VALUES (?1, ?2)")
        try statement.bind(key, at: 1)
        try statement.bind(value, at: 2)
        try statement.execute()
    }

    func removeKey(_ key: String) throws {
        let statement = try connection.cachedStatement("DELETE FROM DATASTACK_SYNC_STATE WHERE KEY = ?1")
        try statement.bind(key, at: 1)
        try statement.execute()
    }

    func uuid(_ key: String) throws -> UUID? {
        let statement = try connection.cachedStatement("SELECT VALUE FROM DATASTACK_SYNC_STATE WHERE KEY = ?1")
        defer { statement.reset() }
        try statement.bind(key, at: 1)
        guard try statement.step(), let text = statement.string(at: 0) else { return nil }
        return UUID(uuidString: text)
    }

    func setUUID(_ value: UUID, for key: String) throws {
        let statement = try connection.cachedStatement("INSERT OR REPLACE INTO DATASTACK_SYNC_STATE (KEY, VALUE) VALUES (?1, ?2)")
        try statement.bind(key, at: 1)
        try statement.bind(value.uuidString, at: 2)
        try statement.execute()
    }

    // MARK: - Objects

    /// The global ID of the row `primaryKey` of `entity`, if it has one.
    func globalID(entity: String, primaryKey: Int64) throws -> UUID? {
        let statement = try connection.cachedStatement("SELECT GLOBALID FROM DATASTACK_SYNC_OBJECT WHERE ENTITY = ?1 AND PK = ?2")
        defer { statement.reset() }
        try statement.bind(entity, at: 1)
        try statement.bind(primaryKey, at: 2)
        guard try statement.step(), let data = statement.data(at: 0) else { return nil }
        return Self.uuid(data)
    }

    /// The entity and row of a global ID, and its merge state.
    func object(_ globalID: UUID) throws -> (entity: String, primaryKey: Int64?, state: SyncObjectState?)? {
        let statement = try connection.cachedStatement("SELECT ENTITY, PK, STATE FROM DATASTACK_SYNC_OBJECT WHERE GLOBALID = ?1")
        defer { statement.reset() }
        try statement.bind(Self.bytes(globalID), at: 1)
        guard try statement.step(), let entity = statement.string(at: 0) else { return nil }
        let primaryKey = statement.isNull(at: 1) ? nil : statement.int64(at: 1)
        let state = try statement.data(at: 2).map { data throws(SyncError) in try SyncObjectState(encoded: Array(data)) }
        return (entity, primaryKey, state)
    }

    /// Records an object's row (nil: none here, e.g. deleted) and merge state.
    func setObject(_ globalID: UUID, entity: String, primaryKey: Int64?, state: SyncObjectState?) throws {
        let statement = try connection.cachedStatement("""
            INSERT INTO DATASTACK_SYNC_OBJECT (GLOBALID, ENTITY, PK, STATE) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT (GLOBALID) DO UPDATE SET ENTITY = excluded.ENTITY, PK = excluded.PK, STATE = excluded.STATE
            """)
        try statement.bind(Self.bytes(globalID), at: 1)
        try statement.bind(entity, at: 2)
        if let primaryKey { try statement.bind(primaryKey, at: 3) } else { try statement.bindNull(at: 3) }
        if let state { try statement.bind(state.encoded(), at: 4) } else { try statement.bindNull(at: 4) }
        try statement.execute()
    }

    // MARK: - Aliases

    /// The object a global ID stands for now: itself, or the survivor it was
    /// merged into when two replicas inserted the same unique key.
    func survivor(of globalID: UUID) throws -> UUID {
        let statement = try connection.cachedStatement("SELECT SURVIVOR FROM DATASTACK_SYNC_ALIAS WHERE GLOBALID = ?1")
        var current = globalID
        // A chain is at most as long as the merges of one key; the bound stops a damaged cycle.
        for _ in 0..<64 {
            defer { statement.reset() }
            try statement.bind(Self.bytes(current), at: 1)
            guard try statement.step(), let data = statement.data(at: 0), let next = Self.uuid(data) else { return current }
            current = next
        }
        throw SyncError(.localFailure, message: "the sync aliases of \(globalID) form a cycle")
    }

    func setAlias(_ globalID: UUID, survivor: UUID) throws {
        let statement = try connection.cachedStatement("INSERT OR REPLACE INTO DATASTACK_SYNC_ALIAS (GLOBALID, SURVIVOR) VALUES (?1, ?2)")
        try statement.bind(Self.bytes(globalID), at: 1)
        try statement.bind(Self.bytes(survivor), at: 2)
        try statement.execute()
    }

    // MARK: - Unique keys

    /// The object that holds a unique key in the hub's order (its insert folded, no delete since).
    func keyHolder(_ key: String) throws -> UUID? {
        let statement = try connection.cachedStatement("SELECT GLOBALID FROM DATASTACK_SYNC_KEY WHERE KEY = ?1")
        defer { statement.reset() }
        try statement.bind(key, at: 1)
        guard try statement.step(), let data = statement.data(at: 0) else { return nil }
        return Self.uuid(data)
    }

    /// Records (or, with nil, frees) the holder of a unique key.
    func setKeyHolder(_ holder: UUID?, for key: String) throws {
        if let holder {
            let statement = try connection.cachedStatement("INSERT OR REPLACE INTO DATASTACK_SYNC_KEY (KEY, GLOBALID) VALUES (?1, ?2)")
            try statement.bind(key, at: 1)
            try statement.bind(Self.bytes(holder), at: 2)
            try statement.execute()
        } else {
            let statement = try connection.cachedStatement("DELETE FROM DATASTACK_SYNC_KEY WHERE KEY = ?1")
            try statement.bind(key, at: 1)
            try statement.execute()
        }
    }

    // MARK: - Outbox

    func appendToOutbox(_ change: SyncChange) throws {
        let statement = try connection.cachedStatement("INSERT OR REPLACE INTO DATASTACK_SYNC_OUTBOX (LOCALSEQ, CHANGE) VALUES (?1, ?2)")
        try statement.bind(change.localSequence, at: 1)
        try statement.bind(change.encoded(), at: 2)
        try statement.execute()
    }

    func outbox(limit: Int) throws -> [SyncChange] {
        let statement = try connection.cachedStatement("SELECT CHANGE FROM DATASTACK_SYNC_OUTBOX ORDER BY LOCALSEQ LIMIT ?1")
        defer { statement.reset() }
        try statement.bind(Int64(limit), at: 1)
        var changes: [SyncChange] = []
        while try statement.step() {
            changes.append(try SyncChange(encoded: Array(statement.data(at: 0) ?? Data())))
        }
        return changes
    }

    func outboxCount() throws -> Int {
        let statement = try connection.cachedStatement("SELECT count(*) FROM DATASTACK_SYNC_OUTBOX")
        defer { statement.reset() }
        _ = try statement.step()
        return Int(statement.int64(at: 0))
    }

    func removeFromOutbox(through localSequence: Int64) throws {
        let statement = try connection.cachedStatement("DELETE FROM DATASTACK_SYNC_OUTBOX WHERE LOCALSEQ <= ?1")
        try statement.bind(localSequence, at: 1)
        try statement.execute()
    }

    static func bytes(_ id: UUID) -> [UInt8] { withUnsafeBytes(of: id.uuid) { Array($0) } }

    static func uuid(_ data: Data) -> UUID? {
        guard data.count == 16 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: data) }
        return UUID(uuid: value)
    }
}
