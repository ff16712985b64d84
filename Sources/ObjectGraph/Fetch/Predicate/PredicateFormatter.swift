import Foundation

/// Prints a ``PredicateNode`` in canonical format, which the parser reads back.
package enum PredicateFormatter {
    /// The predicate's format. A tree deeper than ``FetchPredicate/maximumDepth``
    /// (built in code: the parser builds none) is printed down to the limit,
    /// each deeper part as `…`, so that printing never recurses past the limit;
    /// the text then does not parse, as the predicate can't be used either.
    static func format(_ expression: PredicateNode) -> String {
        format(expression, depth: 1)
    }

    private static func format(_ expression: PredicateNode, depth: Int) -> String {
        guard depth <= FetchPredicate.maximumDepth else { return "…" }
        func format(_ child: PredicateNode) -> String {
            PredicateFormatter.format(child, depth: depth + 1)
        }
        switch expression {
        case .truePredicate:
            return "TRUEPREDICATE"
        case .falsePredicate:
            return "FALSEPREDICATE"
        case .and(let children):
            if children.isEmpty { return "TRUEPREDICATE" }
            if children.count == 1 { return format(children[0]) }
            return children.map { child in
                switch child {
                case .or, .and: "(" + format(child) + ")"
                default: format(child)
                }
            }.joined(separator: " AND ")
        case .or(let children):
            if children.isEmpty { return "FALSEPREDICATE" }
            if children.count == 1 { return format(children[0]) }
            return children.map { child in
                if case .or = child { return "(" + format(child) + ")" }
                return format(child)
            }.joined(separator: " OR ")
        case .not(let child):
            switch child {
            case .and, .or: return "NOT (" + format(child) + ")"
            default: return "NOT " + format(child)   // NOT NOT x: no parentheses, which the parser would count as levels
            }
        case .comparison(let lhs, let op, let rhs, let options, let modifier):
            let prefix = modifier == .direct ? "" : modifier.rawValue + " "
            return prefix + format(lhs) + " " + op.rawValue + options.formatted + " " + format(rhs)
        case .keyPath(let keys):
            return keys.isEmpty ? "SELF" : keyPath(keys)
        case .variable(let name, let keys):
            return "$" + name + (keys.isEmpty ? "" : "." + keyPath(keys))
        case .constant(let value):
            return constant(value)
        case .collection(let elements):
            return "{" + elements.map(format).joined(separator: ", ") + "}"
        case .aggregate(let function, let collection, let keys):
            return format(collection) + ".@" + function.rawValue + (keys.isEmpty ? "" : "." + keyPath(keys))
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(" + format(collection) + ", $" + variable + ", " + format(predicate) + ")"
        }
    }

    private static func keyPath(_ keys: [String]) -> String {
        keys.map { PredicateParser.reservedWords.contains($0.uppercased()) ? "#" + $0 : $0 }.joined(separator: ".")
    }

    static func constant(_ value: PropertyValue) -> String {
        switch value {
        case .null: return "nil"
        case .integer(let v): return String(v)
        case .double(let v):
            return v.isFinite ? "\(v)" : "CAST(\(QuotedString.predicateLiteral("\(v)")), \"NSNumber\")"
        case .bool(let v): return v ? "TRUE" : "FALSE"
        case .string(let v): return QuotedString.predicateLiteral(v)
        case .date(let v): return "CAST(\(constant(.double(v.timeIntervalSinceReferenceDate))), \"NSDate\")"
        case .data(let v): return "CAST(\(QuotedString.predicateLiteral(v.base64EncodedString())), \"NSData\")"
        case .uuid(let v): return "CAST(\(QuotedString.predicateLiteral(v.uuidString)), \"NSUUID\")"
        case .uri(let v): return "CAST(\(QuotedString.predicateLiteral(v.absoluteString)), \"NSURL\")"
        case .decimal(let v): return "CAST(\(QuotedString.predicateLiteral(v.description)), \"NSDecimalNumber\")"
        case .object(let id): return "CAST(\(QuotedString.predicateLiteral(id.uriRepresentation().absoluteString)), \"NSManagedObjectID\")"
        case .objects(let ids): return "{" + ids.map { constant(.object($0)) }.joined(separator: ", ") + "}"
        }
    }

}
