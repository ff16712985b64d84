import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The one SQL statement of an ``ExpressionFetch``:
/// `SELECT [DISTINCT] values FROM table t0 joins WHERE … GROUP BY … HAVING … ORDER BY … LIMIT … OFFSET …`.
///
/// The fetch's predicate, the values, the groups and the having predicate go
/// through one predicate compiler, so a to-one key path used in several of
/// them is joined once, and every constant is a numbered parameter. The sort
/// repeats a value's SQL rather than naming its column: result names are
/// caller input and never enter the SQL.
package struct ExpressionSelectQuery {
    package let sql: String
    package let bindings: [PropertyValue]

    package init(fetch: StoreFetch, expressions: ExpressionFetch, schema: TableLayout) throws {
        let mapping = try schema.mapping(for: fetch.entity)
        var compiler = PredicateSQLCompiler(schema: schema, rootAlias: "t0")
        let root = PredicateSQLCompiler<TableLayout>.Scope(parent: nil, dialect: schema.dialect)
        var context = PredicateSQLCompiler<TableLayout>.Context(scope: root, selfBase: .init(alias: "t0", entity: fetch.entity),
                                                                  variables: [:])
        var conditions = SelectQuery.entityConditions(for: fetch, schema: schema)
        if let predicate = fetch.predicate {
            conditions.append("(" + (try Self.compile(predicate) { try compiler.predicate(predicate.expression, context) }) + ")")
        }
        var values: [String] = []
        do {
            for column in expressions.columns {
                let value = try compiler.expression(column.expression.node, context)
                values.append(value.sql)
                context.values[column.name] = value
            }
        } catch let problem as PredicateProblem {
            throw FetchExpressionError(.unknownKeyPath, entityName: fetch.entity.name, location: "propertiesToFetch", message: problem.reason)
        }
        var groups: [String] = []
        for expression in expressions.groupBy {
            do {
                groups.append(try compiler.expression(expression.node, context).sql)
            } catch let problem as PredicateProblem {
                throw FetchExpressionError(.unknownKeyPath, entityName: fetch.entity.name, location: "propertiesToGroupBy", message: problem.reason)
            }
        }
        var having: String?
        if let predicate = expressions.having {
            having = try Self.compile(predicate) { try compiler.predicate(predicate.expression, context) }
        }
        let orderings = zip(expressions.sortColumns, fetch.sortDescriptors).map { column, sort in
            var value = values[column]
            if sort.caseInsensitive { value = schema.dialect.caseInsensitiveOrder(value) }
            return value + (sort.ascending ? " ASC" : " DESC")
        }

        var sql = "SELECT " + (fetch.returnsDistinctResults ? "DISTINCT " : "") + values.joined(separator: ", ")
        sql += " FROM \(mapping.table) t0" + root.from.map { " " + $0 }.joined()
        if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
        if !groups.isEmpty { sql += " GROUP BY " + groups.joined(separator: ", ") }
        if let having { sql += " HAVING " + having }
        if !orderings.isEmpty { sql += " ORDER BY " + orderings.joined(separator: ", ") }
        if fetch.fetchLimit > 0 || fetch.fetchOffset > 0 {
            sql += " LIMIT \(fetch.fetchLimit > 0 ? String(fetch.fetchLimit) : schema.dialect.noLimit)" + (fetch.fetchOffset > 0 ? " OFFSET \(fetch.fetchOffset)" : "")
        }
        self.sql = sql
        self.bindings = compiler.bindings
    }

    /// Runs `body`, giving a predicate's problem the predicate's format.
    private static func compile(_ predicate: FetchPredicate, _ body: () throws -> String) throws -> String {
        do {
            return try body()
        } catch let problem as PredicateProblem {
            throw problem.error(format: predicate.source ?? predicate.description)
        }
    }
}
