import Foundation

/// An object a predicate can be evaluated against in memory: a managed object,
/// a row of a custom store, or any test double.
///
/// The in-memory evaluator asks only for values by key and for the object's ID,
/// so pending changes in a context and objects of the in-memory store are
/// matched by the same rules the SQLite store's SQL applies.
public protocol PredicateSubject {
    /// The value of a property: `.value` for an attribute, `.subject` (or
    /// `.value(.null)`) for a to-one relationship, `.collection` of subjects for
    /// a to-many one.
    func predicateValue(forKey key: String) throws -> PredicateValue
    /// The object's ID, which comparisons with objects use (`company == %@`) and
    /// whose entity tells the evaluator which keys are to-many relationships.
    var predicateObjectID: ObjectID? { get }
}

/// A property value handed to the evaluator by a ``PredicateSubject``.
public indirect enum PredicateValue {
    /// An attribute value (or `.null` for an empty to-one relationship).
    case value(PropertyValue)
    /// The destination of a to-one relationship.
    case subject(any PredicateSubject)
    /// The destinations of a to-many relationship.
    case collection([PredicateValue])
}

extension FetchPredicate {
    /// Whether `subject` matches (Core Data: `evaluate(with:)`).
    ///
    /// The answer is the one SQLite gives for the compiled SQL on the same row:
    /// comparisons follow SQL's three-valued logic (a comparison with NULL is
    /// unknown; `NOT` of unknown is unknown; only a definite true matches),
    /// values compare as the SQLite store stores them (see ``PredicateScalar``),
    /// and to-many key paths are quantified as `EXISTS` subqueries are.
    ///
    /// - Throws: ``FetchPredicateError`` for an unsubstituted variable, a key
    ///   path that doesn't fit the values (a key read from a number, `ALL` over a
    ///   single value) or a predicate built in code deeper than ``maximumDepth``,
    ///   and whatever the subject throws.
    /// - Complexity: O(*n*) in the predicate's size and the objects its to-many key paths reach.
    public func evaluate(with subject: any PredicateSubject) throws -> Bool {
        do {
            try checkBounds()
            return try PredicateEvaluator(variables: [:], searchQueries: searchQueries).test(expression, on: .subject(subject)) == true
        } catch let problem as PredicateProblem {
            throw problem.error(format: source ?? description)
        }
    }
}

/// Evaluates a ``PredicateNode`` with SQLite's semantics.
struct PredicateEvaluator {
    /// An evaluated expression.
    enum Value {
        case scalar(PredicateScalar)
        case subject(any PredicateSubject)
        /// Values reached through a to-many relationship.
        case many([Value])
        /// A constant collection, `{a, b}`.
        case list([Value])
    }

    var variables: [String: Value]
    /// `MATCHES[search]` queries already parsed, by text (``FetchPredicate/searchQueries``).
    var searchQueries: [String: SearchQuery] = [:]

    // MARK: - Predicates

    /// The predicate's truth value: nil for SQL's "unknown".
    func test(_ predicate: PredicateNode, on object: Value) throws -> Bool? {
        switch predicate {
        case .truePredicate:
            return true
        case .falsePredicate:
            return false
        case .and(let children):
            return try combine(children, dominatedBy: false, on: object)
        case .or(let children):
            return try combine(children, dominatedBy: true, on: object)
        case .not(let child):
            return try test(child, on: object).map { !$0 }
        case .comparison(let lhs, let op, let rhs, let options, let modifier):
            return try compare(lhs, op, rhs, options: options, modifier: modifier, on: object)
        default:
            throw PredicateProblem("\(FetchPredicate(expression: predicate)) is a value, not a predicate")
        }
    }

    /// SQL's `AND` (dominated by false) and `OR` (dominated by true): the
    /// dominant value as soon as a child has it, else unknown when a child
    /// was, else the other value.
    private func combine(_ children: [PredicateNode], dominatedBy dominant: Bool, on object: Value) throws -> Bool? {
        var result: Bool? = !dominant
        for child in children {
            guard let truth = try test(child, on: object) else {
                result = nil
                continue
            }
            if truth == dominant { return dominant }
        }
        return result
    }

