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
            var rows: [[String: PropertyValue]] = []
            while try statement.step() {
                var row: [String: PropertyValue] = [:]
                for (position, column) in expressions.columns.enumerated() {
                    row[column.name] = statement.attributeValue(at: Int32(position), type: column.resultType)
                }
                rows.append(row)
            }
            return .dictionaries(rows)
        }
    }
}
