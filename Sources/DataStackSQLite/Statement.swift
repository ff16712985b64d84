import CSQLite
import Foundation

/// A prepared SQL statement: bind values by position, step, read columns by position.
///
/// The store prepares one INSERT, UPDATE and DELETE per entity and reuses it for
/// every row of a save, so binding and reading are typed, positional, and do no
/// work beyond the SQLite call: no name lookup, no `Any` boxing.
///
/// ```swift
/// let insert = try connection.cachedStatement("INSERT INTO ZTICKER (Z_PK, ZSYMBOL, ZPRICE) VALUES (?, ?, ?)")
/// try insert.bind(Int64(1), at: 1)
/// try insert.bind("AAPL", at: 2)
/// try insert.bind(189.5, at: 3)
/// try insert.execute()
///
/// let select = try connection.cachedStatement("SELECT ZSYMBOL, ZPRICE FROM ZTICKER")
/// while try select.step() {
///     print(select.string(at: 0) ?? "-", select.double(at: 1))
/// }
/// ```
///
/// Parameters are numbered from 1 and columns from 0, as in SQLite's C API.
///
/// A statement that has stepped onto a row, but not to the end, keeps its read
/// transaction (and its WAL snapshot) open until it is reset. Reset statements
/// you stop reading early; ``Connection/cachedStatement(_:)`` resets them for you
/// on the next use.
///
/// A statement belongs to its connection's queue, like the connection. It keeps
/// the underlying SQLite connection alive, so it stays valid even if the
/// ``Connection`` object is released first.
///
/// Related SQLite documentation: <https://sqlite.org/c3ref/stmt.html>
///
/// ## Topics
///
/// ### Binding parameters
/// - ``bind(_:at:)-(Int64,_)``
/// - ``bindForExecution(_:at:)``
/// - ``bindNull(at:)``
/// - ``clearBindings()``
///
/// ### Running
/// - ``step()``
/// - ``execute()``
/// - ``reset()``
///
/// ### Reading columns
/// - ``columnCount``
/// - ``columnType(at:)``
/// - ``int64(at:)``
/// - ``double(at:)``
/// - ``string(at:)``
/// - ``data(at:)``
/// - ``isNull(at:)``
///
/// SPI public rather than `package`, for one reason: ``step()``, ``reset()``
/// and the column readers are `@inlinable`, so that a store's row loop calls
/// SQLite directly, as it did when the driver was part of its module. This compiler
/// inlines an `@inlinable` member of another module only when it is public
/// (SPI or not), never a `package` one. Import it with
/// `@_spi(DataStackInternal) import DataStackSQLite`; it is no public API.
@_spi(DataStackInternal) public final class Statement {
    /// The SQL text, with placeholders; it appears in every error this statement throws.
    @usableFromInline package let sql: String

    // MARK: - Internal properties

    /// Keeps the SQLite connection open for as long as this statement exists.
    let handle: DatabaseHandle

    /// The `sqlite3_stmt`, finalized in `deinit`.
    @usableFromInline let statement: OpaquePointer

    /// The text of the row being bound by ``bindForExecution(_:at:)``, until it runs.
    /// Unchecked: a statement is confined to its connection's queue.
    @exclusivity(unchecked) private var rowText = StatementTextBuffer()

    /// Prepares exactly one statement.
    ///
    /// - Parameter persistent: Hints that the statement will be reused many times
    ///   (`SQLITE_PREPARE_PERSISTENT`), as cached statements are.
    /// - Throws: ``SQLiteError`` if the SQL does not compile, is empty, or
    ///   holds more than one statement.
    init(handle: DatabaseHandle, sql: String, persistent: Bool) throws {
        let db = handle.db
        var utf8 = sql
        var prepared: OpaquePointer?
        var hasMoreStatements = false
        let code = utf8.withUTF8 { buffer -> Int32 in
            buffer.withMemoryRebound(to: CChar.self) { text -> Int32 in
                var tail: UnsafePointer<CChar>?
                let flags = UInt32(persistent ? SQLITE_PREPARE_PERSISTENT : 0)
                let code = sqlite3_prepare_v3(db, text.baseAddress, Int32(clamping: text.count), flags, &prepared, &tail)
                if code == SQLITE_OK, let tail, let base = text.baseAddress {
                    hasMoreStatements = Self.containsStatement(db, from: tail, to: base + text.count)
                }
                return code
            }
        }
        guard code == SQLITE_OK else {
            let error = SQLiteError(db: db, code: code, sql: sql)
            sqlite3_finalize(prepared)
            throw error
        }
        guard let prepared else {
            throw SQLiteError(resultCode: SQLiteError.SQLITE_MISUSE, message: "no SQL statement to prepare", sql: sql)
        }
        guard !hasMoreStatements else {
            sqlite3_finalize(prepared)
            throw SQLiteError(
                resultCode: SQLiteError.SQLITE_MISUSE,
                message: "multiple statements found; prepare one at a time, or use Connection.execute(_:)",
                sql: sql)
        }
        self.sql = sql
        self.handle = handle
        self.statement = prepared
    }

