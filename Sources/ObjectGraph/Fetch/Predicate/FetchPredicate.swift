import Foundation

/// A condition that fetched objects must meet, written in the `NSPredicate`
/// format grammar (Core Data: `NSPredicate`).
///
/// ```swift
/// let cheap = try FetchPredicate(format: "price < %@ AND symbol BEGINSWITH[c] %@", 100, "a")
/// let busy = try FetchPredicate(format: "updates.@count > 3 OR ANY updates.volume >= %d", 1_000_000)
/// let template = try FetchPredicate(format: "company == $company AND price BETWEEN {$low, $high}")
/// let mine = try template.withSubstitutionVariables(["company": apple, "low": 10, "high": 20])
/// ```
///
/// The grammar: comparisons `== = != <> < <= =< > >= =>`; `AND && OR || NOT !`
/// (NOT binds tighter than AND, AND tighter than OR) and parentheses;
/// `BEGINSWITH ENDSWITH CONTAINS LIKE MATCHES` with `[c]`, `[d]` or `[cd]`;
/// `MATCHES[search]`, full-text search of attributes indexed for search with a
/// ``SearchQuery`` (`title MATCHES[search] "apple pie"`, `SELF MATCHES[search] %@`);
/// `IN` a collection `{a, b}`, an array or set argument, a to-many key path or a
/// string; `BETWEEN {low, high}` (inclusive); `nil`/`NULL`; `TRUEPREDICATE`,
/// `FALSEPREDICATE`; `TRUE YES FALSE NO`; quoted strings; numbers (`12`, `1.5e3`,
/// `0x1F`, `0o17`, `0b101`); key paths through relationships and `SELF`;
/// `ANY SOME ALL NONE`; `@count @sum @avg @min @max`; `SUBQUERY(collection, $x,
/// predicate)`; `%@ %K %d %i %f %ld %lld %lf` arguments; `$variables`. Keywords
/// are case-insensitive; `#keyword` uses a reserved word as a key.
///
/// A predicate is a value: it holds no objects (an object argument becomes its
/// ``ObjectID``), so it is `Sendable`. The SQLite store compiles it to SQL with
/// bound parameters; pending changes and the in-memory store evaluate it in
/// memory; the two agree (see ``PredicateScalar`` for how values compare).
///
/// ## Topics
/// - ``init(format:_:)``
/// - ``init(format:argumentArray:)``
/// - ``withSubstitutionVariables(_:)``
/// - ``FetchPredicateError``
public struct FetchPredicate: Sendable {
    /// The parsed predicate.
    package let expression: PredicateNode
    /// The format it was parsed from, for error messages; not part of its identity.
    package let source: String?
    /// The limit the tree passes (``maximumDepth``, ``maximumKeyPathLength``),
    /// for a predicate built in code: every use that walks the tree throws it
    /// first, so none of them recurses deeper than the limit.
    let outOfBounds: PredicateProblem?
    /// The `MATCHES[search]` queries in it, parsed once, by text: evaluating
    /// the predicate on each of many objects reads them here. An invalid one
    /// is absent, and evaluating or compiling throws for it.
    let searchQueries: [String: SearchQuery]
    /// Whether the builder of a predicate `attribute IN {constants}` vouches
    /// that the list holds each value once (no two of its values equal), so
    /// that a store need not test it again (the upsert's lookup, whose keys
    /// are already told apart); not part of its identity.
    package var listIsDistinct = false

    /// Parses a predicate format, taking `%@`, `%K`, `%d`, `%f`… arguments in order
    /// (Core Data: `NSPredicate(format:_:)`).
    ///
    /// Arguments for `%@`: `String`, any integer type, `Double`, `Float`, `Bool`,
    /// `Date`, `Data`, `UUID`, `URL`, `Decimal`, ``ObjectID``, a managed object,
    /// `nil` or `NSNull`, and arrays and sets of those. `%K` takes a key path
    /// string; `%d`, `%i`, `%ld`, `%lld` an integer; `%f`, `%lf` a number.
    /// Extra arguments are ignored, as `NSPredicate` ignores them.
    ///
    /// Swift passes an `[Any?]` given alone as the whole argument list; for one
    /// `%@` holding such an array, use ``init(format:argumentArray:)``.
    ///
    /// - Throws: ``FetchPredicateError`` with the offset and what was expected,
    ///   for a bad format, a missing argument, or an argument of an unsupported type.
    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a predicate format with its arguments in an array
    /// (Core Data: `NSPredicate(format:argumentArray:)`).
    ///
    /// - Throws: ``FetchPredicateError``; see ``init(format:_:)``.
    public init(format: String, argumentArray: [Any?]) throws {
        self.init(expression: try PredicateParser.parse(format, arguments: argumentArray), source: format)
    }

