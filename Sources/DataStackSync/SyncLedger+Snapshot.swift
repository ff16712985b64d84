@_spi(DataStackInternal) import DataStackSQLite
import Foundation

// MARK: - Reading the ledger for a snapshot, writing it from one

// A snapshot (SyncSnapshot.swift) is the ledger's view of the hub's log:
// each object's confirmed state, alias, numbers and unique keys. These read
// it a page of objects at a time, in the order of their IDs' bytes (the
// order PostgreSQL gives a uuid), and keep the key index in step after a re-seed.
extension SyncLedger {
    /// Up to `limit` objects after `globalID` (nil: from the first), in the order of their IDs' bytes.
    func objects(after globalID: UUID?, limit: Int) throws -> [(id: UUID, entity: String, primaryKey: Int64?, state: SyncObjectState?)] {
        let statement = try connection.cachedStatement("""
            SELECT GLOBALID, ENTITY, PK, STATE FROM DATASTACK_SYNC_OBJECT WHERE ?1 IS NULL OR GLOBALID > ?1 ORDER BY GLOBALID LIMIT ?2
            """)
        defer { statement.reset() }
        if let globalID { try statement.bind(Self.bytes(globalID), at: 1) } else { try statement.bindNull(at: 1) }
        try statement.bind(Int64(limit), at: 2)
        var objects: [(id: UUID, entity: String, primaryKey: Int64?, state: SyncObjectState?)] = []
        while try statement.step() {
            guard let data = statement.data(at: 0), let id = Self.uuid(data), let entity = statement.string(at: 1) else {
                throw SyncError(.localFailure, message: "the sync ledger holds an object row without a 16-byte global ID or an entity")
            }
            let primaryKey = statement.isNull(at: 2) ? nil : statement.int64(at: 2)
            let state = try statement.data(at: 3).map { data throws(SyncError) in try SyncObjectState(encoded: Array(data)) }
            objects.append((id, entity, primaryKey, state))
        }
        return objects
    }

    /// The object `globalID` was merged into directly, nil when it was not.
    func alias(of globalID: UUID) throws -> UUID? {
        let statement = try connection.cachedStatement("SELECT SURVIVOR FROM DATASTACK_SYNC_ALIAS WHERE GLOBALID = ?1")
        defer { statement.reset() }
        try statement.bind(Self.bytes(globalID), at: 1)
        guard try statement.step(), let data = statement.data(at: 0) else { return nil }
        return Self.uuid(data)
    }

    /// The numbers of `globalID` (hub sequences of its inserts) up to `sequence`.
    func numbers(of globalID: UUID, through sequence: Int64) throws -> [Int64] {
        let statement = try connection.cachedStatement(
            "SELECT NUMBER FROM DATASTACK_SYNC_NUMBER WHERE GLOBALID = ?1 AND NUMBER <= ?2 ORDER BY NUMBER")
        defer { statement.reset() }
        try statement.bind(Self.bytes(globalID), at: 1)
        try statement.bind(sequence, at: 2)
        var numbers: [Int64] = []
        while try statement.step() { numbers.append(statement.int64(at: 0)) }
        return numbers
    }

    /// The unique keys `globalID` holds in the hub's order.
    func keys(heldBy globalID: UUID) throws -> [String] {
        let statement = try connection.cachedStatement("SELECT KEY FROM DATASTACK_SYNC_KEY WHERE GLOBALID = ?1 ORDER BY KEY")
        defer { statement.reset() }
        try statement.bind(Self.bytes(globalID), at: 1)
        var keys: [String] = []
        while try statement.step() { if let key = statement.string(at: 0) { keys.append(key) } }
        return keys
    }

    /// Frees every unique key not in `kept` (a re-seed: the snapshot says who holds what).
    func removeKeys(except kept: Set<String>) throws {
        let statement = try connection.cachedStatement("SELECT KEY FROM DATASTACK_SYNC_KEY")
        var stale: [String] = []
        do {
            defer { statement.reset() }
            while try statement.step() {
                if let key = statement.string(at: 0), !kept.contains(key) { stale.append(key) }
            }
        }
        for key in stale { try setKeyHolder(nil, for: key) }
    }
}