    /// A comparison's truth value: both sides evaluated, then tested as the
    /// operator reads them, on each element of a to-many side as `modifier` quantifies them.
    private func compare(_ lhs: PredicateNode, _ op: ComparisonOperator, _ rhs: PredicateNode,
                         options: ComparisonOptions, modifier: ComparisonModifier, on object: Value) throws -> Bool? {
        if op == .textSearch { return try search(lhs, rhs, modifier: modifier, on: object) }
        let evaluatedLeft = try value(lhs, on: object)
        let right = try value(rhs, on: object)
        let left = try quantified(evaluatedLeft, of: lhs, modifier: modifier, right: right)
        let lhsIsNil = lhs == .constant(.null), rhsIsNil = rhs == .constant(.null)
        switch op {
        case .in:
            return try check(left, quantifiedBy: modifier) { try isMember($0, of: right, options: options, lhsIsNil: lhsIsNil) }
        case .between:
            guard case .list(let bounds) = right, bounds.count == 2 else {
                if case .scalar(.null) = right { return nil }
                throw PredicateProblem("BETWEEN needs {low, high} after it")
            }
            let low = try scalar(bounds[0]), high = try scalar(bounds[1])
            return try check(left, quantifiedBy: modifier) { try isBetween($0, low, high, options) }
        default:
            return try compareSingle(left, op, right, options: options, modifier: modifier, lhsIsNil: lhsIsNil, rhsIsNil: rhsIsNil)
        }
    }

    /// The left side of a comparison, checked to be a to-many side when a
    /// modifier (`ANY`, `ALL`, `NONE`) quantifies it and the right side is not one.
    private func quantified(_ left: Value, of lhs: PredicateNode, modifier: ComparisonModifier, right: Value) throws -> Value {
        guard modifier != .direct else { return left }
        switch (left, right) {
        case (.many, _), (_, .many):
            return left
        case (.scalar(.null), _) where lhs.isKeyPathOrVariable:
            return .many([])   // a nil to-one on the way to a to-many, for subjects without an entity
        default:
            throw PredicateProblem("\(modifier.rawValue) needs a to-many key path, and \(FetchPredicate(expression: lhs)) is not one")
        }
    }

    /// `condition` on a value, or on each element of a to-many value as `modifier` quantifies them.
    private func check(_ value: Value, quantifiedBy modifier: ComparisonModifier, _ condition: (Value) throws -> Bool?) throws -> Bool? {
        if case .many(let items) = value { return try quantify(modifier, items, condition) }
        return try condition(value)
    }

    /// `IN`: whether `element` is among the right side's values, a constant
    /// collection, a to-many side, or a string it is part of.
    private func isMember(_ element: Value, of right: Value, options: ComparisonOptions, lhsIsNil: Bool) throws -> Bool? {
        let candidate = try scalar(element)
        switch right {
        case .list(let items):
            return try isMember(candidate, ofList: items, options: options)
        case .many(let items):
            for item in items where try equal(candidate, try scalar(item), options: options, lhsIsNil: lhsIsNil, rhsIsNil: false) == true {
                return true
            }
            return false
        case .scalar(.text(let text)):
            return PredicateScalar.stringTest(.contains, .text(text), candidate, options)
        case .scalar(.null):
            return nil
        default:
            throw PredicateProblem("IN needs a collection, a to-many key path or a string after it")
        }
    }

    /// SQL's `x IN (…)`: false for an empty list, unknown for NULL or an unknown miss.
    private func isMember(_ candidate: PredicateScalar, ofList items: [Value], options: ComparisonOptions) throws -> Bool? {
        if items.isEmpty { return false }
        if candidate.isNull { return nil }
        var sawUnknown = false
        for item in items {
            switch try equal(candidate, try scalar(item), options: options, lhsIsNil: false, rhsIsNil: false) {
            case true?: return true
            case nil: sawUnknown = true
            case false?: break
            }
        }
        return sawUnknown ? nil : false
    }

