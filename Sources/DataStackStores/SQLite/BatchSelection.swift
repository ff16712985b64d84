@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The rows of one table a batch request works on, as a condition on that
/// table aliased `t0`, so one statement can update, delete or copy them all:
/// `UPDATE ZITEM AS t0 SET … WHERE <condition>`.
///
/// An `UPDATE` or `DELETE` cannot join. A predicate that reads only the row
/// becomes the condition itself, so SQLite scans the table (or uses an index)
/// as it would for the same statement written by hand; one that follows a
/// to-one becomes `t0.Z_PK IN (SELECT … JOIN …)`.
struct BatchSelection: Sendable {
    /// The table holding the rows.
    let table: String
    /// The `Z_ENT` numbers of the entities selected: the fetch's entity and, when it includes them, its subentities.
    let entityNumbers: [Int64]
    /// The condition, or nil for every row of the table.
    let condition: String?
    /// The condition's parameters, numbered `?1`… in it.
    let bindings: [PropertyValue]

    /// - Throws: ``ObjectGraphError/Code-swift.struct/predicateDoesNotCompile``.
    init(_ fetch: StoreFetch, schema: TableLayout) throws {
        // The condition every SQL store's batches share (DataStackStorage, StoreLayout+Batch.swift).
        (table, entityNumbers, condition, bindings) = try schema.batchCondition(for: fetch)
    }

    /// ` WHERE <condition>`, or nothing for every row.
    var whereClause: String { condition.map { " WHERE " + $0 } ?? "" }

    /// The condition restricted to one entity of the table (for what differs per entity, such as history's column masks).
    func whereClause(entity number: Int64) -> String {
        " WHERE " + (condition.map { "(\($0)) AND " } ?? "") + "t0.Z_ENT = \(number)"
    }

    /// Prepares `sql` (which uses the condition) and binds the condition's parameters.
    func prepare(_ sql: String, on connection: Connection) throws -> Statement {
        let statement = try connection.prepare(sql)
        for (offset, value) in bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        return statement
    }

}
