import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - History tombstones
//
// A deleted object's preserved attributes (`preservesValueInHistoryOnDeletion`)
// go into `ACHANGE.ZTOMBSTONE<n>`, numbered as Core Data numbers them
// (`StoreLayout.tombstoneAttributes(ofEntityNumbered:)`), and come back as the
// change's `tombstone`, as on the SQLite store.
//
// SQLite's columns take a value of any type; one PostgreSQL column holds the
// values of several entities' attributes, so the columns are `TEXT` holding
// each value in PostgreSQL's own text form of its storage type (a number as
// `float8` or `bigint` prints it, binary data as `bytea` prints it, `\x…`):
// what a `RETURNING` of the row's columns gives as it is, and what the row
// reader parses back by the attribute's type.
//
// The columns are added when a store first records a tombstone (a model that
// gained a preserved attribute needs no migration for it): the catalog is read
// first, so a store whose columns exist never takes `ACHANGE`'s table lock.
extension PostgreSQLStore {
    /// The number of `ZTOMBSTONE<n>` columns `ACHANGE` has.
    func tombstoneColumnCount(_ connection: PostgreSQLConnection) throws -> Int {
        let result = try connection.execute(cached: """
            SELECT count(*) FROM information_schema.columns \
            WHERE table_schema = current_schema() AND table_name = 'achange' AND column_name LIKE 'ztombstone%'
            """, [])
        return Int(try result.requiredInt64(row: 0, column: 0))
    }

    /// Adds the tombstone columns the layout needs that `ACHANGE` lacks, inside
    /// the caller's transaction (another machine adding them meanwhile waits,
    /// then finds them: `IF NOT EXISTS`).
    func ensureTombstoneColumns(_ count: Int, _ connection: PostgreSQLConnection) throws {
        let present = try tombstoneColumnCount(connection)
        guard present < count else { return }
        let additions = (present..<count).map { "ADD COLUMN IF NOT EXISTS ZTOMBSTONE\($0) TEXT" }.joined(separator: ", ")
        _ = try connection.execute("ALTER TABLE ACHANGE \(additions)")
    }

    /// A preserved value in its tombstone column's text form; nil for nil.
    static func tombstoneText(_ value: PropertyValue) -> String? {
        switch StoredValue(value) {
        case .null: return nil
        case .integer(let integer): return String(integer)
        case .real(let real):
            if real.isNaN { return "NaN" }
            if real.isInfinite { return real > 0 ? "Infinity" : "-Infinity" }
            return "\(real)"
        case .text(let text): return text
        case .blob(let data):
            let digits = Array("0123456789abcdef".utf8)
            var text: [UInt8] = Array("\\x".utf8)
            text.reserveCapacity(2 + data.count * 2)
            for byte in data {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0f)])
            }
            return String(decoding: text, as: UTF8.self)
        }
    }

    /// A `text[]` literal of `values` (nil as `NULL`), each element quoted.
    static func textArray(_ values: [String?]) -> String {
        "{" + values.map { value in
            guard let value else { return "NULL" }
            return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
    }

    /// `, ZTOMBSTONE0, …` for an `INSERT`'s column list.
    static func tombstoneColumnList(_ count: Int) -> String {
        (0..<count).map { ", ZTOMBSTONE\($0)" }.joined()
    }
}
