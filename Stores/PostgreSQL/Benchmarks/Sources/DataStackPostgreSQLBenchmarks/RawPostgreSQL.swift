import DataStackPostgreSQL
import Foundation

/// The baseline: libpq through ``PostgreSQLConnection`` on a hand-made table
/// with the columns of the store's `ZCOMPANY` (dates as seconds since 2001 in
/// `DOUBLE PRECISION`, as the store keeps them), and the statements a person
/// would write.
struct RawPostgreSQL {
    let connection: PostgreSQLConnection

    init(url: URL) throws {
        connection = try PostgreSQLConnection(url: url)
    }

    func close() { connection.close() }

    static let columns = ["id", "symbol", "name", "employees", "founded", "price"]

    /// Creates `table` (not timed).
    func createTable(_ table: String) throws {
        try connection.executeScript("""
            CREATE TABLE \(table) (id BIGINT PRIMARY KEY, symbol TEXT NOT NULL, name TEXT, employees BIGINT NOT NULL,
                                   founded DOUBLE PRECISION, price DOUBLE PRECISION NOT NULL)
            """)
    }

    private static func parameters(_ row: CompanyValues, id: Int) -> [PostgreSQLValue] {
        [PostgreSQLValue(Int64(id)), .text(row.symbol), .text(row.name), PostgreSQLValue(Int64(row.employees)),
         PostgreSQLValue(row.founded.timeIntervalSinceReferenceDate), PostgreSQLValue(row.price)]
    }

    /// One prepared `INSERT` (`execute(cached:)`) per row, one transaction per chunk.
    func insert(_ rows: [CompanyValues], chunkSize: Int, into table: String) throws {
        let sql = "INSERT INTO \(table) (id, symbol, name, employees, founded, price) VALUES ($1, $2, $3, $4, $5, $6)"
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            try connection.transaction {
                for index in start..<min(start + chunkSize, rows.count) {
                    _ = try connection.execute(cached: sql, Self.parameters(rows[index], id: index + 1))
                }
            }
        }
    }

    /// Prepared multi-row `INSERT … VALUES (…), (…)` of up to 256 rows (the
    /// batching the store's saves use), one transaction per chunk.
    func insertBatched(_ rows: [CompanyValues], chunkSize: Int, into table: String) throws {
        func sql(rows count: Int) -> String {
            "INSERT INTO \(table) (id, symbol, name, employees, founded, price) VALUES "
                + (0..<count).map { row in "(" + (1...6).map { "$\(row * 6 + $0)" }.joined(separator: ", ") + ")" }.joined(separator: ", ")
        }
        try inBatches(of: rows.count, chunkSize: chunkSize) { batch in
            let parameters = batch.flatMap { Self.parameters(rows[$0], id: $0 + 1) }
            _ = try connection.execute(cached: sql(rows: batch.count), parameters)
        }
    }

    /// Calls `body` with ranges of up to 256 of `count` rows, one transaction per `chunkSize` rows.
    private func inBatches(of count: Int, chunkSize: Int, _ body: (Range<Int>) throws -> Void) throws {
        for start in stride(from: 0, to: count, by: chunkSize) {
            let end = min(start + chunkSize, count)
            try connection.transaction {
                for batch in stride(from: start, to: end, by: 256) { try body(batch..<min(batch + 256, end)) }
            }
        }
    }

    /// Every id and price read, then every price raised by 1 with prepared
    /// `UPDATE … FROM (VALUES …)` of up to 256 rows, one transaction per chunk.
    func raiseEveryPrice(chunkSize: Int, in table: String) throws {
        let result = try connection.execute("SELECT id, price FROM \(table)")
        var rows: [(id: Int64, price: Double)] = []
        for row in 0..<result.rowCount {
            guard let id = try result.int64(row: row, column: 0), let price = try result.double(row: row, column: 1) else {
                throw BenchError("a row without id or price")
            }
            rows.append((id, price))
        }
        func sql(rows count: Int) -> String {
            "UPDATE \(table) AS c SET price = v.price FROM (VALUES "
                + (0..<count).map { "($\($0 * 2 + 1)::bigint, $\($0 * 2 + 2)::float8)" }.joined(separator: ", ")
                + ") AS v(id, price) WHERE c.id = v.id"
        }
        try inBatches(of: rows.count, chunkSize: chunkSize) { batch in
            let parameters = rows[batch].flatMap { [PostgreSQLValue($0.id), PostgreSQLValue($0.price + 1)] }
            let updated = try connection.execute(cached: sql(rows: batch.count), parameters).affectedRowCount
            guard updated == batch.count else { throw BenchError("UPDATE changed \(updated) rows of \(batch.count)") }
        }
    }

    /// Every row in one `COPY … FROM STDIN`.
    func copy(_ rows: [CompanyValues], into table: String) throws {
        let copied = try connection.copy(into: table, columns: Self.columns,
                                         rows: rows.indices.lazy.map { Self.parameters(rows[$0], id: $0 + 1) })
        guard copied == rows.count else { throw BenchError("COPY copied \(copied) rows of \(rows.count)") }
    }

    /// Every row, every column decoded into Swift values.
    func fetchAll(from table: String) throws -> Checksum {
        let result = try connection.execute("SELECT id, symbol, name, employees, founded, price FROM \(table)")
        var checksum = Checksum()
        for row in 0..<result.rowCount {
            try read(result, row: row, into: &checksum)
        }
        return checksum
    }

    /// Every id, then every `stride`-th row by primary key (a prepared `SELECT`).
    func fetchIDsThenRows(every stride: Int, from table: String) throws -> Checksum {
        let ids = try connection.execute("SELECT id FROM \(table)")
        var keys: [Int64] = []
        keys.reserveCapacity(ids.rowCount)
        for row in 0..<ids.rowCount {
            guard let id = try ids.int64(row: row, column: 0) else { throw BenchError("NULL id in \(table)") }
            keys.append(id)
        }
        var checksum = Checksum()
        let sql = "SELECT id, symbol, name, employees, founded, price FROM \(table) WHERE id = $1"
        for index in Swift.stride(from: 0, to: keys.count, by: stride) {
            let result = try connection.execute(cached: sql, [PostgreSQLValue(keys[index])])
            guard result.rowCount == 1 else { throw BenchError("row \(keys[index]) of \(table) not found") }
            try read(result, row: 0, into: &checksum)
        }
        return checksum
    }

    /// The store's companies priced under `bound` (the readers task): a prepared
    /// `SELECT` on `ZCOMPANY`, every column decoded.
    func fetchCompanies(pricedUnder bound: Double) throws -> Checksum {
        let result = try connection.execute(cached: "SELECT Z_PK, ZSYMBOL, ZNAME, ZEMPLOYEES, ZFOUNDED, ZPRICE FROM ZCOMPANY WHERE ZPRICE < $1",
                                            [PostgreSQLValue(bound)])
        var checksum = Checksum()
        for row in 0..<result.rowCount { try read(result, row: row, into: &checksum) }
        return checksum
    }

    private func read(_ result: PostgreSQLResult, row: Int, into checksum: inout Checksum) throws {
        guard try result.int64(row: row, column: 0) != nil, let symbol = result.string(row: row, column: 1),
              let employees = try result.int64(row: row, column: 3), let price = try result.double(row: row, column: 5) else {
            throw BenchError("a required column is NULL in row \(row)")
        }
        let name = result.string(row: row, column: 2)
        let founded = try result.double(row: row, column: 4).map { Date(timeIntervalSinceReferenceDate: $0) }
        checksum.add(symbol: symbol, name: name, employees: Int(employees), founded: founded, price: price)
    }
}
