import Foundation

/// The parsed form of a predicate: one tree for the parser, the printer, the
/// in-memory evaluator and the SQL compiler (Core Data: `NSPredicate` and `NSExpression`).
///
/// Predicates (`and`, `or`, `not`, `comparison`, `truePredicate`, `falsePredicate`)
/// and expressions (key paths, constants, collections, variables, aggregates,
/// subqueries) share the one enum; the parser only builds a predicate where a
/// predicate belongs and an expression where a value belongs.
///
/// ```swift
/// // price > 10 AND ANY updates.volume >= 1000
/// PredicateNode.and([
///     .comparison(lhs: .keyPath(["price"]), op: .greater, rhs: .constant(.integer(10)), options: [], modifier: .direct),
///     .comparison(lhs: .keyPath(["updates", "volume"]), op: .greaterOrEqual, rhs: .constant(.integer(1000)), options: [], modifier: .any),
/// ])
/// ```
///
/// Only the cases that hold a node are boxed: a constant, a key path or a
/// collection lives in its node, so that the upsert's lookup of 10,000 keys
/// (a collection of constants) allocates no box per key (~600 instructions a
/// key to make and free).
package enum PredicateNode: Sendable, Hashable {
    // MARK: Predicates

    /// `TRUEPREDICATE`: matches everything.
    case truePredicate
    /// `FALSEPREDICATE`: matches nothing.
    case falsePredicate
    /// `a AND b AND …`; an empty list matches everything.
    case and([PredicateNode])
    /// `a OR b OR …`; an empty list matches nothing.
    case or([PredicateNode])
    /// `NOT a`.
    indirect case not(PredicateNode)
    /// `[ANY|ALL|NONE] lhs op[cd] rhs`.
    indirect case comparison(lhs: PredicateNode, op: ComparisonOperator, rhs: PredicateNode,
                    options: ComparisonOptions, modifier: ComparisonModifier)

    // MARK: Expressions

    /// A key path from the evaluated object; `[]` is `SELF`.
    case keyPath([String])
    /// `$name`, followed by a key path (`$u.price`): a subquery's element, or a
    /// substitution variable until ``FetchPredicate/withSubstitutionVariables(_:)`` replaces it.
    case variable(String, [String])
    /// A constant value.
    case constant(PropertyValue)
    /// `{a, b, …}` or an array or set given for `%@`.
    case collection([PredicateNode])
    /// `collection.@count`, `collection.@max.keyPath` and so on.
    indirect case aggregate(AggregateFunction, collection: PredicateNode, keyPath: [String])
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of `collection` that match.
    indirect case subquery(collection: PredicateNode, variable: String, predicate: PredicateNode)
}

/// How a comparison compares its two sides.
package enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
    case beginsWith = "BEGINSWITH"
    case endsWith = "ENDSWITH"
    case contains = "CONTAINS"
    case like = "LIKE"
    case matches = "MATCHES"
    case `in` = "IN"
    case between = "BETWEEN"
    /// `MATCHES[search]`: full-text search of the left side's indexed text with
    /// the ``SearchQuery`` on the right (the store's FTS5 index in SQL).
    case textSearch = "MATCHES[search]"

    /// The operator with its sides swapped (`a < b` ⇔ `b > a`).
    var swapped: ComparisonOperator {
        switch self {
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        default: self
        }
    }
}

/// The `[c]`, `[d]`, `[cd]` options of a string comparison.
@_spi(StoreImplementation) public struct ComparisonOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `[c]`: Unicode case folding.
    public static let caseInsensitive = ComparisonOptions(rawValue: 1)
    /// `[d]`: diacritic folding.
    public static let diacriticInsensitive = ComparisonOptions(rawValue: 2)

    /// The options as Foundation folding options.
    var foldingOptions: String.CompareOptions {
        var options: String.CompareOptions = []
        if contains(.caseInsensitive) { options.insert(.caseInsensitive) }
        if contains(.diacriticInsensitive) { options.insert(.diacriticInsensitive) }
        return options
    }

    /// The modifier as written after an operator: `""`, `"[c]"`, `"[d]"` or `"[cd]"`.
    var formatted: String {
        if isEmpty { return "" }
        return "[" + (contains(.caseInsensitive) ? "c" : "") + (contains(.diacriticInsensitive) ? "d" : "") + "]"
    }
}

/// How a comparison treats a to-many side: `ANY` (the default when a key path
/// crosses a to-many relationship), `ALL` or `NONE`.
package enum ComparisonModifier: String, Sendable, Hashable {
    /// No modifier written. A to-many side is then compared as with `ANY`.
    case direct = ""
    case any = "ANY"
    case all = "ALL"
    case none = "NONE"
}

