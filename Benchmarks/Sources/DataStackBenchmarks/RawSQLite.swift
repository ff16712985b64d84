import Foundation
import GRDBSQLite

/// The baseline: SQLite's C API with prepared statements, reused for every row,
/// strings bound without a copy, columns read by position.
final class RawSQLite {
    private var db: OpaquePointer?

    static let schema = """
        CREATE TABLE ticker (id INTEGER PRIMARY KEY, symbol TEXT NOT NULL, name TEXT NOT NULL,
                             price REAL NOT NULL, volume INTEGER NOT NULL, time REAL NOT NULL)
        """

    /// Opens (or creates) the file in WAL mode with `synchronous=NORMAL`, DataStack's defaults.
    init(path: String) throws {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK else {
            throw BenchError("raw SQLite: cannot open \(path)")
        }
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=NORMAL")
        try execute("CREATE TABLE IF NOT EXISTS " + Self.schema.dropFirst("CREATE TABLE ".count))
    }

    deinit { sqlite3_close_v2(db) }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    private func error(_ sql: String) -> BenchError {
        BenchError("raw SQLite: \(String(cString: sqlite3_errmsg(db))) - while executing `\(sql)`")
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement else { throw error(sql) }
        return statement
    }

    /// Makes `symbol` unique, for ``insert(_:chunkSize:upserting:)``'s conflict clause.
    func makeSymbolUnique() throws {
        try execute("CREATE UNIQUE INDEX IF NOT EXISTS ticker_symbol ON ticker (symbol)")
    }

    /// Inserts the rows, one transaction per chunk, through one prepared
    /// statement; when `upserting`, a row whose symbol exists updates it
    /// (`ON CONFLICT (symbol) DO UPDATE`, after ``makeSymbolUnique()``).
    func insert(_ rows: [TickerValues], chunkSize: Int, upserting: Bool = false) throws {
        let sql = "INSERT INTO ticker (symbol, name, price, volume, time) VALUES (?, ?, ?, ?, ?)" + (upserting ? """
             ON CONFLICT (symbol) DO UPDATE SET name = excluded.name, price = excluded.price, volume = excluded.volume, time = excluded.time
            """ : "")
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            try execute("BEGIN IMMEDIATE")
            for row in rows[start..<min(start + chunkSize, rows.count)] {
                var symbol = row.symbol, name = row.name
                let code = symbol.withUTF8 { symbolBytes in
                    name.withUTF8 { nameBytes in
                        symbolBytes.withMemoryRebound(to: CChar.self) { symbolChars in
                            nameBytes.withMemoryRebound(to: CChar.self) { nameChars in
                                sqlite3_bind_text(statement, 1, symbolChars.baseAddress, Int32(symbolChars.count), nil)
                                sqlite3_bind_text(statement, 2, nameChars.baseAddress, Int32(nameChars.count), nil)
                                sqlite3_bind_double(statement, 3, row.price)
                                sqlite3_bind_int64(statement, 4, row.volume)
                                sqlite3_bind_double(statement, 5, row.time.timeIntervalSinceReferenceDate)
                                let code = sqlite3_step(statement)
                                sqlite3_reset(statement)
                                return code
                            }
                        }
                    }
                }
                guard code == SQLITE_DONE else { throw error(sql) }
            }
            try execute("COMMIT")
        }
    }

    /// The number of rows and the sum of their prices.
    func countAndPriceSum() throws -> (Int, Double) {
        let statement = try prepare("SELECT count(*), total(price) FROM ticker")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw error("SELECT count(*), total(price) FROM ticker") }
        return (Int(sqlite3_column_int64(statement, 0)), sqlite3_column_double(statement, 1))
    }

    private static func text(_ statement: OpaquePointer, _ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// Every row with every column, turned into Swift values.
    func fetchAll() throws -> Checksum {
        let sql = "SELECT id, symbol, name, price, volume, time FROM ticker"
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var checksum = Checksum()
        try execute("BEGIN")
        defer { try? execute("COMMIT") }
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(sql) }
            _ = sqlite3_column_int64(statement, 0)
            checksum.add(symbol: Self.text(statement, 1), name: Self.text(statement, 2),
                         price: sqlite3_column_double(statement, 3), volume: sqlite3_column_int64(statement, 4),
                         time: Date(timeIntervalSinceReferenceDate: sqlite3_column_double(statement, 5)))
        }
        return checksum
    }

    /// The faulting pattern by hand: every ID, then every `stride`-th row by ID.
    func fetchIDsThenRows(every stride: Int) throws -> Checksum {
        try execute("BEGIN")
        defer { try? execute("COMMIT") }
        let idSQL = "SELECT id FROM ticker"
        let ids = try prepare(idSQL)
        defer { sqlite3_finalize(ids) }
        var all: [Int64] = []
        while true {
            let code = sqlite3_step(ids)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(idSQL) }
            all.append(sqlite3_column_int64(ids, 0))
        }
        let rowSQL = "SELECT symbol, name, price, volume, time FROM ticker WHERE id = ?"
        let row = try prepare(rowSQL)
        defer { sqlite3_finalize(row) }
        var checksum = Checksum()
        for index in Swift.stride(from: 0, to: all.count, by: stride) {
            sqlite3_bind_int64(row, 1, all[index])
            guard sqlite3_step(row) == SQLITE_ROW else { throw error(rowSQL) }
            checksum.add(symbol: Self.text(row, 0), name: Self.text(row, 1), price: sqlite3_column_double(row, 2),
                         volume: sqlite3_column_int64(row, 3),
                         time: Date(timeIntervalSinceReferenceDate: sqlite3_column_double(row, 4)))
            sqlite3_reset(row)
        }
        return checksum
    }
}

/// A benchmark that cannot go on; the message says what and where.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
