import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Persistent history
//
// `ATRANSACTION` holds one row per save (its number, time, author, context
// name, process), `ACHANGE` one row per object the save inserted, updated or
// deleted. A transaction's number comes from `Z_PRIMARYKEY` row 16002, taken
// as the save's last statement: its row lock is held until the commit, so
// numbers are handed out in commit order with no gaps, and a reader that has
// read transaction n has read every transaction before it.
extension PostgreSQLStore: PersistentHistoryStore {
    public var tracksPersistentHistory: Bool { stateLock.withLock { state.tracksHistory } }

    /// Records a save's transaction and its changes; an update's `ZCOLUMNS`
    /// sets the bits of the properties that differ from `before` (the rows
    /// before the save), as the SQLite store records them.
    func recordHistory(of request: SaveChangesRequest, before: [ObjectID: IncrementalStoreNode], permanent: (ObjectID) -> ObjectID,
                       author: String?, contextName: String?, storeIdentifier: String, layout: StoreLayout,
                       _ connection: PostgreSQLConnection) throws -> PersistentHistoryToken {
        let number = try insertHistoryTransaction(author: author, contextName: contextName, connection)
        var types: [Int64] = [], entities: [Int64] = [], keys: [Int64] = []
        // Each update's ZCOLUMNS in hex, quoted, in a text array literal; NULL for inserts and deletes.
        var columns: [String] = []
        // Each deleted object's preserved values, by tombstone column (nil for other changes).
        let tombstoneCount = layout.tombstoneColumnCount
        var tombstones = [[String?]](repeating: [], count: tombstoneCount)
        var anyTombstone = false
        let changes: [(PersistentHistoryChange.ChangeType, [IncrementalStoreNode])] = [
            (.insert, request.insertedObjects), (.update, request.updatedObjects), (.delete, request.deletedObjects),
        ]
        for (type, nodes) in changes {
            for node in nodes {
                let id = permanent(node.objectID)
                guard let key = id.primaryKey else { continue }
                types.append(type.rawValue)
                let entityNumber = try layout.number(of: id.entity)
                entities.append(entityNumber)
                keys.append(key)
                if tombstoneCount > 0 {
                    let preserved = type == .delete ? layout.tombstoneAttributes(ofEntityNumbered: entityNumber) : []
                    for index in 0..<tombstoneCount {
                        let value = index < preserved.count ? before[node.objectID]?.values[preserved[index].index] : nil
                        let text = value.flatMap(Self.tombstoneText)
                        anyTombstone = anyTombstone || !preserved.isEmpty
                        tombstones[index].append(text)
                    }
                }
                if type == .update {
                    let mask = try layout.historyColumns(of: node, before: before[node.objectID], permanent: permanent)
                    columns.append("\"" + Self.hex(mask) + "\"")
                } else {
                    columns.append("NULL")
                }
            }
        }
        if !keys.isEmpty {
            // Tombstone columns only when a deleted object has preserved attributes (added then if missing).
            let written = anyTombstone ? tombstoneCount : 0
            if written > 0 { try ensureTombstoneColumns(written, connection) }
            let arrays = (0..<written).map { ", $\($0 + 6)::text[]" }.joined()
            let names = (0..<written).map { ", t\($0)" }.joined()
            _ = try connection.execute(cached: """
                INSERT INTO ACHANGE (ZTRANSACTIONID, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZCOLUMNS\(Self.tombstoneColumnList(written))) \
                SELECT $1, t, e, k, decode(m, 'hex')\(names) \
                FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::text[]\(arrays)) AS c(t, e, k, m\(names))
                """, [PostgreSQLValue(number)] + [types, entities, keys].map { PostgreSQLValue(layout.keyArray($0)) }
                    + [.text("{" + columns.joined(separator: ",") + "}")]
                    + tombstones.prefix(written).map { .text(Self.textArray($0)) })
        }
        // Delivered to the listeners at commit, and never if the save rolls back.
        _ = try connection.execute(cached: "SELECT pg_notify($1, $2)", [.text(Self.historyChannel), .text("\(storeIdentifier):\(number)")])
        return PersistentHistoryToken(storeIdentifier: storeIdentifier, transactionNumber: number)
    }

