import CSQLite

/// A column of the current row, looked up once: its storage class and its
/// contents read from the same `sqlite3_value`.
///
/// Each `sqlite3_column_*` call finds the column again and enters and leaves
/// the connection's mutex around the read (~30 instructions). A typed read
/// of a column takes two of them — its type, then its value; text takes two
/// too, the text and its length — so a row decoded column by column paid
/// that twice per column. Read through its value, each column pays it once.
///
/// SQLite calls the value `sqlite3_column_value` returns *unprotected*: reading
/// it with `sqlite3_value_*` is not thread-safe, because the connection's
/// mutex is not held. A ``Statement`` is only used on its connection's queue,
/// which is what makes these reads safe; the value lives until the statement
/// steps, resets or is finalized, so never keep one past the current row.
///
/// ```swift
/// let column = statement.column(at: 3)
/// let price = column.type == .null ? nil : column.double
/// ```
///
/// Related SQLite documentation: <https://sqlite.org/c3ref/column_blob.html>
@_spi(DataStackInternal) public struct ColumnValue {
    @usableFromInline let value: OpaquePointer

    @inlinable init(_ value: OpaquePointer) {
        self.value = value
    }

    /// The storage class of the value.
    @inlinable public var type: ColumnType {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer
        case SQLITE_FLOAT: return .double
        case SQLITE_TEXT: return .text
        case SQLITE_BLOB: return .blob
        default: return .null
        }
    }

    /// The value as an integer; NULL reads as 0, and other types convert by SQLite's rules.
    @inlinable public var int64: Int64 { sqlite3_value_int64(value) }

    /// The value as a double; NULL reads as 0.
    @inlinable public var double: Double { sqlite3_value_double(value) }

    /// The value as UTF-8 text, unchecked, lent to `body`: nil for NULL, as
    /// ``Statement/withText(at:_:)`` reads it.
    @inlinable public func withText<Result>(_ body: (UnsafeRawBufferPointer?) -> Result) -> Result {
        if let text = sqlite3_value_text(value) {
            return body(UnsafeRawBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))))
        }
        return body(sqlite3_value_type(value) == SQLITE_NULL ? nil : UnsafeRawBufferPointer(start: nil, count: 0))
    }
}

extension Statement {
    /// The value at `index` (0-based) in the current row, for reading its
    /// type and contents with one column lookup (see ``ColumnValue``).
    @inlinable public func column(at index: Int32) -> ColumnValue {
        assertColumn(index)
        return ColumnValue(sqlite3_column_value(statement, index))
    }
}
