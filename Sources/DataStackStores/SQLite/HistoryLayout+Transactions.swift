@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Writing transaction rows

extension HistoryLayout {
    /// Inserts one `ATRANSACTION` row stamped now, with the author and context
    /// given and this process's name and bundle, and returns its number.
    static func insertTransaction(author: String?, contextName: String?, connection: Connection, url: URL?) throws -> Int64 {
        let process = ProcessInfo.processInfo.processName
        let bundle = Bundle.main.bundleIdentifier ?? process
        let strings = try [author, bundle, contextName, process].map { try $0.map { try internedString($0, connection: connection, url: url) } }
        let transaction = try SQLiteStore.allocateKeys(1, entity: transactionEntity, connection: connection, url: url)
        let insert = try connection.cachedStatement("""
            INSERT INTO ATRANSACTION (Z_PK, Z_ENT, ZAUTHORTS, ZBUNDLEIDTS, ZCONTEXTNAMETS, ZPROCESSIDTS, ZTIMESTAMP) VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        insert.reset()
        try insert.bind(transaction, at: 1)
        try insert.bind(transactionEntity, at: 2)
        for (offset, key) in strings.enumerated() {
            if let key { try insert.bind(key, at: Int32(offset + 3)) } else { try insert.bindNull(at: Int32(offset + 3)) }
        }
        try insert.bind(Date().timeIntervalSinceReferenceDate, at: 7)
        try insert.execute()
        return transaction
    }

    /// The `ATRANSACTIONSTRING` key of a string, added when it is new: every
    /// author, context, process and bundle name is stored once.
    private static func internedString(_ string: String, connection: Connection, url: URL?) throws -> Int64 {
        let find = try connection.cachedStatement("SELECT Z_PK FROM ATRANSACTIONSTRING WHERE ZNAME = ?")
        find.reset()
        try find.bind(string, at: 1)
        if try find.step() {
            defer { find.reset() }
            return find.int64(at: 0)
        }
        find.reset()
        let key = try SQLiteStore.allocateKeys(1, entity: stringEntity, connection: connection, url: url)
        let insert = try connection.cachedStatement("INSERT INTO ATRANSACTIONSTRING (Z_PK, Z_ENT, ZNAME) VALUES (?, ?, ?)")
        insert.reset()
        try insert.bind(key, at: 1)
        try insert.bind(stringEntity, at: 2)
        try insert.bind(string, at: 3)
        try insert.execute()
        return key
    }

    /// `Z_MAX` of a history entity: the last key handed out (for
    /// `ATRANSACTION`, the number of the store's last transaction).
    static func lastKey(of entity: Int64, _ connection: Connection) throws -> Int64 {
        let statement = try connection.cachedStatement("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?")
        statement.reset()
        defer { statement.reset() }
        try statement.bind(entity, at: 1)
        return try statement.step() ? statement.int64(at: 0) : 0
    }

    /// Whether the change about to take `firstKey` follows the last row of
    /// `ACHANGE` (as it does unless history was deleted from its end): then
    /// SQLite's own next rowid is that key, and an `INSERT … SELECT` that lets
    /// SQLite choose appends without a uniqueness seek per row.
    static func changesAppend(at firstKey: Int64, _ connection: Connection) throws -> Bool {
        let last = try connection.cachedStatement("SELECT coalesce(max(Z_PK), 0) FROM ACHANGE")
        defer { last.reset() }
        return try last.step() && last.int64(at: 0) == firstKey - 1
    }
}