    /// `bytes` as lower-case hex digits, two per byte (what `decode(…, 'hex')` reads).
    private static func hex(_ bytes: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Numbers a new transaction (the counter's row lock is held to commit)
    /// and inserts its `ATRANSACTION` row; returns its number.
    func insertHistoryTransaction(author: String?, contextName: String?, _ connection: PostgreSQLConnection) throws -> Int64 {
        let numbered = try connection.execute(cached: "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_ENT = $1 RETURNING Z_MAX",
                                              [PostgreSQLValue(Self.historyTransactionEntity)])
        guard numbered.rowCount == 1 else { throw missingHistoryCounter() }
        let number = try numbered.requiredInt64(row: 0, column: 0)
        let process = ProcessInfo.processInfo
        _ = try connection.execute(cached: """
            INSERT INTO ATRANSACTION (Z_PK, ZTIMESTAMP, ZAUTHOR, ZCONTEXTNAME, ZPROCESSID, ZBUNDLEID) VALUES ($1, $2, $3, $4, $5, $6)
            """, [PostgreSQLValue(number), PostgreSQLValue(Date().timeIntervalSinceReferenceDate),
                  author.map { .text($0) } ?? .null, contextName.map { .text($0) } ?? .null,
                  .text(String(process.processIdentifier)), .text(process.processName)])
        return number
    }

    public func currentPersistentHistoryToken() throws -> PersistentHistoryToken {
        try requireHistory()
        let result = try withReader { connection in
            try connection.execute(cached: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = $1", [PostgreSQLValue(Self.historyTransactionEntity)])
        }
        guard result.rowCount == 1 else { throw missingHistoryCounter() }
        return PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: try result.requiredInt64(row: 0, column: 0))
    }

    private func missingHistoryCounter() -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: reportedURL, message: "Z_PRIMARYKEY has no row for the history's transactions (16002)")
    }

    public func fetchHistory(_ request: PersistentHistoryRequest) throws -> [PersistentHistoryTransaction] {
        try requireHistory()
        guard request.kind == .fetch else {
            throw PersistentStoreError(.invalidHistoryRequest, url: reportedURL, message: "fetchHistory(_:) was given a delete request")
        }
        let layout = try layout
        let identifier = identifier
        return try withReader { connection in
            try connection.transaction {
                // One snapshot for the transactions and their changes.
                // (Under a staged migration's savepoint the migration's transaction is the snapshot.)
                if connection.savepointDepth == 0 {
                    _ = try connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                }
                var sql = "SELECT Z_PK, ZTIMESTAMP, ZAUTHOR, ZCONTEXTNAME, ZPROCESSID, ZBUNDLEID FROM ATRANSACTION WHERE "
                var parameters: [PostgreSQLValue] = []
                switch request.bound {
                case .token(let token):
                    let after = try checkedStart(after: token, connection)
                    sql += "Z_PK > $1"
                    parameters.append(PostgreSQLValue(after))
                case .date(let date):
                    sql += "ZTIMESTAMP > $1"
                    parameters.append(PostgreSQLValue(date.timeIntervalSinceReferenceDate))
                }
                sql += " ORDER BY Z_PK"
                let rows = try connection.execute(sql, parameters)
                var transactions: [PersistentHistoryTransaction] = []
                for row in 0..<rows.rowCount {
                    let number = try rows.requiredInt64(row: row, column: 0)
                    let transaction = PersistentHistoryTransaction(
                        token: PersistentHistoryToken(storeIdentifier: identifier, transactionNumber: number),
                        timestamp: Date(timeIntervalSinceReferenceDate: try rows.requiredDouble(row: row, column: 1)),
                        author: rows.string(row: row, column: 2), contextName: rows.string(row: row, column: 3),
                        processID: rows.string(row: row, column: 4) ?? "", bundleID: rows.string(row: row, column: 5) ?? "",
                        changes: nil)
                    if request.filter?.matches(transaction) ?? true { transactions.append(transaction) }
                    if request.fetchLimit > 0, transactions.count == request.fetchLimit { break }
                }
                guard request.includesChanges, let first = transactions.first?.transactionNumber,
                      let last = transactions.last?.transactionNumber else { return transactions }
                let tombstoneCount = layout.tombstoneColumnCount > 0 ? try tombstoneColumnCount(connection) : 0
                let changes = try connection.execute("""
                    SELECT Z_PK, ZTRANSACTIONID, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZCOLUMNS\(Self.tombstoneColumnList(tombstoneCount)) FROM ACHANGE \
                    WHERE ZTRANSACTIONID BETWEEN $1 AND $2 ORDER BY Z_PK
                    """, [PostgreSQLValue(first), PostgreSQLValue(last)])
                var reader = layout.rowReader(storeIdentifier: identifier)
                var byTransaction: [Int64: [PersistentHistoryChange]] = [:]
                for row in 0..<changes.rowCount {
                    let transaction = try changes.requiredInt64(row: row, column: 1)
                    let rawType = try changes.requiredInt64(row: row, column: 2)
                    guard let type = PersistentHistoryChange.ChangeType(rawValue: rawType) else {
                        throw PersistentStoreError(.ioFailure, url: reportedURL, message: "ACHANGE row of transaction \(transaction) has change type \(rawType)")
                    }
                    let entityNumber = try changes.requiredInt64(row: row, column: 3)
                    let id = try reader.objectID(entityNumber: entityNumber, primaryKey: try changes.requiredInt64(row: row, column: 4))
                    var change = PersistentHistoryChange(changeID: try changes.requiredInt64(row: row, column: 0), changedObjectID: id,
                                                         changeType: type, transactionNumber: transaction)
                    if type == .update {
                        let columns = try changes.bytes(row: row, column: 5).map { Data($0) } ?? Data()
                        change.updatedProperties = layout.updatedProperties(ofEntityNumbered: entityNumber, historyColumns: columns)
                    } else if type == .delete {
                        change.tombstone = try layout.tombstone(ofEntityNumbered: entityNumber, from: PostgreSQLRow(result: changes, row: row),
                                                                firstColumn: 6, columnCount: tombstoneCount)
                    }
                    byTransaction[transaction, default: []].append(change)
                }
                return transactions.map { transaction in
                    var transaction = transaction
                    transaction.changes = byTransaction[transaction.transactionNumber] ?? []
                    return transaction
                }
            }
        }
    }

