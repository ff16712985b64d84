@_spi(DataStackInternal) import DataStackSQLite
import Foundation

// MARK: - Object numbers

// `DATASTACK_SYNC_NUMBER (NUMBER INTEGER PRIMARY KEY, GLOBALID BLOB NOT NULL)`:
// each hub sequence of an insert this replica pushed or pulled, and the object
// it inserted — the numbers a chunk names objects by (SyncCodec). A number
// names one object on every replica, as every replica learns it from the same
// log; an object inserted twice has two, and encoders use the smaller
// (the index on (GLOBALID, NUMBER) answers that).
extension SyncLedger {
    /// Records that the insert at hub sequence `number` inserted `object`;
    /// recording it again changes nothing.
    func recordNumber(_ number: Int64, of object: UUID) throws {
        let statement = try connection.cachedStatement("INSERT OR IGNORE INTO DATASTACK_SYNC_NUMBER (NUMBER, GLOBALID) VALUES (?1, ?2)")
        try statement.bind(number, at: 1)
        try statement.bind(Self.bytes(object), at: 2)
        try statement.execute()
    }

    /// The smallest number of `object`, nil when none is recorded.
    func number(of object: UUID) throws -> Int64? {
        let statement = try connection.cachedStatement("SELECT min(NUMBER) FROM DATASTACK_SYNC_NUMBER WHERE GLOBALID = ?1")
        defer { statement.reset() }
        try statement.bind(Self.bytes(object), at: 1)
        guard try statement.step(), !statement.isNull(at: 0) else { return nil }
        return statement.int64(at: 0)
    }

    /// The object numbered `number`, nil when the number is not recorded.
    func object(numbered number: Int64) throws -> UUID? {
        let statement = try connection.cachedStatement("SELECT GLOBALID FROM DATASTACK_SYNC_NUMBER WHERE NUMBER = ?1")
        defer { statement.reset() }
        try statement.bind(number, at: 1)
        guard try statement.step() else { return nil }
        // A row whose ID is not 16 bytes is damage, never "unknown" (which would name no object).
        guard let data = statement.data(at: 0), let id = Self.uuid(data) else {
            throw SyncError(.localFailure, message: "the sync ledger's object number \(number) does not hold a 16-byte global ID")
        }
        return id
    }
}

/// The numbering a sync engine's codec reads: its ledger's numbers.
final class LedgerNumbering: SyncObjectNumbering, @unchecked Sendable {
    // @unchecked Sendable: the codec reads it only inside hub calls made by SyncEngine.syncNow,
    // which holds the cycle lock (as every use of the ledger does, LedgerBox).
    private let ledger: LedgerBox

    init(_ ledger: LedgerBox) { self.ledger = ledger }

    func number(of object: UUID) throws(SyncError) -> Int64? {
        do {
            return try ledger.value.number(of: object)
        } catch {
            throw SyncError(.localFailure, message: "the sync ledger failed while reading the number of object \(object): \(error)")
        }
    }

    func object(numbered number: Int64) throws(SyncError) -> UUID? {
        do {
            return try ledger.value.object(numbered: number)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.localFailure, message: "the sync ledger failed while reading object number \(number): \(error)")
        }
    }
}