    /// `BETWEEN {low, high}`: both bounds inclusive, unknown when either test is.
    private func isBetween(_ element: Value, _ low: PredicateScalar, _ high: PredicateScalar, _ options: ComparisonOptions) throws -> Bool? {
        let x = try scalar(element)
        let above = ordered(.greaterOrEqual, x, low, options)
        let below = ordered(.lessOrEqual, x, high, options)
        if above == false || below == false { return false }
        if above == nil || below == nil { return nil }
        return true
    }

    /// A comparison of single values (`==`, `<`, `LIKE` …), over the elements
    /// of whichever side is to-many; at most one side may be.
    private func compareSingle(_ left: Value, _ op: ComparisonOperator, _ right: Value, options: ComparisonOptions,
                               modifier: ComparisonModifier, lhsIsNil: Bool, rhsIsNil: Bool) throws -> Bool? {
        if case .list = right { throw PredicateProblem("a collection {…} can only follow IN or BETWEEN") }
        if case .list = left { throw PredicateProblem("a collection {…} can only follow IN or BETWEEN") }
        switch (left, right) {
        case (.many, .many):
            throw PredicateProblem("only one side of a comparison may cross a to-many relationship")
        case (.many(let leftItems), _):
            let r = try scalar(right)
            return try quantify(modifier, leftItems) { try binary(op, try scalar($0), r, options, lhsIsNil, rhsIsNil) }
        case (_, .many(let rightItems)):
            let l = try scalar(left)
            return try quantify(modifier, rightItems) { try binary(op, l, try scalar($0), options, lhsIsNil, rhsIsNil) }
        default:
            return try binary(op, try scalar(left), try scalar(right), options, lhsIsNil, rhsIsNil)
        }
    }

    /// `MATCHES[search]`: whether the text the left side reaches matches the
    /// query (``SearchQuery/matches(_:)``, the tokenizer the store's FTS5 index
    /// uses). No value, a nil attribute or a nil object on the way, matches
    /// nothing: false, not unknown, as the compiled SQL's `IN` gives.
    private func search(_ lhs: PredicateNode, _ rhs: PredicateNode, modifier: ComparisonModifier,
                        on object: Value) throws -> Bool {
        let query: SearchQuery
        if case .constant(.string(let text)) = rhs, let parsed = searchQueries[text] {
            query = parsed
        } else {
            query = try PredicateSearch.query(from: rhs)
        }
        func matches(_ value: Value) throws -> Bool? {
            switch value {
            case .scalar(.text(let text)):
                return query.matches([text])
            case .scalar:
                return false
            case .subject(let subject):
                return query.matches(try Self.searchDocument(of: subject))
            case .many, .list:
                throw PredicateProblem("MATCHES[search] needs an attribute key path or SELF on its left")
            }
        }
        let left = try value(lhs, on: object)
        if case .many(let items) = left { return try quantify(modifier, items, matches) }
        if modifier != .direct {
            throw PredicateProblem("\(modifier.rawValue) needs a to-many key path, and \(FetchPredicate(expression: lhs)) is not one")
        }
        return try matches(left) == true
    }

    /// The texts of an object's indexed attributes, one column each, as the
    /// store's index holds them: what `SELF MATCHES[search]` searches.
    private static func searchDocument(of subject: any PredicateSubject) throws -> [String?] {
        guard let entity = subject.predicateObjectID?.entity else {
            throw PredicateProblem("SELF MATCHES[search] needs an object with an entity")
        }
        let attributes = entity.searchIndexedAttributes
        guard !attributes.isEmpty else {
            throw PredicateProblem("entity \(entity.name) has no attribute indexed for search (isIndexedBySpotlight on a String attribute)")
        }
        return try attributes.map { attribute in
            if case .value(.string(let text)) = try subject.predicateValue(forKey: attribute.name) { return text }
            return nil
        }
    }