    deinit {
        sqlite3_finalize(statement)
    }

    /// Whether the text between `start` and `end` compiles to a statement, rather
    /// than being only whitespace, semicolons or comments.
    private static func containsStatement(_ db: OpaquePointer, from start: UnsafePointer<CChar>, to end: UnsafePointer<CChar>) -> Bool {
        var cursor = start
        while cursor < end {
            if let byte = UInt8(exactly: cursor.pointee), byte == 0x20 || (0x09...0x0D).contains(byte) {
                cursor += 1
                continue
            }
            // Something other than whitespace: let SQLite decide (comments and
            // lone semicolons prepare to no statement). A syntax error there
            // counts as a second statement; it was meant to be run.
            var next: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v2(db, cursor, Int32(clamping: end - cursor), &next, &tail)
            if next != nil || code != SQLITE_OK {
                sqlite3_finalize(next)
                return true
            }
            guard let tail, tail > cursor else { return false }
            cursor = tail
        }
        return false
    }
}

// MARK: - Binding Parameters

extension Statement {
    /// The number of `?` parameters; valid indexes are `1...parameterCount`.
    package var parameterCount: Int32 {
        sqlite3_bind_parameter_count(statement)
    }

    /// Binds a 64-bit integer to the parameter at `index` (1-based).
    ///
    /// - Throws: ``SQLiteError`` with ``SQLiteError/SQLITE_RANGE`` when `index` is
    ///   not a parameter of this statement.
    package func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(statement, index, value), binding: index)
    }

    /// Binds an integer to the parameter at `index` (1-based); see ``bind(_:at:)-(Int64,_)``.
    package func bind(_ value: Int, at index: Int32) throws {
        try check(sqlite3_bind_int64(statement, index, Int64(value)), binding: index)
    }

    /// Binds a double to the parameter at `index` (1-based).
    package func bind(_ value: Double, at index: Int32) throws {
        try check(sqlite3_bind_double(statement, index, value), binding: index)
    }

    /// Binds text to the parameter at `index` (1-based).
    ///
    /// SQLite copies the string's UTF-8 bytes once (`SQLITE_TRANSIENT`); a native
    /// Swift string is not copied or measured on the Swift side. An empty string
    /// binds empty text, not NULL.
    package func bind(_ value: String, at index: Int32) throws {
        try check(Self.withUTF8(of: value) { buffer in
            guard let base = buffer.baseAddress, !buffer.isEmpty else {
                return sqlite3_bind_text64(statement, index, "", 0, csqlite_transient(), UInt8(SQLITE_UTF8))
            }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { text in
                sqlite3_bind_text64(statement, index, text, UInt64(buffer.count), csqlite_transient(), UInt8(SQLITE_UTF8))
            }
        }, binding: index)
    }

    /// Binds text to the parameter at `index` (1-based) for the next
    /// ``execute()``, from memory the statement owns rather than SQLite's own
    /// copy; ``execute()`` clears the statement's bindings once the row has run.
    ///
    /// For the many short strings of a save's rows; ``bind(_:at:)-(String,_)``
    /// for everything else (a statement that is stepped, or run twice with the
    /// same parameters).
    package func bindForExecution(_ value: String, at index: Int32) throws {
        try check(Self.withUTF8(of: value) { bytes in
            let text = rowText.store(bytes)
            return sqlite3_bind_text64(statement, index, text, UInt64(bytes.count), nil, UInt8(SQLITE_UTF8))
        }, binding: index)
    }

    /// Runs `body` on a string's UTF-8 bytes: a native string lends them as
    /// they are, without a copy of the string (or its retain); only a bridged
    /// one is made native first.
    private static func withUTF8<Result>(of string: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = string
        return copy.withUTF8(body)
    }

    /// Binds a blob to the parameter at `index` (1-based).
    ///
    /// Empty data binds a zero-length blob, which reads back as empty data, not NULL.
    package func bind(_ value: Data, at index: Int32) throws {
        try check(value.withUnsafeBytes { bindBlob($0, at: index) }, binding: index)
    }

    /// Binds a blob to the parameter at `index` (1-based); see ``bind(_:at:)-(Data,_)``.
    package func bind(_ value: [UInt8], at index: Int32) throws {
        try check(value.withUnsafeBytes { bindBlob($0, at: index) }, binding: index)
    }

    /// Binds NULL to the parameter at `index` (1-based).
    package func bindNull(at index: Int32) throws {
        try check(sqlite3_bind_null(statement, index), binding: index)
    }

    /// Sets every parameter back to NULL. ``Connection/cachedStatement(_:)`` does
    /// this before handing a statement out, so values never leak between uses.
    package func clearBindings() {
        sqlite3_clear_bindings(statement)
    }

    private func bindBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            // A NULL pointer would bind NULL; a zero-length blob stays a blob.
            return sqlite3_bind_zeroblob(statement, index, 0)
        }
        return sqlite3_bind_blob64(statement, index, base, UInt64(bytes.count), csqlite_transient())
    }

    @inline(__always)
    private func check(_ code: Int32, binding index: Int32) throws {
        guard code != SQLITE_OK else { return }
        var error = SQLiteError(db: handle.db, code: code, sql: sql)
        if code == SQLITE_RANGE {
            error.message = "parameter index \(index) is out of range; the statement has \(parameterCount) parameter(s)"
        } else {
            error.message = "could not bind parameter \(index): \(error.message)"
        }
        throw error
    }
}

