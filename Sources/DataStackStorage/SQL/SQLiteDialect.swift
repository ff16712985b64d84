import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// SQLite's SQL, as Core Data's stores are written, with the `DS_` functions
/// the SQLite store installs on each connection (PredicateSQLFunctions.swift):
/// they call the in-memory evaluator's own code, so a string comparison in SQL
/// and in memory agree to the character.
@_spi(StoreImplementation) public struct SQLiteDialect: SQLDialect, Hashable {
    public init() {}

    public var storesExternalBinaryData: Bool { true }

    /// Keys as a JSON array, which `json_each` reads.
    public func keyArray(_ keys: [Int64]) -> StoredValue {
        .text("[" + keys.map(String.init).joined(separator: ",") + "]")
    }

    public func keyList(parameter number: Int) -> String {
        "SELECT value FROM json_each(\(placeholder(number)))"
    }

    public func rankedKeyList(parameter number: Int) -> String {
        "SELECT value AS m, key + 1 AS ord FROM json_each(\(placeholder(number)))"
    }

    public func jsonArrayElements(_ array: String, asText: Bool) -> String {
        "SELECT value FROM json_each(\(array))"
    }

    /// `json_each`: SQLite reads the left table of a `CROSS JOIN` first.
    public func jsonArrayTable(_ array: String, alias: String) -> String? {
        "json_each(\(array)) \(alias)"
    }

    /// `?`: parameters numbered in order of appearance need no number.
    public func orderedPlaceholder(_ number: Int) -> String { "?" }

    /// `TOTAL`, SQLite's `SUM` that gives 0 rather than NULL for no rows.
    public func sum(_ value: String) -> String { "TOTAL(\(value))" }

    public func searchRelevance(of expression: String, query: String) -> String? {
        "DS_SEARCH_RELEVANCE(\(expression), \(query))"
    }

    /// Writes `+column` for columns compared with values of another family:
    /// SQLite would otherwise apply the column's affinity to the other side
    /// (turning `'10'` into `10` for an INTEGER column), which the in-memory
    /// evaluator does not do. Same-family comparisons keep the bare column, so
    /// indexes still serve them.
    public func prepareComparison(_ operands: inout [SQLOperand]) throws {
        let families = Set(operands.map { $0.family.map { "\($0)" } ?? "nil" })
        guard families.count > 1 || families.contains("nil") else { return }
        for index in operands.indices where operands[index].isColumn {
            operands[index].sql = "+" + operands[index].sql
            operands[index].isColumn = false
        }
    }

    public func stringTest(_ test: SQLStringTest, _ left: SQLOperand, _ right: SQLOperand, options: ComparisonOptions) throws -> String {
        "DS_\(test.description)(\(left.sql), \(right.sql), \(options.rawValue))"
    }

    public func folded(_ operand: SQLOperand, options: ComparisonOptions) throws -> SQLOperand {
        SQLOperand(sql: "DS_FOLD(\(operand.sql), \(options.rawValue))", family: operand.family)
    }
}
