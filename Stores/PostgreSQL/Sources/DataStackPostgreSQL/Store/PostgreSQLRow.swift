import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// One row of a result, as ``ObjectGraph/RowReader`` reads it.
struct PostgreSQLRow: StoredRow {
    let result: PostgreSQLResult
    let row: Int

    func isNull(at column: Int) -> Bool { result.isNull(row: row, column: column) }
    func int64(at column: Int) throws -> Int64 { try result.int64(row: row, column: column) ?? 0 }
    func double(at column: Int) throws -> Double { try result.double(row: row, column: column) ?? 0 }
    func string(at column: Int) -> String? { result.string(row: row, column: column) }
    func data(at column: Int) throws -> Data? { try result.bytes(row: row, column: column).map { Data($0) } }
}

extension PostgreSQLResult {
    /// Each row, for reading with ``ObjectGraph/RowReader``.
    var rows: some Collection<PostgreSQLRow> { (0..<rowCount).lazy.map { PostgreSQLRow(result: self, row: $0) } }
}

extension PostgreSQLValue {
    /// A value in the stores' storage form (``ObjectGraph/StoreLayout``'s
    /// bindings) as a parameter.
    init(stored value: PropertyValue) {
        switch value {
        case .null, .objects: self = .null
        case .integer(let v): self.init(v)
        case .double(let v): self = v.isNaN ? .null : .init(v)
        case .bool(let v): self.init(Int64(v ? 1 : 0))
        case .string(let v): self = .text(v)
        case .data(let v): self = .bytes(Array(v))
        case .date(let v): self.init(v.timeIntervalSinceReferenceDate)
        case .uuid(let v): self = .bytes(withUnsafeBytes(of: v.uuid) { Array($0) })
        case .uri(let v): self = .text(v.absoluteString)
        case .decimal(let v): self.init(NSDecimalNumber(decimal: v).doubleValue)
        case .object(let id): self = id.primaryKey.map { .init($0) } ?? .null
        }
    }

    /// Keys as one `bigint[]` parameter (`{1,2,3}`).
    init(keys: some Sequence<Int64>) {
        self = .text("{" + keys.map(String.init).joined(separator: ",") + "}")
    }
}