// MARK: - Running

extension Statement {
    /// Runs the statement to its next row.
    ///
    /// - Returns: `true` when a row is available to read, `false` when the
    ///   statement has finished.
    /// - Throws: ``SQLiteError`` carrying this statement's SQL and the extended
    ///   result code. The statement is reset after an error, so it holds no lock.
    @inlinable public func step() throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            return true
        case SQLITE_DONE:
            return false
        case let code:
            throw stepFailure(code)
        }
    }

    /// The error of a step that failed with `code`, once the statement is reset.
    @usableFromInline func stepFailure(_ code: Int32) -> any Error {
        let error = SQLiteError(db: handle.db, code: code, sql: sql)
        sqlite3_reset(statement)
        return error
    }

    /// Steps until the statement finishes, ignoring any rows, then resets it
    /// (and clears its bindings when ``bindForExecution(_:at:)`` bound text),
    /// also when a step fails. Use it for INSERT, UPDATE, DELETE and DDL.
    package func execute() throws {
        defer {
            sqlite3_reset(statement)
            if rowText.isInUse { releaseRowText() }
        }
        while try step() {}
    }

    /// Runs the statement as ``execute()`` does, for a statement whose caller
    /// binds every parameter again before each run (a batch insert's rows): the
    /// text bound for execution is let go, but the bindings are not cleared row
    /// by row (~150 instructions a row). The caller calls ``clearBindings()``
    /// after its last run, so that no binding outlives the text it points at.
    package func executeRebindingEveryParameter() throws {
        do {
            while try step() {}
        } catch {
            // A failed step has reset the statement: unbind the row's text now.
            if rowText.isInUse { releaseRowText() }
            throw error
        }
        sqlite3_reset(statement)
        if rowText.isInUse { rowText.release() }
    }

    /// Unbinds the text ``bindForExecution(_:at:)`` bound (with every other
    /// parameter: the row's statement binds them all again for the next row),
    /// and lets its memory be reused.
    private func releaseRowText() {
        sqlite3_clear_bindings(statement)
        rowText.release()
    }

    /// Rewinds the statement so it can run again, ending any read it had open.
    /// Bindings are kept; see ``clearBindings()``.
    @inlinable public func reset() {
        // The return value repeats the last step's error, already thrown by step().
        sqlite3_reset(statement)
    }
}

