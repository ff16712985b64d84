@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Computed dictionary fetches

extension SQLiteStore {
    /// Runs an ``ExpressionFetch`` as one statement, reading each value as its column's result type.
    func execute(_ fetch: StoreFetch, expressions: ExpressionFetch, in context: ManagedObjectContext?) throws -> StoreResult {
        let query = try ExpressionSelectQuery(fetch: fetch, expressions: expressions, schema: try schema)
        return try read(for: context) { connection in
            let statement = try connection.cachedStatement(query.sql)
            // A statement left mid-step holds its read open: later reads would see an old snapshot.
            defer { statement.reset() }
            for (offset, value) in query.bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
            var rows = try Self.dictionaries(from: statement, columns: expressions.columns.map { ($0.name, $0.resultType) })
            try resolveExternalData(in: &rows, columns: try Self.externalDataColumns(of: expressions, from: fetch.entity), of: fetch.entity)
            return .dictionaries(rows)
        }
    }

    /// The fetched values that read an attribute with external binary storage
    /// as it is (a key path, not a computation on it).
    private static func externalDataColumns(of expressions: ExpressionFetch, from entity: EntityDescription) throws -> Set<String> {
        var names = Set<String>()
        for column in expressions.columns {
            guard case .keyPath(let keys) = column.expression.node,
                  try KeyPathInfo.walk(keys, from: entity).attribute?.storesExternalBinaryData == true else { continue }
            names.insert(column.name)
        }
        return names
    }
}