    /// A predicate that matches every object (`true`) or none (Core Data: `NSPredicate(value:)`).
    public init(value: Bool) {
        self.init(expression: value ? .truePredicate : .falsePredicate)
    }

    package init(expression: PredicateNode) {
        self.init(expression: expression, source: nil)
    }

    /// All of the predicates (Core Data: `NSCompoundPredicate(andPredicateWithSubpredicates:)`).
    public static func and(_ predicates: [FetchPredicate]) -> FetchPredicate {
        FetchPredicate(expression: .and(flattening: predicates.map(\.expression)))
    }

    /// Any of the predicates (Core Data: `NSCompoundPredicate(orPredicateWithSubpredicates:)`).
    public static func or(_ predicates: [FetchPredicate]) -> FetchPredicate {
        FetchPredicate(expression: .or(flattening: predicates.map(\.expression)))
    }

    /// The opposite of a predicate (Core Data: `NSCompoundPredicate(notPredicateWithSubpredicate:)`).
    public static func not(_ predicate: FetchPredicate) -> FetchPredicate {
        FetchPredicate(expression: .not(predicate.expression))
    }

    // MARK: - Substitution Variables

    /// The predicate with `$variables` replaced by values
    /// (Core Data: `withSubstitutionVariables(_:)`).
    ///
    /// Values are taken as `%@` arguments are. Variables missing from
    /// `variables` stay in place (evaluating or compiling the predicate then
    /// throws); a `SUBQUERY`'s own variable is never replaced.
    ///
    /// - Throws: ``FetchPredicateError`` for a value of an unsupported type, or
    ///   for a variable followed by a key path (`$company.name`).
    public func withSubstitutionVariables(_ variables: [String: Any]) throws -> FetchPredicate {
        do {
            try checkBounds()
            return FetchPredicate(expression: try Self.substitute(variables, in: expression, bound: [], depth: 1), source: source)
        } catch let problem as PredicateProblem {
            throw problem.error(format: source ?? description)
        }
    }

    private init(expression: PredicateNode, source: String?) {
        self.expression = expression
        self.source = source
        outOfBounds = PredicateLimits.problem(in: expression)
        searchQueries = outOfBounds == nil ? Self.searchQueries(in: expression) : [:]
    }

    /// Throws ``outOfBounds``, if there is one: what every walk of the tree calls first.
    package func checkBounds() throws(PredicateProblem) {
        if let outOfBounds { throw outOfBounds }
    }

    /// A walk that rebuilds nothing: `rewritten` made the tree again to visit
    /// it, 600 instructions a key for the 10,000 constants of an upsert's `IN` list.
    private static func searchQueries(in expression: PredicateNode) -> [String: SearchQuery] {
        var queries: [String: SearchQuery] = [:]
        var pending = [expression]
        while let node = pending.popLast() {
            switch node {
            case .truePredicate, .falsePredicate, .keyPath, .variable, .constant:
                break
            case .and(let children), .or(let children), .collection(let children):
                for child in children {
                    if case .constant = child { continue }
                    pending.append(child)
                }
            case .not(let child):
                pending.append(child)
            case .comparison(let lhs, let op, let rhs, _, _):
                if op == .textSearch, case .constant(.string(let text)) = rhs, queries[text] == nil {
                    // An invalid query is left out on purpose: evaluating or compiling it throws its error.
                    queries[text] = try? SearchQuery(text)
                }
                pending.append(lhs)
                pending.append(rhs)
            case .aggregate(_, let collection, _):
                pending.append(collection)
            case .subquery(let collection, _, let predicate):
                pending.append(collection)
                pending.append(predicate)
            }
        }
        return queries
    }

