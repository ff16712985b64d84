import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

extension FetchPredicate {
    /// Installs the SQL functions compiled predicates call, on one connection.
    ///
    /// Each gives exactly the in-memory evaluator's answer, because both run the
    /// same Swift code (``PredicateScalar``):
    /// - `DS_FOLD(value, flags)`: text folded for `[c]` (flags 1) and `[d]`
    ///   (flags 2); any other value unchanged.
    /// - `DS_BEGINSWITH(text, prefix, flags)`, `DS_ENDSWITH`, `DS_CONTAINS`,
    ///   `DS_LIKE(text, pattern, flags)`, `DS_MATCHES(text, regex, flags)`:
    ///   NULL if either value is NULL, 0 if either is not text, else 0 or 1.
    /// - `DS_SEARCH_RELEVANCE(text, query)`: what relevance sorts order by
    ///   (``FetchSort/init(key:relevanceTo:ascending:)``).
    ///
    /// Call it once per connection, before the first fetch with a predicate.
    ///
    /// - Throws: ``SQLiteError`` if SQLite refuses a function.
    package static func registerFunctions(on connection: Connection) throws {
        try connection.registerFunction(name: "DS_FOLD", argumentCount: 2, deterministic: true) { arguments in
            guard case .text(let text) = arguments[0] else { return arguments[0] }
            return .text(PredicateScalar.fold(text, options(arguments[1])))
        }
        let tests: [(String, ComparisonOperator)] = [
            ("DS_BEGINSWITH", .beginsWith), ("DS_ENDSWITH", .endsWith), ("DS_CONTAINS", .contains),
            ("DS_LIKE", .like), ("DS_MATCHES", .matches),
        ]
        for (name, op) in tests {
            try connection.registerFunction(name: name, argumentCount: 3, deterministic: true) { arguments in
                let result = PredicateScalar.stringTest(op, scalar(arguments[0]), scalar(arguments[1]), options(arguments[2]))
                return result.map { .integer($0 ? 1 : 0) } ?? .null
            }
        }
        try registerRelevanceFunction(on: connection)
    }

    /// The SQL function the SQLite store orders relevance sorts with:
    /// `DS_SEARCH_RELEVANCE(text, query)`, ``SearchQuery/relevance(of:)`` of
    /// the text (0 for no text). The query is parsed once per statement run
    /// rather than per row: the function remembers the last one it parsed.
    private static func registerRelevanceFunction(on connection: Connection) throws {
        final class LastQuery: @unchecked Sendable {
            // @unchecked Sendable: a connection runs one statement at a time, on one thread at a time.
            var query: SearchQuery?
        }
        let last = LastQuery()
        try connection.registerFunction(name: "DS_SEARCH_RELEVANCE", argumentCount: 2, deterministic: true) { arguments in
            guard case .text(let text) = arguments[0], case .text(let queryText) = arguments[1] else { return .double(0) }
            let query: SearchQuery
            if let cached = last.query, cached.text == queryText {
                query = cached
            } else {
                query = try SearchQuery(queryText)
                last.query = query
            }
            return .double(query.relevance(of: [text]))
        }
    }

    private static func options(_ value: SQLiteValue) -> ComparisonOptions {
        guard case .integer(let flags) = value else { return [] }
        return ComparisonOptions(rawValue: Int(truncatingIfNeeded: flags)).intersection([.caseInsensitive, .diacriticInsensitive])
    }

    private static func scalar(_ value: SQLiteValue) -> PredicateScalar {
        switch value {
        case .null: .null
        case .integer(let v): .integer(v)
        case .double(let v): .real(v)
        case .text(let v): .text(v)
        case .blob(let v): .blob(Data(v))
        }
    }
}
