import DataStack
import Foundation
import GRDBSQLite

/// The import's like-against-like baseline for DataStack with persistent
/// history (its default): SQLite's C API writing, in one transaction per chunk,
/// the rows DataStack writes and the history rows it writes with them, in a
/// copy of an empty DataStack store with history on (so Core Data's tables and
/// indexes are exactly DataStack's own).
///
/// Per chunk: the rows' keys allocated in `Z_PRIMARYKEY`, each row bound to one
/// prepared `INSERT` into `ZBENCHTICKER` (`Z_PK`, `Z_ENT`, `Z_OPT = 1` and the
/// five values, strings bound without a copy); one `ATRANSACTION` row (its
/// context, process and bundle names interned once in `ATRANSACTIONSTRING`, as
/// DataStack interns them); one `ACHANGE` insert row per row, all written by one
/// `INSERT … SELECT` over the chunk's keys with SQLite choosing each change's
/// key (an append), which is what DataStack does. It is the cheaper way: a
/// prepared `INSERT INTO ACHANGE` per row, bound with its key, cost 185.6 M
/// instructions for the import of 10,000 rows (and the 1,000 of the warm-up)
/// against 121.0 M — each such statement seeks `ACHANGE` and its
/// `ZTRANSACTIONID` index afresh, where one statement keeps its cursors at
/// the end of both.
final class RawSQLiteWithHistory {
    private var db: OpaquePointer?
    /// `Z_ENT` of the ticker entity in the store.
    private let entity: Int64
    /// `ATRANSACTIONSTRING` keys of the importer context's name and of the process's (also its bundle's) name.
    private var strings: (context: Int64, process: Int64, bundle: Int64)?

    /// The names DataStack's importer context records with each transaction.
    static let contextName = "importer"
    /// `Z_ENT` of Core Data's history entities (DataStackStorage's `HistoryLayout`).
    static let changeEntity: Int64 = 16001, transactionEntity: Int64 = 16002, stringEntity: Int64 = 16003