    private static func substitute(_ variables: [String: Any], in expression: PredicateNode,
                                   bound: Set<String>, depth: Int) throws -> PredicateNode {
        func recurse(_ e: PredicateNode) throws -> PredicateNode {
            try substitute(variables, in: e, bound: bound, depth: depth + 1)
        }
        switch expression {
        case .variable(let name, let keys):
            guard !bound.contains(name), let value = variables[name] else { return expression }
            guard keys.isEmpty else {
                throw PredicateProblem("$\(name).\(keys.joined(separator: ".")) can't be substituted; only a whole variable can", key: "$" + name)
            }
            do {
                return try PredicateArgument.expression(from: value, for: "$" + name, depth: depth)
            } catch let problem as PredicateProblem {
                throw PredicateProblem(problem.reason, key: "$" + name)
            }
        case .truePredicate, .falsePredicate, .keyPath, .constant:
            return expression
        case .and(let children): return .and(try children.map(recurse))
        case .or(let children): return .or(try children.map(recurse))
        case .collection(let children): return .collection(try children.map(recurse))
        case .not(let child): return .not(try recurse(child))
        case .comparison(let lhs, let op, let rhs, let options, let modifier):
            return .comparison(lhs: try recurse(lhs), op: op, rhs: try recurse(rhs), options: options, modifier: modifier)
        case .aggregate(let function, let collection, let keys):
            return .aggregate(function, collection: try recurse(collection), keyPath: keys)
        case .subquery(let collection, let variable, let predicate):
            return .subquery(collection: try recurse(collection), variable: variable,
                             predicate: try substitute(variables, in: predicate, bound: bound.union([variable]), depth: depth + 1))
        }
    }

    // MARK: - Shape

    /// A value equal for two predicates that differ only in their constants, so
    /// compiled SQL can be cached per shape and bound with ``sqlBindings``.
    ///
    /// Nil constants, the kinds of constants and the sizes of collections are
    /// part of the shape, since the SQL depends on them.
    package var shape: PredicateShape {
        PredicateShape(skeleton: expression.rewritten { node in
            guard case .constant(let value) = node else { return nil }
            return .constant(PredicateShape.placeholder(for: value))
        })
    }

    /// The values to bind to the SQL that ``sql(for:schema:rootAlias:)`` returns:
    /// parameter `?N` takes element `N - 1`. Equal to that call's `bindings`,
    /// without compiling, for any predicate of the same ``shape``.
    package var sqlBindings: [PropertyValue] {
        var bindings: [PropertyValue] = []
        expression.forEachSQLBinding { bindings.append($0) }
        return bindings
    }
}

/// What ``FetchPredicate/shape`` returns: the predicate with its constants reduced to their kinds.
package struct PredicateShape: Hashable, Sendable {
    let skeleton: PredicateNode

    static func placeholder(for value: PropertyValue) -> PropertyValue {
        switch value {
        case .null: .null
        case .integer: .integer(0)
        case .double: .double(0)
        case .bool: .bool(false)
        case .string: .string("")
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        case .data: .data(Data())
        case .uuid: .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .uri: .string("uri")
        case .decimal: .decimal(0)
        case .object: .string("object")
        case .objects(let ids): .string("objects \(ids.count)")
        }
    }
}

// MARK: - Hashable

extension FetchPredicate: Hashable {
    /// Two predicates are equal when they parse to the same tree; the format's
    /// spacing and keyword spelling do not matter.
    public static func == (lhs: FetchPredicate, rhs: FetchPredicate) -> Bool {
        lhs.expression == rhs.expression
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(expression)
    }
}

// MARK: - CustomStringConvertible

extension FetchPredicate: CustomStringConvertible {
    /// The predicate in canonical format: keywords in capitals, strings in double
    /// quotes, values without literals as `CAST(…)`. It parses back to an equal
    /// predicate (except for object IDs, which have no format).
    public var description: String {
        PredicateFormatter.format(expression)
    }
}
