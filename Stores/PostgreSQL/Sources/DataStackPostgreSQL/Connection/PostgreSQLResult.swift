import CLibPQ

/// The rows and status of one executed statement, in PostgreSQL's text format.
///
/// ```swift
/// let result = try connection.execute("SELECT id, name FROM item WHERE id = $1", [PostgreSQLValue(1)])
/// for row in 0..<result.rowCount {
///     let id = try result.int64(row: row, column: 0)
///     let name = result.string(row: row, column: 1)
/// }
/// ```
///
/// Readers return nil for SQL NULL and throw when the text is not what was asked
/// for: an unparsable value is an error, never data.
///
/// Row and column indexes outside the result are programmer errors and trap.
///
/// ## Topics
///
/// - ``rowCount``
/// - ``columnCount``
/// - ``columnName(at:)``
/// - ``affectedRowCount``
/// - ``isNull(row:column:)``
/// - ``string(row:column:)``
/// - ``int64(row:column:)``
/// - ``double(row:column:)``
/// - ``bytes(row:column:)``
// @unchecked Sendable: the PGresult is never modified after creation, and libpq
// documents that such results may be read from any thread.
public final class PostgreSQLResult: @unchecked Sendable {
    // MARK: - Internal properties

    /// Owned; cleared in deinit.
    let result: OpaquePointer
    /// The statement, for error messages.
    let sql: String?

    init(result: OpaquePointer, sql: String?) {
        self.result = result
        self.sql = sql
    }

    deinit {
        PQclear(result)
    }

    // MARK: - Shape

    /// The number of rows returned (0 for statements that return none).
    public var rowCount: Int { Int(PQntuples(result)) }

    /// The number of columns returned.
    public var columnCount: Int { Int(PQnfields(result)) }

    /// The name of a column, as the query labels it.
    public func columnName(at column: Int) -> String {
        checkColumn(column)
        return PQfname(result, Int32(column)).map { String(cString: $0) } ?? ""
    }

    /// The number of rows an `INSERT`, `UPDATE`, `DELETE`, `MERGE`, `COPY` or
    /// `SELECT`/`FETCH`/`MOVE` touched (PQcmdTuples); 0 for other statements.
    public var affectedRowCount: Int {
        guard let text = PQcmdTuples(result) else { return 0 }
        return Int(String(cString: text)) ?? 0
    }

    // MARK: - Values

    /// Whether a value is SQL NULL.
    public func isNull(row: Int, column: Int) -> Bool {
        checkCell(row, column)
        return PQgetisnull(result, Int32(row), Int32(column)) != 0
    }