    /// Writes an empty DataStack store with history on at `url`, every page in its main file, for ``init(copying:to:)``.
    static func makeEmptyStore(at url: URL) throws {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: BenchModel.make())
        try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: url, options: options))
        try RawConnection(url.path).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// Opens a copy at `url` of the empty store at `empty`, with DataStack's `synchronous=NORMAL` (the file is in WAL mode).
    init(copying empty: URL, to url: URL) throws {
        try FileManager.default.copyItem(at: empty, to: url)
        guard sqlite3_open_v2(url.path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            throw BenchError("raw SQLite + history: cannot open \(url.path)")
        }
        entity = try Self.integer(db, "SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = '\(BenchModel.entityName)'")
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=NORMAL")
    }

    deinit { sqlite3_close_v2(db) }

    private func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    private func error(_ sql: String) -> BenchError {
        BenchError("raw SQLite + history: \(String(cString: sqlite3_errmsg(db))) - while executing `\(sql)`")
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement else { throw error(sql) }
        return statement
    }

    private static func integer(_ db: OpaquePointer?, _ sql: String) throws -> Int64 {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchError("raw SQLite + history: cannot prepare `\(sql)`")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw BenchError("raw SQLite + history: no row for `\(sql)`") }
        return sqlite3_column_int64(statement, 0)
    }

    /// Runs a statement that returns one integer (or none: 0), and resets it.
    private func step(_ statement: OpaquePointer, _ sql: String) throws -> Int64 {
        defer { sqlite3_reset(statement) }
        let code = sqlite3_step(statement)
        if code == SQLITE_ROW { return sqlite3_column_int64(statement, 0) }
        guard code == SQLITE_DONE else { throw error(sql) }
        return 0
    }

    /// Inserts the rows and their history, one transaction per chunk.
    func insert(_ rows: [TickerValues], chunkSize: Int) throws {
        let allocateSQL = "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + ?1 WHERE Z_ENT = ?2 RETURNING Z_MAX"
        let insertSQL = """
            INSERT INTO ZBENCHTICKER (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZPRICE, ZVOLUME, ZTIME) VALUES (?, \(entity), 1, ?, ?, ?, ?, ?)
            """
        let transactionSQL = """
            INSERT INTO ATRANSACTION (Z_PK, Z_ENT, ZAUTHORTS, ZBUNDLEIDTS, ZCONTEXTNAMETS, ZPROCESSIDTS, ZTIMESTAMP) \
            VALUES (?1, \(Self.transactionEntity), NULL, ?2, ?3, ?4, ?5)
            """
        let changesSQL = """
            INSERT INTO ACHANGE (Z_ENT, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTRANSACTIONID, ZCOLUMNS) \
            SELECT \(Self.changeEntity), \(PersistentHistoryChange.ChangeType.insert.rawValue), Z_ENT, Z_PK, ?3, NULL \
            FROM ZBENCHTICKER WHERE Z_PK BETWEEN ?1 AND ?2 AND Z_ENT = \(entity)
            """
        let allocate = try prepare(allocateSQL), insert = try prepare(insertSQL)
        let transaction = try prepare(transactionSQL), changes = try prepare(changesSQL)
        defer { for statement in [allocate, insert, transaction, changes] { sqlite3_finalize(statement) } }
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try execute("BEGIN IMMEDIATE")
            sqlite3_bind_int64(allocate, 1, Int64(chunk.count))
            sqlite3_bind_int64(allocate, 2, entity)
            let last = try step(allocate, allocateSQL)
            let first = last - Int64(chunk.count) + 1
            var key = first
            for row in chunk {
                var symbol = row.symbol, name = row.name
                let code = symbol.withUTF8 { symbolBytes in
                    name.withUTF8 { nameBytes in
                        symbolBytes.withMemoryRebound(to: CChar.self) { symbolChars in
                            nameBytes.withMemoryRebound(to: CChar.self) { nameChars in
                                sqlite3_bind_int64(insert, 1, key)
                                sqlite3_bind_text(insert, 2, symbolChars.baseAddress, Int32(symbolChars.count), nil)
                                sqlite3_bind_text(insert, 3, nameChars.baseAddress, Int32(nameChars.count), nil)
                                sqlite3_bind_double(insert, 4, row.price)
                                sqlite3_bind_int64(insert, 5, row.volume)
                                sqlite3_bind_double(insert, 6, row.time.timeIntervalSinceReferenceDate)
                                let code = sqlite3_step(insert)
                                sqlite3_reset(insert)
                                return code
                            }
                        }
                    }
                }
                guard code == SQLITE_DONE else { throw error(insertSQL) }
                key += 1
            }
            // The transaction row, then the chunk's change rows copied from the rows just written.
            let names = try internedStrings()
            sqlite3_bind_int64(allocate, 1, 1)
            sqlite3_bind_int64(allocate, 2, Self.transactionEntity)
            let number = try step(allocate, allocateSQL)
            sqlite3_bind_int64(transaction, 1, number)
            sqlite3_bind_int64(transaction, 2, names.bundle)
            sqlite3_bind_int64(transaction, 3, names.context)
            sqlite3_bind_int64(transaction, 4, names.process)
            sqlite3_bind_double(transaction, 5, Date().timeIntervalSinceReferenceDate)
            _ = try step(transaction, transactionSQL)
            sqlite3_bind_int64(allocate, 1, Int64(chunk.count))
            sqlite3_bind_int64(allocate, 2, Self.changeEntity)
            let lastChange = try step(allocate, allocateSQL)
            sqlite3_bind_int64(changes, 1, first)
            sqlite3_bind_int64(changes, 2, last)
            sqlite3_bind_int64(changes, 3, number)
            _ = try step(changes, changesSQL)
            // The changes' keys are SQLite's next rowids: they must be the ones allocated.
            guard sqlite3_changes(db) == chunk.count, sqlite3_last_insert_rowid(db) == lastChange else {
                throw BenchError("raw SQLite + history: \(sqlite3_changes(db)) changes ending at \(sqlite3_last_insert_rowid(db)), expected \(chunk.count) ending at \(lastChange)")
            }
            try execute("COMMIT")
        }
    }

    /// The keys of the transaction's names in `ATRANSACTIONSTRING`, added the first time (inside the first chunk's transaction).
    private func internedStrings() throws -> (context: Int64, process: Int64, bundle: Int64) {
        if let strings { return strings }
        let process = ProcessInfo.processInfo.processName
        let bundle = Bundle.main.bundleIdentifier ?? process
        var keys: [String: Int64] = [:]
        for name in [Self.contextName, process, bundle] where keys[name] == nil {
            let key = try Self.integer(db, "UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + 1 WHERE Z_ENT = \(Self.stringEntity) RETURNING Z_MAX")
            let escaped = name.replacingOccurrences(of: "'", with: "''")
            try execute("INSERT INTO ATRANSACTIONSTRING (Z_PK, Z_ENT, ZNAME) VALUES (\(key), \(Self.stringEntity), '\(escaped)')")
            keys[name] = key
        }
        let found = (context: keys[Self.contextName] ?? 0, process: keys[process] ?? 0, bundle: keys[bundle] ?? 0)
        strings = found
        return found
    }

    /// Every row read back, as the others' fetch task reads theirs, and the history's
    /// transactions and changes: one transaction per chunk, one insert change per row naming it.
    func check(chunks: Int) throws -> Checksum {
        let sql = "SELECT Z_PK, ZSYMBOL, ZNAME, ZPRICE, ZVOLUME, ZTIME FROM ZBENCHTICKER"
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var checksum = Checksum()
        func text(_ column: Int32) -> String {
            guard let bytes = sqlite3_column_text(statement, column) else { return "" }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column))), as: UTF8.self)
        }
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(sql) }
            checksum.add(symbol: text(1), name: text(2), price: sqlite3_column_double(statement, 3),
                         volume: sqlite3_column_int64(statement, 4),
                         time: Date(timeIntervalSinceReferenceDate: sqlite3_column_double(statement, 5)))
        }
        let transactions = try Self.integer(db, "SELECT count(*) FROM ATRANSACTION")
        let changes = try Self.integer(db, """
            SELECT count(*) FROM ACHANGE c JOIN ZBENCHTICKER t ON t.Z_PK = c.ZENTITYPK AND t.Z_ENT = c.ZENTITY \
            WHERE c.ZCHANGETYPE = 0 AND c.Z_ENT = \(Self.changeEntity)
            """)
        let maxima = try Self.integer(db, """
            SELECT (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = \(Self.changeEntity)) = (SELECT max(Z_PK) FROM ACHANGE) \
            AND (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = \(Self.transactionEntity)) = (SELECT max(Z_PK) FROM ATRANSACTION) \
            AND (SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = \(entity)) = (SELECT max(Z_PK) FROM ZBENCHTICKER)
            """)
        guard transactions == chunks, changes == checksum.rows, maxima == 1 else {
            throw BenchError("raw SQLite + history: \(transactions) transactions (expected \(chunks)), \(changes) insert changes for \(checksum.rows) rows, Z_MAX \(maxima == 1 ? "right" : "wrong")")
        }
        return checksum
    }
}