// MARK: - Reading Columns

/// The storage class of a column value in the current row.
///
/// Related SQLite documentation: <https://sqlite.org/datatype3.html>
@_spi(DataStackInternal) public enum ColumnType: Sendable, Equatable {
    case integer, double, text, blob, null
}

extension Statement {
    /// The number of columns in each row of the result.
    @inlinable public var columnCount: Int32 {
        sqlite3_column_count(statement)
    }

    /// The name of the column at `index` (0-based), as SQLite reports it
    /// (the `AS` alias when there is one).
    package func columnName(at index: Int32) -> String {
        assertColumn(index)
        return sqlite3_column_name(statement, index).map { String(cString: $0) } ?? ""
    }

    /// The storage class of the value at `index` (0-based) in the current row.
    @inlinable public func columnType(at index: Int32) -> ColumnType {
        assertColumn(index)
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .integer
        case SQLITE_FLOAT: return .double
        case SQLITE_TEXT: return .text
        case SQLITE_BLOB: return .blob
        default: return .null
        }
    }

    /// Whether the value at `index` (0-based) in the current row is NULL.
    @inlinable public func isNull(at index: Int32) -> Bool {
        assertColumn(index)
        return sqlite3_column_type(statement, index) == SQLITE_NULL
    }

    /// The value at `index` (0-based) as an integer; NULL reads as 0, and other
    /// types convert by SQLite's rules.
    @inlinable public func int64(at index: Int32) -> Int64 {
        assertColumn(index)
        return sqlite3_column_int64(statement, index)
    }

    /// The value at `index` (0-based) as a double; NULL reads as 0.
    @inlinable public func double(at index: Int32) -> Double {
        assertColumn(index)
        return sqlite3_column_double(statement, index)
    }

    /// The value at `index` (0-based) as text, or `nil` for NULL.
    ///
    /// The string is decoded from the byte count SQLite reports, so text with
    /// embedded NUL characters survives and no `strlen` runs.
    @inlinable public func string(at index: Int32) -> String? {
        assertColumn(index)
        // `sqlite3_column_text` is NULL for a NULL value (and when memory runs
        // out); an empty text is a non-NULL pointer. So a text value costs one
        // call, not a type check first.
        if let text = sqlite3_column_text(statement, index) {
            return String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, index))), as: UTF8.self)
        }
        return sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : ""
    }

    /// The value at `index` (0-based) as bytes, or `nil` for NULL; a zero-length
    /// blob reads as empty data.
    @inlinable public func data(at index: Int32) -> Data? {
        assertColumn(index)
        guard sqlite3_column_type(statement, index) != SQLITE_NULL else { return nil }
        guard let bytes = sqlite3_column_blob(statement, index) else { return Data() }
        let count = Int(sqlite3_column_bytes(statement, index))
        return Data(bytes: bytes, count: count)
    }

    /// The value at `index` as UTF-8 text, unchecked, lent to `body` while the
    /// row is current: nil for NULL, as ``string(at:)`` reads it.
    @inlinable public func withText<Result>(at index: Int32, _ body: (UnsafeRawBufferPointer?) -> Result) -> Result {
        assertColumn(index)
        if let text = sqlite3_column_text(statement, index) {
            return body(UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, index))))
        }
        return body(sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// The value at `index` as bytes, lent to `body` while the row is current:
    /// nil for NULL, as ``data(at:)`` reads it.
    @inlinable public func withBlob<Result>(at index: Int32, _ body: (UnsafeRawBufferPointer?) -> Result) -> Result {
        assertColumn(index)
        guard sqlite3_column_type(statement, index) != SQLITE_NULL else { return body(nil) }
        guard let bytes = sqlite3_column_blob(statement, index) else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return body(UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, index))))
    }

    /// Reading past the last column is undefined in SQLite; catch it in debug builds.
    @inlinable @inline(__always)
    func assertColumn(_ index: Int32, file: StaticString = #fileID, line: UInt = #line) {
        assert(index >= 0 && index < columnCount, "column index \(index) out of range in `\(sql)`", file: file, line: line)
    }
}

// MARK: - Sendable

// A statement runs on its connection's queue; share the connection's owner, not the statement.
@available(*, unavailable) extension Statement: Sendable {}
