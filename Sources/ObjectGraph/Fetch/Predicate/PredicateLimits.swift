import Foundation

extension FetchPredicate {
    /// How deeply the parts of a predicate may nest: 32 levels
    /// (SQLite's equivalent, `SQLITE_MAX_EXPR_DEPTH`, is 1,000).
    ///
    /// Depth counts the levels of the predicate's tree: each `AND`, `OR`,
    /// `NOT`, comparison, value, `{…}` collection, `SUBQUERY` and `CAST` is one
    /// level inside the one around it, so `price > 10` is two levels deep and
    /// `NOT (price > 10 OR volume < 5)` four. ``init(format:_:)`` counts while
    /// it reads, before it knows what a level will hold: the top and each
    /// parenthesized group count as the `OR` and the `AND` they may hold (two
    /// levels), and the parser throws a ``FetchPredicateError`` at the token
    /// that would pass the limit. So a format nests at most 14 groups, or 28
    /// `NOT`s, or 5 `SUBQUERY`s each in the predicate of the one around it; and
    /// the description of a tree built in code close to the limit may not
    /// parse back. A predicate built in code (``not(_:)``, ``and(_:)``…) that
    /// is deeper throws the same error from ``evaluate(with:)``, from a fetch
    /// and from ``withSubstitutionVariables(_:)``; its ``description`` prints
    /// the parts past the limit as `…`, which does not parse.
    ///
    /// Why 32: the parser, the checks against the model, the in-memory
    /// evaluator, the SQL compiler and the printer each recurse once per
    /// level, and a predicate may arrive on a thread with a small stack (a
    /// Dispatch worker's is 512 KiB). In a debug build a level costs up to
    /// 4.5 KiB of stack (the parser, for a `SUBQUERY` used as a collection;
    /// 1.5 to 2.5 KiB in the other stages), so a predicate at the limit takes
    /// at most 146 KiB, under 30 % of a worker's stack, in any stage
    /// (`PredicateNestingLimitTests` prints the figures). The SQL the store
    /// runs nests as the predicate does, and SQLite's own parser, whose stack
    /// has 100 entries in common builds (`YYSTACKDEPTH`), refuses some
    /// predicates of 46 levels. Predicates people write nest a handful of
    /// levels; those a query builder makes, rarely more than a dozen.
    public static let maximumDepth = 32

    /// The most keys a key path in a predicate may have: 64.
    ///
    /// Each to-one step of a key path is a join in the SQL the SQLite store
    /// runs, and SQLite joins at most 64 tables, so a longer path could never
    /// be fetched. The parser refuses the key that passes the limit, so a path
    /// of any length is refused after reading at most 65 of its keys.
    public static let maximumKeyPathLength = 64
}

/// The messages and the check for ``FetchPredicate/maximumDepth`` and
/// ``FetchPredicate/maximumKeyPathLength``, one for the parser and the trees built in code.
enum PredicateLimits {
    static var depthReason: String {
        "the predicate nests more than \(FetchPredicate.maximumDepth) levels deep"
    }

    static func keyPathReason(of subject: String = "the key path") -> String {
        "\(subject) has more than \(FetchPredicate.maximumKeyPathLength) keys"
    }

    /// The first limit `node` passes, the node itself being `depth` levels
    /// deep; nil when it is within both.
    ///
    /// It walks with a stack of its own rather than recursing, so it measures a
    /// tree of any depth, and it stops at the first node past a limit.
    ///
    /// - Complexity: O(*n*) in the number of nodes.
    static func problem(in node: PredicateNode, depth: Int = 1) -> PredicateProblem? {
        var pending = [(node: node, depth: depth)]
        while let (node, depth) = pending.popLast() {
            if depth > FetchPredicate.maximumDepth { return PredicateProblem(depthReason) }
            switch node {
            case .truePredicate, .falsePredicate, .constant:
                break
            case .keyPath(let keys), .variable(_, let keys):
                if keys.count > FetchPredicate.maximumKeyPathLength { return PredicateProblem(keyPathReason()) }
            case .and(let children), .or(let children), .collection(let children):
                for child in children {
                    // A constant has nothing below it: within the depth limit it is no problem
                    // (a long `IN` list's constants are not pushed one by one).
                    if case .constant = child, depth + 1 <= FetchPredicate.maximumDepth { continue }
                    pending.append((child, depth + 1))
                }
            case .not(let child):
                pending.append((child, depth + 1))
            case .comparison(let lhs, _, let rhs, _, _):
                pending += [(lhs, depth + 1), (rhs, depth + 1)]
            case .aggregate(_, let collection, let keys):
                if keys.count > FetchPredicate.maximumKeyPathLength { return PredicateProblem(keyPathReason()) }
                pending.append((collection, depth + 1))
            case .subquery(let collection, _, let predicate):
                pending += [(collection, depth + 1), (predicate, depth + 1)]
            }
        }
        return nil
    }
}
