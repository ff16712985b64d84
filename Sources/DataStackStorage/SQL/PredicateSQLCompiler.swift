import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// How the SQLite store lays out entities, as the SQL compiler needs it.
///
/// The store implements it over Core Data's file format; tests implement it
/// over hand-made tables. Every returned fragment is SQL written by the store,
/// never caller input.
package protocol PredicateSQLSchema {
    /// The column holding an attribute, or a to-one relationship's foreign key,
    /// of the row at `alias` (`"t0.ZPRICE"`, `"t0.ZCOMPANY"`).
    func columnSQL(for property: PropertyDescription, alias: String) throws -> String
    /// A join that brings a to-one relationship's destination in as `toAlias`,
    /// keeping rows whose relationship is nil: `"LEFT JOIN ZCOMPANY t1 ON t1.Z_PK = t0.ZCOMPANY"`.
    func toOneJoin(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> String
    /// A to-many relationship's destination rows as `toAlias`: the FROM item
    /// (`"ZUPDATE t2"`, or a join table joined to the destination table) and the
    /// condition tying them to the row at `fromAlias` (`"t2.ZCOMPANY = t0.Z_PK"`,
    /// plus a `Z_ENT` test when the destination shares its table with other entities).
    func toManySource(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> (from: String, correlation: String)
    /// The primary key of the row at `alias` (`"t0.Z_PK"`).
    func primaryKeySQL(alias: String) -> String
    /// A condition true for the row at `alias` when its `attributes` (of one
    /// entity, all indexed for search) match `search`, whose value
    /// (``SQLDialect/searchMatchValue(_:)``: for SQLite its FTS5 expression) is in
    /// the parameter `query` (`"?3"`): `"t0.Z_PK IN (SELECT rowid FROM … MATCH …)"`,
    /// or what the dialect writes (``SQLDialect/searchMatch(_:)``).
    ///
    /// - Throws: when the layout has no full-text index for them.
    func searchMatchSQL(for attributes: [AttributeDescription], alias: String, query: String, search: SearchQuery) throws -> String
    /// The SQL the layout's store speaks; SQLite unless it says otherwise.
    var dialect: any SQLDialect { get }
}

extension PredicateSQLSchema {
    package var dialect: any SQLDialect { SQLiteDialect() }

    /// Layouts without full-text indexes: every search throws.
    package func searchMatchSQL(for attributes: [AttributeDescription], alias: String, query: String, search: SearchQuery) throws -> String {
        throw PredicateProblem("this store has no full-text index, so MATCHES[search] can't be compiled to its SQL")
    }
}

extension FetchPredicate {
    /// Compiles the predicate to an SQL condition on rows of `entity` at `rootAlias`.
    ///
    /// - Returns: `where`, an SQL boolean expression whose parameters are
    ///   numbered `?1`, `?2`… (bind `bindings[i]` at index `i + 1`; the statement
    ///   must have no other numbered parameters); `joins`, `LEFT JOIN`s (from
    ///   ``PredicateSQLSchema/toOneJoin(_:fromAlias:toAlias:)``) to add after the
    ///   root table; `bindings`, the values for the parameters, in order (equal to
    ///   ``sqlBindings`` for SQLite; another ``SQLDialect`` numbers its own
    ///   placeholders, and may write a nil constant with no parameter, see
    ///   ``PredicateSQLCompiler/bind(_:)``). No other constant is ever spliced into the SQL.
    ///
    /// Key paths through to-one relationships become joins; through to-many
    /// ones, `EXISTS (SELECT 1 FROM … WHERE correlation AND condition)` (`ANY`, or
    /// no modifier), `NOT EXISTS (… AND condition)` (`NONE`), `NOT EXISTS (… AND
    /// (condition) IS NOT 1)` (`ALL`); `@count` becomes `(SELECT COUNT(*) …)`,
    /// `@sum` the dialect's sum, `@avg`, `@min`, `@max` their SQL aggregates.
    /// String operators and `[c]`/`[d]` are the dialect's: in SQLite, calls of
    /// the functions ``registerFunctions(on:)`` installs. The SQL depends only on the entity
    /// and the predicate's ``shape``, so it can be cached per shape.
    ///
    /// - Throws: ``FetchPredicateError`` for an unknown key, an unsubstituted
    ///   variable, a construct SQL can't express (a `SUBQUERY` without a
    ///   collection operator) or a tree deeper than ``maximumDepth``; whatever `schema` throws.
    package func sql<Schema: PredicateSQLSchema>(for entity: EntityDescription, schema: Schema,
                                                 rootAlias: String) throws -> (where: String, joins: [String], bindings: [PropertyValue]) {
        var compiler = PredicateSQLCompiler(schema: schema, rootAlias: rootAlias)
        do {
            try checkBounds()
            let root = PredicateSQLCompiler<Schema>.Scope(parent: nil, dialect: schema.dialect)
            let context = PredicateSQLCompiler<Schema>.Context(
                scope: root, selfBase: .init(alias: rootAlias, entity: entity), variables: [:])
            let condition = try compiler.predicate(expression, context)
            return (condition, root.from, compiler.bindings)
        } catch let problem as PredicateProblem {
            throw problem.error(format: source ?? description)
        }
    }
}

/// Compiles a ``PredicateNode`` to SQL; see ``FetchPredicate/sql(for:schema:rootAlias:)``.
struct PredicateSQLCompiler<Schema: PredicateSQLSchema> {
    let schema: Schema
    let rootAlias: String
    /// The SQL written: the layout's ``SQLDialect``.
    package let dialect: any SQLDialect
    private(set) var bindings: [PropertyValue] = []
    /// How many parameters the statement has before this compiler's, which
    /// are numbered after them.
    let parametersBefore: Int
    private var aliasCount = 0

    init(schema: Schema, rootAlias: String, parametersBefore: Int = 0) {
        self.schema = schema
        self.rootAlias = rootAlias
        self.dialect = schema.dialect
        self.parametersBefore = parametersBefore
    }

    /// A level of the query: the root (whose joins are returned) or a subquery.
    final class Scope {
        let parent: Scope?
        package let dialect: any SQLDialect
        /// Root: the joins. Subquery: the FROM items, with their joins in between.
        var from: [String] = []
        /// Subquery: the correlations and filters of its WHERE.
        var conditions: [String] = []
        private var joinAliases: [String: String] = [:]

        init(parent: Scope?, dialect: any SQLDialect) {
            self.parent = parent
            self.dialect = dialect
        }

        func addSource(_ source: String, correlation: String) {
            from.append(from.isEmpty ? source : ", " + source)
            conditions.append(correlation)
        }

        func join(key: String, make: () throws -> (alias: String, sql: String)) rethrows -> String {
            if let alias = joinAliases[key] { return alias }
            let (alias, sql) = try make()
            joinAliases[key] = alias
            from.append(sql)
            return alias
        }

        var fromSQL: String { from.joined(separator: " ") }
        var whereSQL: String { conditions.isEmpty ? dialect.trueLiteral : conditions.joined(separator: " AND ") }
    }

    /// A row an expression's key paths start from.
    struct Base {
        var alias: String
        var entity: EntityDescription
    }

    struct Context {
        var scope: Scope
        var selfBase: Base
        var variables: [String: Base]
        /// `$name`s that stand for values already compiled (a grouped fetch's aggregates, in HAVING).
        var values: [String: Operand] = [:]
    }

    typealias Family = SQLOperand.Family
    /// A compiled value.
    typealias Operand = SQLOperand

    // MARK: - Predicates

    mutating func predicate(_ expression: PredicateNode, _ context: Context) throws -> String {
        switch expression {
        case .truePredicate:
            return dialect.trueLiteral
        case .falsePredicate:
            return dialect.falseLiteral
        case .and(let children):
            if children.isEmpty { return dialect.trueLiteral }
            return "(" + (try children.map { try predicate($0, context) }).joined(separator: " AND ") + ")"
        case .or(let children):
            if children.isEmpty { return dialect.falseLiteral }
            return "(" + (try children.map { try predicate($0, context) }).joined(separator: " OR ") + ")"
        case .not(let child):
            return "NOT (" + (try predicate(child, context)) + ")"
        case .comparison(let lhs, let op, let rhs, let options, let modifier):
            return try comparison(lhs, op, rhs, options: options, modifier: modifier, context)
        default:
            throw PredicateProblem("\(FetchPredicate(expression: expression)) is a value, not a predicate")
        }
    }

    private enum Right {
        case scalar(Operand)
        case list([Operand])
        /// A long list of constants bound as one JSON array (``PredicateSQLList``).
        case json(Operand)
    }

    private mutating func comparison(_ lhs: PredicateNode, _ op: ComparisonOperator, _ rhs: PredicateNode,
                                     options: ComparisonOptions, modifier: ComparisonModifier,
                                     _ context: Context) throws -> String {
        if op == .textSearch { return try search(lhs, rhs, modifier: modifier, context) }
        let lhsMany = try crossesToMany(lhs, context)
        let rhsMany = try crossesToMany(rhs, context)
        if modifier != .direct, !lhsMany, !rhsMany {
            throw PredicateProblem("\(modifier.rawValue) needs a to-many key path, and \(FetchPredicate(expression: lhs)) is not one")
        }
        if lhsMany, rhsMany {
            throw PredicateProblem("only one side of a comparison may cross a to-many relationship")
        }
        var many: Scope?
        let left: Operand
        if lhsMany {
            let scope = Scope(parent: context.scope, dialect: dialect)
            many = scope
            left = try operand(lhs, context, many: scope)
        } else {
            left = try operand(lhs, context, many: nil)
        }
        let right: Right
        if op == .in, case .collection(let elements) = rhs, let list = PredicateSQLList.json(elements, options: options) {
            var array = bind(.string(list.json))
            array.family = list.isText ? .text : .numeric
            right = .json(array)
        } else if op == .in || op == .between, case .collection(let elements) = rhs {
            right = .list(try elements.map { try operand($0, context, many: nil) })
        } else if rhsMany {
            let scope = Scope(parent: context.scope, dialect: dialect)
            many = scope
            right = .scalar(try operand(rhs, context, many: scope))
        } else {
            right = .scalar(try operand(rhs, context, many: nil))
        }
        let condition = try build(op, left, right, options: options, rhsIsToMany: rhsMany)
        guard let many else { return condition }
        return quantified(condition, over: many, modifier)
    }

    /// A condition on the rows of a to-many scope as the modifier quantifies it:
    /// `EXISTS` one true (`ANY`, or none written), `NOT EXISTS` one true (`NONE`),
    /// `NOT EXISTS` one not true (`ALL`).
    private func quantified(_ condition: String, over many: Scope, _ modifier: ComparisonModifier) -> String {
        switch modifier {
        case .direct, .any:
            "EXISTS (SELECT 1 FROM \(many.fromSQL) WHERE \(many.whereSQL) AND \(condition))"
        case .none:
            "NOT EXISTS (SELECT 1 FROM \(many.fromSQL) WHERE \(many.whereSQL) AND \(condition))"
        case .all:
            "NOT EXISTS (SELECT 1 FROM \(many.fromSQL) WHERE \(many.whereSQL) AND \(dialect.isNotTrue(condition)))"
        }
    }

    /// `MATCHES[search]`: the rows whose searched attributes match, as the
    /// schema's full-text index finds them
    /// (``PredicateSQLSchema/searchMatchSQL(for:alias:query:search:)``), with the
    /// query's FTS5 form as a parameter.
    ///
    /// A row reached through a nil to-one is false rather than NULL, as the
    /// in-memory evaluator has it; through a to-many, the `EXISTS` forms of
    /// ``comparison(_:_:_:options:modifier:_:)`` quantify.
    private mutating func search(_ lhs: PredicateNode, _ rhs: PredicateNode, modifier: ComparisonModifier,
                                 _ context: Context) throws -> String {
        let keys = lhs.keyPathKeys
        let start: Base
        switch lhs {
        case .keyPath: start = context.selfBase
        case .variable(let name, _): start = try base(ofVariable: name, context)
        default: throw PredicateProblem("MATCHES[search] needs an attribute key path or SELF on its left")
        }
        let info = try KeyPathInfo.walk(keys, from: start.entity)
        if modifier != .direct, !info.crossesToMany {
            throw PredicateProblem("\(modifier.rawValue) needs a to-many key path, and \(FetchPredicate(expression: lhs)) is not one")
        }
        let attributes = try PredicateSearch.attributes(info, keys: keys)
        let query = try PredicateSearch.query(from: rhs)
        let many = info.crossesToMany ? Scope(parent: context.scope, dialect: dialect) : nil
        let objectKeys = info.attribute == nil ? keys : Array(keys.dropLast())
        guard case .object(let owner) = try walk(objectKeys, from: start, context, many: many, endAtObject: true) else {
            throw PredicateProblem("MATCHES[search] needs an attribute key path or SELF on its left")
        }
        let parameter = bind(.string(try dialectWrites { try dialect.searchMatchValue(query) }))
        var condition = try schema.searchMatchSQL(for: attributes, alias: owner.alias, query: parameter.sql, search: query)
        if owner.alias != rootAlias { condition = dialect.isTrue(condition) }
        guard let many else { return condition }
        return quantified(condition, over: many, modifier)
    }

    private func build(_ op: ComparisonOperator, _ left: Operand, _ right: Right,
                       options: ComparisonOptions, rhsIsToMany: Bool) throws -> String {
        switch (op, right) {
        case (.equal, .scalar(let r)), (.notEqual, .scalar(let r)):
            return try equality(left, r, negated: op == .notEqual, options: options)
        case (.less, .scalar(let r)), (.lessOrEqual, .scalar(let r)), (.greater, .scalar(let r)), (.greaterOrEqual, .scalar(let r)):
            let (a, b) = try prepared(left, r, options: options)
            return "\(a) \(op.rawValue) \(b)"
        case (.beginsWith, .scalar(let r)), (.endsWith, .scalar(let r)), (.contains, .scalar(let r)),
             (.like, .scalar(let r)), (.matches, .scalar(let r)):
            return try stringTest(op, left, r, options: options)
        case (.in, .list(let items)):
            var operands = try ([left] + items).map { try folded($0, options) }
            try neutralize(&operands)
            return "\(operands[0].sql) IN (" + operands.dropFirst().map(\.sql).joined(separator: ", ") + ")"
        case (.in, .json(let array)):
            var operands = [left, array]
            try neutralize(&operands)
            return "\(operands[0].sql) IN (\(jsonListSQL(array)))"
        case (_, .json):
            throw PredicateProblem("a collection {…} can only follow IN or BETWEEN")
        case (.in, .scalar(let r)):
            if rhsIsToMany { return try equality(left, r, negated: false, options: options) }
            if r.isNil { return "NULL" }
            guard r.family == .text else {
                throw PredicateProblem("IN needs a collection, a to-many key path or a string after it")
            }
            return try stringTest(.contains, r, left, options: options)
        case (.between, .list(let bounds)):
            guard bounds.count == 2 else { throw PredicateProblem("BETWEEN needs two bounds, {low, high}") }
            let (a1, low) = try prepared(left, bounds[0], options: options)
            let (a2, high) = try prepared(left, bounds[1], options: options)
            return "(\(a1) >= \(low) AND \(a2) <= \(high))"
        case (.between, .scalar(let r)) where r.isNil:
            return "NULL"
        case (.between, _):
            throw PredicateProblem("BETWEEN needs {low, high} after it")
        case (_, .list):
            throw PredicateProblem("a collection {…} can only follow IN or BETWEEN")
        case (.textSearch, _):
            throw PredicateProblem("MATCHES[search] is compiled by search(_:_:modifier:_:)")
        }
    }

    /// `=`/`<>`, or `IS`/`IS NOT` against the constant nil.
    private func equality(_ left: Operand, _ right: Operand, negated: Bool, options: ComparisonOptions) throws -> String {
        if left.isNil || right.isNil {
            return "\(left.sql) IS \(negated ? "NOT " : "")\(right.sql)"
        }
        let (a, b) = try prepared(left, right, options: options)
        return "\(a) \(negated ? "<>" : "=") \(b)"
    }

    /// Both sides folded for `[c]`/`[d]`, and without affinity where it would convert values.
    private func prepared(_ left: Operand, _ right: Operand, options: ComparisonOptions) throws -> (String, String) {
        var operands = [try folded(left, options), try folded(right, options)]
        try neutralize(&operands)
        return (operands[0].sql, operands[1].sql)
    }

    /// Lets the dialect make the operands of one comparison compare as the
    /// in-memory evaluator compares them (SQLite: switching a column's
    /// affinity off), or refuse them.
    private func neutralize(_ operands: inout [Operand]) throws {
        try dialectWrites { try dialect.prepareComparison(&operands) }
    }

    // MARK: - Values

    private mutating func operand(_ expression: PredicateNode, _ context: Context, many: Scope?) throws -> Operand {
        switch expression {
        case .constant(.objects):
            throw PredicateProblem("a list of object IDs must be given as a collection")
        case .constant(let value):
            return bind(value)
        case .keyPath(let keys):
            return try walkToOperand(keys, from: context.selfBase, context, many: many)
        case .variable(let name, let keys):
            if keys.isEmpty, let value = context.values[name] { return value }
            return try walkToOperand(keys, from: try base(ofVariable: name, context), context, many: many)
        case .aggregate(let function, let collection, let keys):
            return try aggregate(function, collection, keys, context)
        case .subquery:
            throw PredicateProblem("a SUBQUERY needs a collection operator after it, as in SUBQUERY(…).@count")
        case .collection:
            throw PredicateProblem("a collection {…} can only follow IN or BETWEEN")
        default:
            throw PredicateProblem("a predicate can't be used as a value")
        }
    }

    /// A parameter holding `value`, in the stores' storage form
    /// (``PredicateScalar/binding(for:)``); nil as the dialect's
    /// ``SQLDialect/nullLiteral`` when it has one.
    mutating func bind(_ value: PropertyValue) -> Operand {
        let binding = PredicateScalar.binding(for: value)
        if binding.isNull, let null = dialect.nullLiteral { return Operand(sql: null, family: nil, isNil: true) }
        bindings.append(binding)
        return Operand(sql: dialect.parameter(parametersBefore + bindings.count, boundTo: binding),
                       family: Self.family(of: value), isNil: value.isNull)
    }

    private func base(ofVariable name: String, _ context: Context) throws -> Base {
        guard let base = context.variables[name] else {
            throw PredicateProblem("the variable $\(name) has no value; use withSubstitutionVariables(_:)", key: "$" + name)
        }
        return base
    }

    private func crossesToMany(_ expression: PredicateNode, _ context: Context) throws -> Bool {
        switch expression {
        case .keyPath(let keys):
            return try KeyPathInfo.walk(keys, from: context.selfBase.entity).crossesToMany
        case .variable(let name, let keys):
            if keys.isEmpty, context.values[name] != nil { return false }
            return try KeyPathInfo.walk(keys, from: try base(ofVariable: name, context).entity).crossesToMany
        default:
            return false
        }
    }

    private mutating func aggregate(_ function: AggregateFunction, _ collection: PredicateNode, _ keys: [String],
                                    _ context: Context) throws -> Operand {
        let scope = Scope(parent: context.scope, dialect: dialect)
        let element = try collectionScope(collection, context, into: scope, for: "@" + function.rawValue)
        if function == .count {
            guard keys.isEmpty else { throw PredicateProblem("@count takes no key path after it") }
            return Operand(sql: "(SELECT COUNT(*) FROM \(scope.fromSQL) WHERE \(scope.whereSQL))", family: .numeric)
        }
        var inner = context
        inner.scope = scope
        let value = try walkToOperand(keys, from: element, inner, many: scope)
        let sqlFunction: String
        switch function {
        case .sum:
            guard value.family == .numeric else { throw PredicateProblem("@sum needs a number attribute after it", key: keys.last) }
            sqlFunction = "SUM"
        case .avg:
            guard value.family == .numeric else { throw PredicateProblem("@avg needs a number attribute after it", key: keys.last) }
            sqlFunction = "AVG"
        case .min: sqlFunction = "MIN"
        case .max: sqlFunction = "MAX"
        case .count: sqlFunction = "COUNT"
        }
        let family = function == .min || function == .max ? value.family : .numeric
        let aggregate = function == .sum ? dialect.sum(value.sql) : "\(sqlFunction)(\(value.sql))"
        return Operand(sql: "(SELECT \(aggregate) FROM \(scope.fromSQL) WHERE \(scope.whereSQL))", family: family)
    }

    /// Adds the rows of a to-many collection to `scope` and returns their base.
    private mutating func collectionScope(_ collection: PredicateNode, _ context: Context, into scope: Scope,
                                          for what: String) throws -> Base {
        let keys: [String]
        let start: Base
        switch collection {
        case .keyPath(let path):
            (keys, start) = (path, context.selfBase)
        case .variable(let name, let path):
            (keys, start) = (path, try base(ofVariable: name, context))
        case .subquery(let inner, let variable, let condition):
            let element = try collectionScope(inner, context, into: scope, for: what)
            var nested = context
            nested.scope = scope
            nested.selfBase = element
            nested.variables[variable] = element
            scope.conditions.append("(" + (try predicate(condition, nested)) + ")")
            return element
        default:
            throw PredicateProblem("\(what) needs a to-many key path or a SUBQUERY")
        }
        guard case .object(let element) = try walk(keys, from: start, context, many: scope, endAtObject: true),
              !scope.from.isEmpty else {
            throw PredicateProblem("\(what) needs a to-many relationship, and \(FetchPredicate(expression: collection)) is not one")
        }
        return element
    }

    private enum Reached {
        case column(Operand)
        case object(Base)
    }

    mutating func walkToOperand(_ keys: [String], from base: Base, _ context: Context, many: Scope?) throws -> Operand {
        switch try walk(keys, from: base, context, many: many, endAtObject: false) {
        case .column(let operand):
            return operand
        case .object(let object):
            return Operand(sql: schema.primaryKeySQL(alias: object.alias), family: .numeric, isColumn: true)
        }
    }

    /// Follows `keys` from `base`: to-one steps join in the current scope (or in
    /// `many` once a to-many step has been taken), to-many steps add FROM items to `many`.
    private mutating func walk(_ keys: [String], from base: Base, _ context: Context, many: Scope?,
                               endAtObject: Bool) throws -> Reached {
        var alias = base.alias
        var entity = base.entity
        var scope = context.scope
        for (position, key) in keys.enumerated() {
            let isLast = position == keys.count - 1
            guard let property = entity.propertiesByName[key] else {
                throw PredicateProblem("entity \(entity.name) has no property '\(key)'", key: key)
            }
            guard let relationship = property as? RelationshipDescription else {
                guard isLast else {
                    throw PredicateProblem("'\(key)' is an attribute, not a relationship, in key path \(keys.joined(separator: "."))", key: key)
                }
                guard let attribute = property as? AttributeDescription else {
                    throw PredicateProblem("\(entity.name).\(key) can't be used in a predicate", key: key)
                }
                return .column(Operand(sql: try schema.columnSQL(for: attribute, alias: alias),
                                       family: Self.family(of: attribute.type), isColumn: true))
            }
            guard let destination = relationship.destinationEntity else {
                throw PredicateProblem("\(entity.name).\(key) has no destination entity", key: key)
            }
            if relationship.isToMany {
                guard let many else {
                    throw PredicateProblem("the to-many key path \(keys.joined(separator: ".")) needs ANY, ALL, NONE, IN or a collection operator", key: key)
                }
                let next = nextAlias()
                let source = try schema.toManySource(relationship, fromAlias: alias, toAlias: next)
                many.addSource(source.from, correlation: source.correlation)
                scope = many
                alias = next
            } else if isLast && !endAtObject {
                return .column(Operand(sql: try schema.columnSQL(for: relationship, alias: alias), family: .numeric, isColumn: true))
            } else {
                let from = alias
                alias = try scope.join(key: from + "." + relationship.name) {
                    let next = nextAlias()
                    return (next, try schema.toOneJoin(relationship, fromAlias: from, toAlias: next))
                }
            }
            entity = destination
        }
        return .object(Base(alias: alias, entity: entity))
    }

    private mutating func nextAlias() -> String {
        aliasCount += 1
        return "\(rootAlias)_\(aliasCount)"
    }

    // MARK: - Families

    static func family(of value: PropertyValue) -> Family? {
        switch value {
        case .null, .objects: nil
        case .integer, .double, .bool, .date, .decimal, .object: .numeric
        case .string, .uri: .text
        case .data, .uuid: .blob
        }
    }

    static func family(of type: AttributeType) -> Family {
        switch type {
        case .integer16, .integer32, .integer64, .double, .float, .decimal, .boolean, .date: .numeric
        case .string, .uri: .text
        case .binaryData, .uuid, .transformable: .blob
        }
    }
}