    /// The value's text, or nil for NULL. The connection uses UTF-8 as client encoding.
    public func string(row: Int, column: Int) -> String? {
        withText(row: row, column: column) { text in text.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Calls `body` with the value's text as libpq holds it (UTF-8, the
    /// client encoding), or nil for NULL; the bytes live as long as the
    /// result, but are valid to `body` only.
    public func withText<Value>(row: Int, column: Int, _ body: (UnsafeRawBufferPointer?) throws -> Value) rethrows -> Value {
        guard !isNull(row: row, column: column), let value = PQgetvalue(result, Int32(row), Int32(column)) else {
            return try body(nil)
        }
        return try body(UnsafeRawBufferPointer(start: value, count: Int(PQgetlength(result, Int32(row), Int32(column)))))
    }

    /// The value as an integer, or nil for NULL.
    ///
    /// - Throws: ``PostgreSQLError`` naming the column when the text is not a 64-bit integer.
    public func int64(row: Int, column: Int) throws -> Int64? {
        try withText(row: row, column: column) { text in
            guard let text else { return nil }
            guard let value = Self.int64(text) else {
                throw conversionError(row: row, column: column, text: String(decoding: text, as: UTF8.self), type: "a 64-bit integer")
            }
            return value
        }
    }

    /// The value as a double, or nil for NULL. Accepts `Infinity`, `-Infinity` and `NaN`.
    ///
    /// - Throws: ``PostgreSQLError`` naming the column when the text is not a number.
    public func double(row: Int, column: Int) throws -> Double? {
        try withText(row: row, column: column) { text in
            guard let text else { return nil }
            guard let value = Self.double(text) else {
                throw conversionError(row: row, column: column, text: String(decoding: text, as: UTF8.self), type: "a number")
            }
            return value
        }
    }

    /// A float8 as PostgreSQL prints one; nil for any other text.
    static func double(_ text: UnsafeRawBufferPointer) -> Double? {
        if text.elementsEqual("Infinity".utf8) { return .infinity }
        if text.elementsEqual("-Infinity".utf8) { return -.infinity }
        if text.elementsEqual("NaN".utf8) { return .nan }
        // Double(_:) also takes "inf", "nan" and hex floats; PostgreSQL prints none of
        // those for float8, so allow only decimal digits, sign, point and exponent.
        guard text.allSatisfy(isDecimalCharacter) else { return nil }
        return Double(String(decoding: text, as: UTF8.self))
    }

    /// What `Int64(_:)` reads from text: an optional sign, then decimal
    /// digits, in range; nil for anything else. Read from libpq's bytes,
    /// with no `String` made for a value that is a number (every key,
    /// version and entity number of every row).
    static func int64(_ text: UnsafeRawBufferPointer) -> Int64? {
        var index = 0
        let negative = text.first == UInt8(ascii: "-")
        if negative || text.first == UInt8(ascii: "+") { index = 1 }
        guard index < text.count else { return nil }
        var value: Int64 = 0
        while index < text.count {
            let digit = text[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflowed) = value.multipliedReportingOverflow(by: 10)
            // Built downwards for a negative number, whose magnitude can be one more (Int64.min).
            let (next, overflowedAgain) = negative ? shifted.subtractingReportingOverflow(Int64(digit))
                                                   : shifted.addingReportingOverflow(Int64(digit))
            guard !overflowed, !overflowedAgain else { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// The value of a `bytea` column, or nil for NULL.
    ///
    /// Reads the text format PostgreSQL sends by default (`bytea_output = hex`,
    /// `\x0aff…`) and validates every digit; the older escape format is decoded by libpq.
    ///
    /// - Throws: ``PostgreSQLError`` naming the column when the text is not valid bytea.
    public func bytes(row: Int, column: Int) throws -> [UInt8]? {
        guard !isNull(row: row, column: column), let value = PQgetvalue(result, Int32(row), Int32(column)) else {
            return nil
        }
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        let text = value.withMemoryRebound(to: UInt8.self, capacity: length) {
            UnsafeBufferPointer(start: $0, count: length)
        }
        if length >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x") {
            if let bytes = Self.decodeHex(text.dropFirst(2)) { return bytes }
        } else if let bytes = Self.unescapeBytea(value) {
            return bytes
        }
        throw conversionError(
            row: row, column: column, text: String(decoding: text.prefix(40), as: UTF8.self), type: "bytea")
    }

    // MARK: - Private helpers

    /// A character of a decimal number as PostgreSQL prints one: a comparison
    /// or two, where a `Set` lookup hashed every character (a seventh of a
    /// fetch of faults' instructions).
    private static func isDecimalCharacter(_ character: UInt8) -> Bool {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"),
             UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): true
        default: false
        }
    }

    private static func decodeHex(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = digits.startIndex
        while index < digits.endIndex {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func unescapeBytea(_ text: UnsafePointer<CChar>) -> [UInt8]? {
        var length = 0
        guard let raw = text.withMemoryRebound(to: UInt8.self, capacity: 1, { PQunescapeBytea($0, &length) }) else {
            return nil
        }
        defer { PQfreemem(raw) }
        return Array(UnsafeBufferPointer(start: raw, count: length))
    }

    private func conversionError(row: Int, column: Int, text: String, type: String) -> PostgreSQLError {
        // The text is a value read from the database, not a bound parameter: naming it is
        // what makes the error useful ("column price, row 3: `abc` is not a number").
        PostgreSQLError(
            kind: .other,
            message: "column \(columnName(at: column)) (index \(column)), row \(row): `\(text)` is not \(type)",
            sql: sql)
    }

    private func checkColumn(_ column: Int) {
        precondition(column >= 0 && column < columnCount, "column index \(column) out of range 0..<\(columnCount)")
    }

    private func checkCell(_ row: Int, _ column: Int) {
        precondition(row >= 0 && row < rowCount, "row index \(row) out of range 0..<\(rowCount)")
        checkColumn(column)
    }
}
