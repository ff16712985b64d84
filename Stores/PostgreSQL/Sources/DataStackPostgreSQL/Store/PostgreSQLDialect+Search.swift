import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// `MATCHES[search]` and relevance sorts over the store's own index
/// (``PostgreSQLSearchIndex``): a query's value is one JSON parameter holding,
/// per term left to right, its `tsquery` (`q`), tokens (`t`), whether it is a
/// prefix (`p`) and whether it counts toward relevance (`r`); the SQL is the
/// query's tree of AND, OR and NOT over terms, each term true when one of the
/// searched columns' `tsvector` matches its `tsquery`.
@_spi(StoreImplementation)
extension PostgreSQLDialect {
    public func searchMatchValue(_ query: SearchQuery) throws -> String {
        try Self.queryValue(query)
    }

    public func searchRelevanceValue(_ query: SearchQuery) throws -> String {
        try Self.queryValue(query)
    }

    /// `alias.Z_PK IN (SELECT s.Z_PK FROM DS_SEARCH_<TABLE> s WHERE <tree>)`.
    public func searchMatch(_ search: SQLSearch) throws -> String? {
        let side = PostgreSQLSearchIndex.sideTable(of: search.table)
        let tree = Self.condition(search.query.storeExpression, columns: search.columns, table: search.table,
                                  query: "(\(search.parameter))::jsonb")
        return "\(search.alias).Z_PK IN (SELECT s.Z_PK FROM \(side) s WHERE \(tree))"
    }

    /// The relevance of the column, 0 for a row it does not match (or without a value).
    public func searchRelevance(_ search: SQLSearch) throws -> String? {
        let side = PostgreSQLSearchIndex.sideTable(of: search.table)
        let column = search.columns[0]
        let query = "(\(search.parameter))::jsonb"
        let matches = Self.condition(search.query.storeExpression, columns: [column], table: search.table, query: query)
        return """
            COALESCE((SELECT CASE WHEN NOT (\(matches)) THEN 0::float8 \
            WHEN s.ZINEXACT THEN (CASE WHEN ds_search_refuse('\(search.table)', s.Z_PK) THEN 0::float8 END) \
            ELSE ds_search_relevance(s.\(column), \(query)) END \
            FROM \(side) s WHERE s.Z_PK = \(search.alias).Z_PK), 0::float8)
            """
    }

    /// The tree as SQL over the side table's row `s`. A phrase reads positions, which a row
    /// marked inexact does not hold exactly: there it raises rather than answer.
    private static func condition(_ expression: SearchExpression, columns: [String], table: String, query: String) -> String {
        switch expression {
        case .term(let term):
            let tsquery = "((\(query))->'q'->>\(term.index))::tsquery"
            let test = "(" + columns.map { "s.\($0) @@ \(tsquery)" }.joined(separator: " OR ") + ")"
            guard term.tokens.count > 1 else { return test }
            return "(CASE WHEN s.ZINEXACT THEN ds_search_refuse('\(table)', s.Z_PK) ELSE \(test) END)"
        case .and(let operands):
            return "(" + operands.map { condition($0, columns: columns, table: table, query: query) }.joined(separator: " AND ") + ")"
        case .or(let operands):
            return "(" + operands.map { condition($0, columns: columns, table: table, query: query) }.joined(separator: " OR ") + ")"
        case .not(let lhs, let rhs):
            return "(\(condition(lhs, columns: columns, table: table, query: query)) AND NOT \(condition(rhs, columns: columns, table: table, query: query)))"
        }
    }

    /// The JSON value of a query's parameter.
    ///
    /// - Throws: ``PostgreSQLDialect/Unsupported`` for a word longer than the index compares exactly.
    static func queryValue(_ query: SearchQuery) throws -> String {
        struct Value: Encodable {
            var q: [String] = []
            var t: [[String]] = []
            var p: [Bool] = []
            var r: [Bool] = []
        }
        var value = Value()
        for term in query.storeExpression.terms {
            if let long = term.tokens.first(where: { $0.utf8.count > PostgreSQLSearchIndex.maximumQueryWordBytes }) {
                throw Unsupported("""
                    the search word \(long.prefix(16))… has \(long.utf8.count) bytes, and PostgreSQL's index keeps the first \
                    \(PostgreSQLSearchIndex.maximumWordBytes) bytes of a word: words of up to \
                    \(PostgreSQLSearchIndex.maximumQueryWordBytes) bytes are searched as on SQLite
                    """)
            }
            let lexemes = term.tokens.map(PostgreSQLSearchIndex.quoted)
            value.q.append(lexemes.joined(separator: " <-> ") + (term.isPrefix ? ":*" : ""))
            value.t.append(term.tokens)
            value.p.append(term.isPrefix)
            value.r.append(term.isPositive)
        }
        return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }
}
