import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// One row of a result, as ``DataStackStorage/RowReader`` reads it.
struct PostgreSQLRow: StoredRow {
    let result: PostgreSQLResult
    let row: Int

    func isNull(at column: Int) -> Bool { result.isNull(row: row, column: column) }
    func int64(at column: Int) throws -> Int64 { try result.requiredInt64(row: row, column: column) }
    func double(at column: Int) throws -> Double { try result.requiredDouble(row: row, column: column) }
    func string(at column: Int) -> String? { result.string(row: row, column: column) }
    func data(at column: Int) throws -> Data? { try result.bytes(row: row, column: column).map { Data($0) } }
    func withUTF8<Value>(at column: Int, _ body: (UnsafeRawBufferPointer?) throws -> Value) rethrows -> Value {
        try result.withText(row: row, column: column, body)
    }
}

extension PostgreSQLResult {
    /// Each row, for reading with ``DataStackStorage/RowReader``.
    var rows: some Collection<PostgreSQLRow> { (0..<rowCount).lazy.map { PostgreSQLRow(result: self, row: $0) } }

    /// An integer the store wrote and never leaves NULL (a key, a version, a
    /// count): a NULL there is a damaged row, an error, never 0.
    func requiredInt64(row: Int, column: Int) throws -> Int64 {
        guard let value = try int64(row: row, column: column) else { throw unexpectedNull(row: row, column: column) }
        return value
    }

    /// A number the store wrote and never leaves NULL (a timestamp).
    func requiredDouble(row: Int, column: Int) throws -> Double {
        guard let value = try double(row: row, column: column) else { throw unexpectedNull(row: row, column: column) }
        return value
    }

    private func unexpectedNull(row: Int, column: Int) -> PostgreSQLError {
        PostgreSQLError(kind: .other, message: "column \(columnName(at: column)) of row \(row) is NULL where the store always writes a value")
    }
}

extension PostgreSQLValue {
    /// A stored value (``DataStackStorage/StoredValue``) as a parameter.
    init(_ value: StoredValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self.init(v)
        case .real(let v): self.init(v)
        case .text(let v): self = .text(v)
        case .blob(let v): self = .bytes(Array(v))
        }
    }
}