    /// `ANY`/`SOME` (and a to-many side without a modifier): some element is
    /// true; `ALL`: every element is true; `NONE`: no element is true.
    private func quantify(_ modifier: ComparisonModifier, _ items: [Value], _ condition: (Value) throws -> Bool?) throws -> Bool {
        switch modifier {
        case .direct, .any:
            for item in items where try condition(item) == true { return true }
            return false
        case .all:
            for item in items where try condition(item) != true { return false }
            return true
        case .none:
            for item in items where try condition(item) == true { return false }
            return true
        }
    }

    private func binary(_ op: ComparisonOperator, _ a: PredicateScalar, _ b: PredicateScalar,
                        _ options: ComparisonOptions, _ lhsIsNil: Bool, _ rhsIsNil: Bool) throws -> Bool? {
        switch op {
        case .equal:
            return try equal(a, b, options: options, lhsIsNil: lhsIsNil, rhsIsNil: rhsIsNil)
        case .notEqual:
            return try equal(a, b, options: options, lhsIsNil: lhsIsNil, rhsIsNil: rhsIsNil).map { !$0 }
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            return ordered(op, a, b, options)
        case .beginsWith, .endsWith, .contains, .like, .matches:
            return PredicateScalar.stringTest(op, a, b, options)
        case .in, .between, .textSearch:
            return nil   // each has its own path in compare(…)
        }
    }

    /// `==`: against a literal nil it is SQL's `IS NULL` (never unknown);
    /// otherwise SQL's `=`.
    private func equal(_ a: PredicateScalar, _ b: PredicateScalar, options: ComparisonOptions,
                       lhsIsNil: Bool, rhsIsNil: Bool) throws -> Bool? {
        if lhsIsNil || rhsIsNil {
            return (lhsIsNil ? b : a).isNull || (lhsIsNil && rhsIsNil)
        }
        return PredicateScalar.compare(PredicateScalar.fold(a, options), PredicateScalar.fold(b, options)).map { $0 == .orderedSame }
    }

    private func ordered(_ op: ComparisonOperator, _ a: PredicateScalar, _ b: PredicateScalar, _ options: ComparisonOptions) -> Bool? {
        guard let order = PredicateScalar.compare(PredicateScalar.fold(a, options), PredicateScalar.fold(b, options)) else { return nil }
        switch op {
        case .less: return order == .orderedAscending
        case .lessOrEqual: return order != .orderedDescending
        case .greater: return order == .orderedDescending
        case .greaterOrEqual: return order != .orderedAscending
        case .equal: return order == .orderedSame
        default: return order != .orderedSame
        }
    }

    // MARK: - Values

    func value(_ expression: PredicateNode, on object: Value) throws -> Value {
        switch expression {
        case .keyPath(let keys):
            return try resolve(object, keys[...])
        case .variable(let name, let keys):
            guard let bound = variables[name] else {
                throw PredicateProblem("the variable $\(name) has no value; use withSubstitutionVariables(_:)", key: "$" + name)
            }
            return try resolve(bound, keys[...])
        case .constant(.objects(let ids)):
            return .list(ids.map { .scalar(.object($0)) })
        case .constant(let constant):
            return .scalar(PredicateScalar(constant))
        case .collection(let elements):
            return .list(try elements.map { try value($0, on: object) })
        case .aggregate(let function, let collection, let keys):
            return .scalar(try aggregate(function, of: try items(of: collection, on: object, for: "@" + function.rawValue), keys))
        case .subquery(let collection, let variable, let predicate):
            var kept: [Value] = []
            for item in try items(of: collection, on: object, for: "SUBQUERY") {
                var inner = self
                inner.variables[variable] = item
                if try inner.test(predicate, on: item) == true { kept.append(item) }
            }
            return .many(kept)
        default:
            throw PredicateProblem("a predicate can't be used as a value")
        }
    }

