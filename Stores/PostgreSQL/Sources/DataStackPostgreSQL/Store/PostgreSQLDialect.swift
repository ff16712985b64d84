import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// PostgreSQL's SQL (12 or later), for the shared Core Data layout and
/// predicate compiler: `$n` parameters typed where its planner cannot infer
/// them, real booleans and types, key arrays as `bigint[]`.
///
/// PostgreSQL cannot call Swift, so where SQLite runs the `DS_` functions the
/// SQLite store installs, the string operators are written with PostgreSQL's
/// built-in functions, which agree with the in-memory evaluator on text
/// without `[d]`:
/// - `BEGINSWITH` `starts_with(a, b)`, `ENDSWITH` `right(a, length(b)) = b`,
///   `CONTAINS` `strpos(a, b) > 0`;
/// - `LIKE` `a LIKE b`, with `b`'s `*` and `?` turned into `%` and `_` and its
///   own `%`, `_` and `\` escaped;
/// - `MATCHES` `a ~ ('^(?:' || b || ')$')` (`~*` with `[c]`): the whole string,
///   as ICU's `matches`; PostgreSQL's regular expressions are POSIX ARE, which
///   agree with ICU's on the common syntax but not on every extension;
/// - `[c]` `lower()` on both sides. `[d]` throws: neither the `unaccent` extension
///   nor `normalize(NFD)` without the combining marks folds as Foundation does
///   (it folds grapheme cluster by cluster, which PostgreSQL's SQL cannot see;
///   DiacriticFoldingTests holds the cases).
///
/// `MATCHES[search]` and relevance sorts: PostgreSQLDialect+Search.swift.
@_spi(StoreImplementation)
public struct PostgreSQLDialect: SQLDialect, Hashable {
    public init() {}

    public func placeholder(_ number: Int) -> String { "$\(number)" }

    public func parameter(_ number: Int, boundTo value: PropertyValue) -> String {
        switch value {
        case .integer, .bool, .object: "$\(number)::bigint"
        case .double, .date, .decimal: "$\(number)::float8"
        case .data, .uuid: "$\(number)::bytea"
        case .string, .uri: "$\(number)::text"
        case .null, .objects: "$\(number)"
        }
    }

    public func typedPlaceholder(_ number: Int, type: String) -> String { "$\(number)::\(type)" }

    /// `NULL`, whose type PostgreSQL infers where a parameter's it could not.
    public var nullLiteral: String? { "NULL" }

    public var trueLiteral: String { "TRUE" }
    public var falseLiteral: String { "FALSE" }
    public func isTrue(_ condition: String) -> String { "(\(condition)) IS TRUE" }
    public func isNotTrue(_ condition: String) -> String { "(\(condition)) IS NOT TRUE" }

    /// Real types for the storage form every store shares.
    public func columnType(declared: String) -> String {
        switch declared {
        case "INTEGER": "BIGINT"
        case "TIMESTAMP", "FLOAT", "DECIMAL": "DOUBLE PRECISION"
        case _ where declared.hasPrefix("VARCHAR"): "TEXT"
        default: "BYTEA"
        }
    }

    public var keyType: String { "BIGINT" }

    /// The column alone: PostgreSQL has no `BINARY` collation, and its default compares keys as SQLite's does.
    public func uniqueIndexColumn(_ column: String) -> String { column }