/// A collection operator: `@count`, `@sum`, `@avg`, `@min`, `@max`.
package enum AggregateFunction: String, Sendable, Hashable, CaseIterable {
    case count
    case sum
    case avg
    case min
    case max
}

// MARK: - Building

extension PredicateNode {
    /// `children` joined by `AND`, each `AND` among them spliced in: the parser
    /// reads `a AND (b AND c)` as the one list `a AND b AND c`, and every other
    /// way of building a predicate gives the same tree.
    static func and(flattening children: [PredicateNode]) -> PredicateNode {
        .and(children.flatMap { if case .and(let inner) = $0 { inner } else { [$0] } })
    }

    /// `children` joined by `OR`, each `OR` among them spliced in (see ``and(flattening:)``).
    static func or(flattening children: [PredicateNode]) -> PredicateNode {
        .or(children.flatMap { if case .or(let inner) = $0 { inner } else { [$0] } })
    }
}

// MARK: - Traversal

extension PredicateNode {
    /// Calls `body` on the value of every parameter the SQL compiler binds, in
    /// the order it numbers them (pre-order, left to right): each constant in
    /// its SQL form, a long `IN` list as its one JSON array (``PredicateSQLList``).
    func forEachSQLBinding(_ body: (PropertyValue) -> Void) {
        switch self {
        case .truePredicate, .falsePredicate, .keyPath, .variable:
            break
        case .and(let children), .or(let children), .collection(let children):
            for child in children { child.forEachSQLBinding(body) }
        case .not(let child):
            child.forEachSQLBinding(body)
        case .comparison(let lhs, .textSearch, .constant(.string(let text)), _, _):
            lhs.forEachSQLBinding(body)
            // The compiler binds the query's FTS5 form; an invalid query never
            // gets this far, since compiling it throws.
            body(.string((try? SearchQuery(text))?.fts5Expression ?? text))
        case .comparison(let lhs, .in, .collection(let elements), let options, _):
            lhs.forEachSQLBinding(body)
            if let list = PredicateSQLList.json(elements, options: options) {
                body(.string(list.json))
            } else {
                for element in elements { element.forEachSQLBinding(body) }
            }
        case .comparison(let lhs, _, let rhs, _, _):
            lhs.forEachSQLBinding(body)
            rhs.forEachSQLBinding(body)
        case .constant(let value):
            body(PredicateScalar.binding(for: value))
        case .aggregate(_, let collection, _):
            collection.forEachSQLBinding(body)
        case .subquery(let collection, _, let predicate):
            collection.forEachSQLBinding(body)
            predicate.forEachSQLBinding(body)
        }
    }

    /// The tree with every node replaced bottom-up by `transform` (which may return nil to keep it).
    func rewritten(_ transform: (PredicateNode) throws -> PredicateNode?) rethrows -> PredicateNode {
        let rebuilt: PredicateNode
        switch self {
        case .truePredicate, .falsePredicate, .keyPath, .variable, .constant:
            rebuilt = self
        case .and(let children):
            rebuilt = .and(try children.map { try $0.rewritten(transform) })
        case .or(let children):
            rebuilt = .or(try children.map { try $0.rewritten(transform) })
        case .collection(let children):
            rebuilt = .collection(try children.map { try $0.rewritten(transform) })
        case .not(let child):
            rebuilt = .not(try child.rewritten(transform))
        case .comparison(let lhs, let op, let rhs, let options, let modifier):
            rebuilt = .comparison(lhs: try lhs.rewritten(transform), op: op, rhs: try rhs.rewritten(transform),
                                  options: options, modifier: modifier)
        case .aggregate(let function, let collection, let keyPath):
            rebuilt = .aggregate(function, collection: try collection.rewritten(transform), keyPath: keyPath)
        case .subquery(let collection, let variable, let predicate):
            rebuilt = .subquery(collection: try collection.rewritten(transform), variable: variable,
                                predicate: try predicate.rewritten(transform))
        }
        return try transform(rebuilt) ?? rebuilt
    }

    /// The keys of a key path, or those after a variable; empty otherwise.
    package var keyPathKeys: [String] {
        switch self {
        case .keyPath(let keys), .variable(_, let keys): keys
        default: []
        }
    }

    /// A key path or a variable with `keys` in place of its own; any other node as it is.
    func replacingKeys(with keys: [String]) -> PredicateNode {
        switch self {
        case .keyPath: .keyPath(keys)
        case .variable(let name, _): .variable(name, keys)
        default: self
        }
    }

    /// Whether this node is a key path or a variable.
    var isKeyPathOrVariable: Bool {
        switch self {
        case .keyPath, .variable: true
        default: false
        }
    }

    /// Whether this node is a predicate (as opposed to a value).
    var isPredicate: Bool {
        switch self {
        case .truePredicate, .falsePredicate, .and, .or, .not, .comparison: true
        default: false
        }
    }
}
