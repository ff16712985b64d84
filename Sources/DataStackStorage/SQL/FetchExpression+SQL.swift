import Foundation
@_spi(StoreImplementation) import ObjectGraph

extension FetchExpression {
    /// Compiles the expression to an SQL value on rows of `entity` at `rootAlias`,
    /// for a statement of one's own (a batch update's `SET price = …`).
    ///
    /// - Parameter parametersBefore: How many parameters the statement has
    ///   before this expression's, so that several expressions can share it.
    /// - Returns: `sql`, whose parameters are numbered `?(parametersBefore + 1)`…
    ///   (bind `bindings[i]` at `parametersBefore + i + 1`); `joins`, the
    ///   `LEFT JOIN`s its to-one key paths need after the root table, made by
    ///   the predicate compiler as for a predicate; `bindings`, the constants.
    /// - Throws: ``FetchExpressionError`` for a key path the entity lacks.
    package func sql<Schema: PredicateSQLSchema>(for entity: EntityDescription, schema: Schema, rootAlias: String,
                                                 parametersBefore: Int = 0) throws -> (sql: String, joins: [String], bindings: [PropertyValue]) {
        var compiler = PredicateSQLCompiler(schema: schema, rootAlias: rootAlias, parametersBefore: parametersBefore)
        let root = PredicateSQLCompiler<Schema>.Scope(parent: nil, dialect: schema.dialect)
        let context = PredicateSQLCompiler<Schema>.Context(scope: root, selfBase: .init(alias: rootAlias, entity: entity), variables: [:])
        do {
            let value = try compiler.expression(node, context)
            return (value.sql, root.from, compiler.bindings)
        } catch let problem as PredicateProblem {
            throw FetchExpressionError(.unknownKeyPath, entityName: entity.name, location: "expression \(self)", message: problem.reason)
        }
    }
}

extension PredicateSQLCompiler {
    /// An expression as SQL: key paths through the predicate compiler's joins
    /// (so a fetch's predicate and its values share them), constants as
    /// parameters, `/` forced to floating point, `sum` as `TOTAL` (0 for no
    /// rows, as Core Data's `sum:` compiles).
    mutating func expression(_ node: FetchExpression.Node, _ context: Context) throws -> Operand {
        switch node {
        case .keyPath(let keys):
            return try walkToOperand(keys, from: context.selfBase, context, many: nil)
        case .constant(let value):
            return bind(value)
        case .arithmetic(let op, let lhs, let rhs):
            let a = try expression(lhs, context).sql, b = try expression(rhs, context).sql
            let sql: String
            switch op {
            case .divide: sql = dialect.divide(a, by: b)
            default: sql = "(\(a) \(op.rawValue) \(b))"
            }
            return Operand(sql: sql, family: .numeric)
        case .aggregate(let function, let argument):
            let value = try expression(argument, context)
            let sql = switch function {
            case .sum: dialect.sum(value.sql)
            case .average: "AVG(\(value.sql))"
            case .min: "MIN(\(value.sql))"
            case .max: "MAX(\(value.sql))"
            case .count: "COUNT(\(value.sql))"
            case .countDistinct: "COUNT(DISTINCT \(value.sql))"
            }
            return Operand(sql: sql, family: function == .min || function == .max ? value.family : .numeric)
        }
    }
}
