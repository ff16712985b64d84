import Foundation

// MARK: - Computed dictionary fetches

extension SQLiteStore {
    /// Runs an ``ExpressionFetch`` as one statement, reading each value as its column's result type.
    func execute(_ fetch: StoreFetch, expressions: ExpressionFetch) throws -> StoreResult {
        let query = try ExpressionSelectQuery(fetch: fetch, expressions: expressions, schema: try schema)
        return try read { connection in
            let statement = try connection.cachedStatement(query.sql)
            // A statement left mid-step holds its read open: later reads would see an old snapshot.
            defer { statement.reset() }
            for (offset, value) in query.bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
            return .dictionaries(try Self.dictionaries(from: statement, columns: expressions.columns.map { ($0.name, $0.resultType) }))
        }
    }
}