    /// The number to read after: the token's, checked to belong to this store,
    /// to be no later than its last transaction, and (for a fetch) not to have
    /// been deleted past.
    private func checkedStart(after token: PersistentHistoryToken?, forFetch: Bool = true,
                              _ connection: PostgreSQLConnection) throws -> Int64 {
        guard let token else { return 0 }
        guard token.storeIdentifier == identifier else {
            throw PersistentStoreError(.historyTokenMismatch, url: reportedURL, message:
                "the history token belongs to the store \(token.storeIdentifier), not to this store (\(identifier))")
        }
        let bounds = try connection.execute("""
            SELECT (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = $1), (SELECT min(Z_PK) FROM ATRANSACTION)
            """, [PostgreSQLValue(Self.historyTransactionEntity)])
        let last = try bounds.requiredInt64(row: 0, column: 0)
        guard token.transactionNumber <= last else {
            throw PersistentStoreError(.historyTokenMismatch, url: reportedURL, message:
                "the history token names transaction \(token.transactionNumber), but the store's history ends at transaction \(last)")
        }
        if forFetch, let first = try bounds.int64(row: 0, column: 1), first > token.transactionNumber + 1 {
            throw PersistentStoreError(.historyExpired, url: reportedURL, message: """
                the history after transaction \(token.transactionNumber) is gone (deleted up to transaction \(first - 1)): \
                changes were missed; refetch everything you show and continue from the store's current token
                """)
        }
        return token.transactionNumber
    }

    public func deleteHistory(_ request: PersistentHistoryRequest) throws -> Int {
        try requireHistory()
        if isReadOnly { throw PersistentStoreError.readOnly(url: reportedURL) }
        guard request.kind == .delete else {
            throw PersistentStoreError(.invalidHistoryRequest, url: reportedURL, message: "deleteHistory(_:) was given a fetch request")
        }
        return try withConnection { connection in
            try connection.transaction {
                let condition: String
                let parameter: PostgreSQLValue
                switch request.bound {
                case .token(let token):
                    guard let token else { return 0 }
                    _ = try checkedStart(after: token, forFetch: false, connection)
                    condition = "Z_PK < $1"
                    parameter = PostgreSQLValue(token.transactionNumber)
                case .date(let date):
                    condition = "ZTIMESTAMP < $1"
                    parameter = PostgreSQLValue(date.timeIntervalSinceReferenceDate)
                }
                _ = try connection.execute("DELETE FROM ACHANGE WHERE ZTRANSACTIONID IN (SELECT Z_PK FROM ATRANSACTION WHERE \(condition))", [parameter])
                return try connection.execute("DELETE FROM ATRANSACTION WHERE \(condition)", [parameter]).affectedRowCount
            }
        }
    }

    private func requireHistory() throws {
        guard tracksPersistentHistory else {
            throw PersistentStoreError(.historyNotTracked, url: reportedURL, message:
                "the store does not record persistent history: add it with StoreOptions.persistentHistoryTracking")
        }
    }
}