    /// PostgreSQL folds only the ASCII letters of an unquoted identifier, to lower case.
    public func unquotedIdentifierFolding(_ name: String) -> String {
        String(decoding: name.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// The bytes stay in the row: there is no file beside a server's database.
    public var storesExternalBinaryData: Bool { false }

    /// One round trip for many rows' updates, rather than one per row.
    public var updatesRowsInBatches: Bool { true }

    /// An array literal, which `$n::bigint[]` reads.
    public func keyArray(_ keys: [Int64]) -> StoredValue {
        .text("{" + keys.map(String.init).joined(separator: ",") + "}")
    }

    public func keyList(parameter number: Int) -> String { "SELECT unnest($\(number)::bigint[])" }

    public func rankedKeyList(parameter number: Int) -> String {
        "SELECT m, ord FROM unnest($\(number)::bigint[]) WITH ORDINALITY AS ranked(m, ord)"
    }

    /// `= ANY(…)`: PostgreSQL looks an array up in the key's index at once; a subquery over it costs a join.
    public func keyMembership(parameter number: Int) -> String { "= ANY($\(number)::bigint[])" }

    public func jsonArrayElements(_ array: String, asText: Bool) -> String {
        "SELECT \(asText ? "v" : "v::bigint") FROM jsonb_array_elements_text(\(array)::jsonb) AS v"
    }

    public func caseInsensitiveOrder(_ expression: String) -> String { "lower(\(expression))" }

    public var noLimit: String { "ALL" }

    /// A row without a rank comes first, as SQLite orders NULL; PostgreSQL orders it last unless told.
    public func nullsFirst(_ ordering: String) -> String { ordering + " NULLS FIRST" }

    /// SQLite divides by zero to NULL; PostgreSQL would raise an error.
    public func divide(_ a: String, by b: String) -> String { "(CAST(\(a) AS float8) / NULLIF(\(b), 0))" }

    public func sum(_ value: String) -> String { "COALESCE(SUM(\(value)), 0)" }

    /// Toward zero, as the in-memory store converts a real into an integer
    /// attribute: PostgreSQL's own cast to `BIGINT` rounds. Through `numeric`,
    /// so a 64-bit integer keeps every digit; a value past 64 bits fails the
    /// cast (SQLSTATE 22003), which the batch reports as out of range.
    public func truncatedToInteger(_ value: String) -> String { "CAST(trunc(CAST(\(value) AS numeric)) AS BIGINT)" }

    /// PostgreSQL compares values of one type only: a comparison across families throws.
    public func prepareComparison(_ operands: inout [SQLOperand]) throws {
        let families = Set(operands.compactMap(\.family))
        guard families.count > 1 else { return }
        let names = families.map { family -> String in
            switch family {
            case .numeric: "a number"
            case .text: "text"
            case .blob: "binary data"
            }
        }.sorted()
        throw Unsupported("the comparison puts \(names.joined(separator: " beside ")), and PostgreSQL compares values of one kind only")
    }

    public func stringTest(_ test: SQLStringTest, _ left: SQLOperand, _ right: SQLOperand, options: ComparisonOptions) throws -> String {
        if left.isNil || right.isNil { return "NULL" }
        guard left.family == .text, right.family == .text else {
            throw Unsupported("\(test) compares text, and PostgreSQL compares a string with nothing else")
        }
        if test == .matches {
            try requireNoDiacriticFolding(options)
            let op = options.contains(.caseInsensitive) ? "~*" : "~"
            return "(\(left.sql) \(op) ('^(?:' || \(right.sql) || ')$'))"
        }
        let a = options.isEmpty ? left.sql : try folded(left, options: options).sql
        let b = options.isEmpty ? right.sql : try folded(right, options: options).sql
        switch test {
        case .beginsWith: return "starts_with(\(a), \(b))"
        case .endsWith: return "(right(\(a), length(\(b))) = \(b))"
        case .contains: return "(strpos(\(a), \(b)) > 0)"
        default:
            // Escape LIKE's own wildcards and escape character, then turn Core Data's into them.
            var pattern = b
            for (from, to) in [("\\\\", "\\\\\\\\"), ("%", "\\\\%"), ("_", "\\\\_"), ("*", "%"), ("?", "_")] {
                pattern = "replace(\(pattern), E'\(from)', E'\(to)')"
            }
            return "(\(a) LIKE \(pattern))"
        }
    }

    /// `lower()`: only text folds; the evaluator leaves other values as they are.
    public func folded(_ operand: SQLOperand, options: ComparisonOptions) throws -> SQLOperand {
        try requireNoDiacriticFolding(options)
        guard operand.family == .text else { return operand }
        return SQLOperand(sql: "lower(\(operand.sql))", family: operand.family)
    }

    private func requireNoDiacriticFolding(_ options: ComparisonOptions) throws {
        if options.contains(.diacriticInsensitive) {
            throw Unsupported("[d] (diacritic-insensitive) comparisons can't be compiled for PostgreSQL: no fold it can run agrees with Foundation's, which the SQLite store uses")
        }
    }

    /// Why PostgreSQL cannot write a comparison; the compiler reports it as the predicate's error.
    struct Unsupported: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

@_spi(StoreImplementation)
extension SQLDialect where Self == PostgreSQLDialect {
    /// PostgreSQL 12 or later.
    public static var postgreSQL: PostgreSQLDialect { PostgreSQLDialect() }
}