    private func items(of collection: PredicateNode, on object: Value, for what: String) throws -> [Value] {
        switch try value(collection, on: object) {
        case .many(let items): return items
        case .scalar(.null): return []
        default: throw PredicateProblem("\(what) needs a to-many key path, and \(FetchPredicate(expression: collection)) is not one")
        }
    }

    /// `@count`, `@sum` (SQL's `TOTAL`: 0 for no values), `@avg`, `@min`, `@max`
    /// (NULL for no values), ignoring nil values as SQL aggregates do.
    private func aggregate(_ function: AggregateFunction, of items: [Value], _ keys: [String]) throws -> PredicateScalar {
        if function == .count {
            guard keys.isEmpty else { throw PredicateProblem("@count takes no key path after it") }
            return .integer(Int64(items.count))
        }
        var values: [PredicateScalar] = []
        for item in items {
            switch try resolve(item, keys[...]) {
            case .many(let inner): values += try inner.map(scalar)
            case let single: values.append(try scalar(single))
            }
        }
        values.removeAll { $0.isNull }
        switch function {
        case .min, .max:
            var best: PredicateScalar?
            for value in values {
                guard let current = best else { best = value; continue }
                let order = PredicateScalar.compare(value, current)
                if (function == .min && order == .orderedAscending) || (function == .max && order == .orderedDescending) {
                    best = value
                }
            }
            return best ?? .null
        default:
            var sum = 0.0
            for value in values {
                switch value {
                case .integer(let v): sum += Double(v)
                case .real(let v): sum += v
                default: throw PredicateProblem("@\(function.rawValue) needs numbers, not \(value)")
                }
            }
            if function == .sum { return .real(sum) }
            return values.isEmpty ? .null : .real(sum / Double(values.count))
        }
    }

    /// Follows `keys` from `value`, through to-one and to-many relationships.
    private func resolve(_ value: Value, _ keys: ArraySlice<String>) throws -> Value {
        guard let key = keys.first else { return value }
        let rest = keys.dropFirst()
        switch value {
        case .subject(let subject):
            var next = Self.convert(try subject.predicateValue(forKey: key))
            if case .scalar(.null) = next, let entity = subject.predicateObjectID?.entity, Self.crossesToMany(entity, keys) {
                next = .many([])   // a nil to-one, or an unloaded to-many, on the way to a to-many: no elements
            }
            return try resolve(next, rest)
        case .many(let items):
            var flattened: [Value] = []
            for item in items {
                switch try resolve(item, keys) {
                case .many(let inner): flattened += inner
                case let single: flattened.append(single)
                }
            }
            return .many(flattened)
        case .scalar(.null):
            return .scalar(.null)
        case .scalar(.object):
            throw PredicateProblem("can't read '\(key)' from an object ID; a subject gives relationships as .subject", key: key)
        case .scalar, .list:
            throw PredicateProblem("can't read '\(key)' from a value that is not an object", key: key)
        }
    }

    private static func convert(_ value: PredicateValue) -> Value {
        switch value {
        case .value(.objects(let ids)): .many(ids.map { .scalar(.object($0)) })
        case .value(let value): .scalar(PredicateScalar(value))
        case .subject(let subject): .subject(subject)
        case .collection(let items): .many(items.map(convert))
        }
    }

    /// Whether `keys`, read from an object of `entity`, pass a to-many relationship.
    static func crossesToMany(_ entity: EntityDescription, _ keys: ArraySlice<String>) -> Bool {
        var entity: EntityDescription? = entity
        for key in keys {
            guard let relationship = entity?.propertiesByName[key] as? RelationshipDescription else { return false }
            if relationship.isToMany { return true }
            entity = relationship.destinationEntity
        }
        return false
    }

    private func scalar(_ value: Value) throws -> PredicateScalar {
        switch value {
        case .scalar(let scalar): return scalar
        case .subject(let subject): return subject.predicateObjectID.map { .object($0) } ?? .null
        case .many, .list: throw PredicateProblem("a collection can't be compared as a single value; use ANY, ALL, NONE, IN or an aggregate")
        }
    }
}
