import CLibPQ

// MARK: - COPY … FROM STDIN

extension PostgreSQLConnection {
    /// Loads rows into a table with `COPY table (columns) FROM STDIN`, the fastest way
    /// to insert many rows, and returns how many were copied.
    ///
    /// ```swift
    /// let copied = try connection.copy(
    ///     into: "item", columns: ["id", "name"],
    ///     rows: (1...10_000).lazy.map { [PostgreSQLValue(Int64($0)), .text("item \($0)")] })
    /// ```
    ///
    /// Rows are streamed in COPY's text format: `\`, tab, newline and carriage return
    /// are escaped, NULL is `\N`, and bytes are sent as `bytea` hex (`\\x…`). Text values
    /// are converted by the server to each column's type, as in an `INSERT`.
    ///
    /// The table and column names are quoted identifiers (case-sensitive, no schema
    /// prefix). The copy is one statement: if any row fails, no row is copied.
    ///
    /// - Throws: ``PostgreSQLError`` when a row has the wrong number of values, a text
    ///   value contains a NUL character, or the server refuses a row.
    ///
    /// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2>
    @discardableResult
    public func copy(into table: String, columns: [String], rows: some Sequence<[PostgreSQLValue]>) throws -> Int {
        let connection = try openConnection()
        let columnList = try columns.map { try quotedIdentifier($0, connection: connection) }.joined(separator: ", ")
        let sql = "COPY \(try quotedIdentifier(table, connection: connection)) (\(columnList)) FROM STDIN"

        tracer.report(sql)
        guard let start = PQexec(connection, sql) else {
            throw PostgreSQLError(connection: connection, sql: sql)
        }
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            // Not in COPY state: the statement failed (unknown table, …).
            try checked(start, sql: sql)
            throw PostgreSQLError(kind: .other, message: "the server did not enter COPY mode", sql: sql)
        }
        PQclear(start)

        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.copyChunkSize + 4096)
        do {
            for (index, row) in rows.enumerated() {
                guard row.count == columns.count else {
                    throw PostgreSQLError(
                        kind: .other,
                        message: "COPY row \(index) has \(row.count) values for \(columns.count) columns", sql: sql)
                }
                for (column, value) in row.enumerated() {
                    if column > 0 { buffer.append(UInt8(ascii: "\t")) }
                    try Self.appendCopyField(value, to: &buffer, row: index, column: columns[column], sql: sql)
                }
                buffer.append(UInt8(ascii: "\n"))
                if buffer.count >= Self.copyChunkSize {
                    try sendCopyData(buffer, connection: connection, sql: sql)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            if !buffer.isEmpty {
                try sendCopyData(buffer, connection: connection, sql: sql)
            }
        } catch {
            // Abort the COPY so the session leaves COPY mode; the server then reports
            // "COPY from stdin failed", which says less than `error`, so it is dropped.
            _ = PQputCopyEnd(connection, "aborted by the client")
            drainResults(connection)
            throw error
        }

        guard PQputCopyEnd(connection, nil) == 1 else {
            let error = PostgreSQLError(connection: connection, sql: sql)
            drainResults(connection)
            throw error
        }
        // The COPY's outcome; then libpq returns NULL once the command is finished.
        let outcome = PQgetResult(connection)
        let copied: PostgreSQLResult
        do {
            copied = try checked(outcome, sql: sql)
        } catch {
            drainResults(connection)
            throw error
        }
        drainResults(connection)
        return copied.affectedRowCount
    }

    // MARK: - Private helpers

    /// How many bytes of rows are collected before they are handed to libpq.
    private static let copyChunkSize = 64 * 1024

    private func sendCopyData(_ bytes: [UInt8], connection: OpaquePointer, sql: String) throws {
        let status = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
        }
        // 1: queued. 0 happens only on nonblocking connections; -1: failed.
        guard status == 1 else {
            throw PostgreSQLError(connection: connection, sql: sql)
        }
    }

    /// Appends one field in COPY text format.
    static func appendCopyField(
        _ value: PostgreSQLValue, to buffer: inout [UInt8], row: Int, column: String, sql: String
    ) throws {
        switch value {
        case .null:
            buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
        case .text(let text):
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\t"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0:
                    throw PostgreSQLError(
                        kind: .other,
                        message: "COPY row \(row), column \(column) contains a NUL character, which PostgreSQL text cannot store",
                        sql: sql)
                default: buffer.append(byte)
                }
            }
        case .bytes(let bytes):
            // bytea's hex input `\x…`, whose backslash COPY needs doubled.
            buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\"), UInt8(ascii: "x")])
            for byte in bytes {
                buffer.append(hexDigits[Int(byte >> 4)])
                buffer.append(hexDigits[Int(byte & 0x0f)])
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
