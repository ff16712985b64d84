import Foundation

extension FetchExpression {
    /// The expression's value for one object, computed in memory as the SQLite
    /// store's SQL computes it (see ``FetchExpression``), read as `type`.
    ///
    /// An aggregate here reduces the one object: `count` is 0 or 1, `sum` its value.
    ///
    /// - Throws: ``FetchExpressionError`` for arithmetic or a sum on a value
    ///   that is not a number, or a key path that reaches several objects;
    ///   whatever the subject throws (an unknown key, a fault that can't be fulfilled).
    public func evaluate(with subject: any PredicateSubject, as type: AttributeType) throws -> PropertyValue {
        let entity = subject.predicateObjectID?.entity.name ?? "?"
        do {
            return try node.value(in: ExpressionGroup(rows: [subject])).propertyValue(as: type)
        } catch let problem as PredicateProblem {
            throw FetchExpressionError(.needsNumbers, entityName: entity, location: "expression \(self)", message: problem.reason)
        }
    }
}

/// The objects an expression is evaluated over: one object, or a group whose
/// key paths (all grouped) are read from its first object.
struct ExpressionGroup {
    var rows: [any PredicateSubject]
}

extension FetchExpression.Node {
    /// The value for a group, with SQLite's rules (see ``FetchExpression``).
    func value(in group: ExpressionGroup) throws -> PredicateScalar {
        switch self {
        case .keyPath(let keys):
            guard let first = group.rows.first else { return .null }
            switch try PredicateEvaluator(variables: [:]).value(.keyPath(keys), on: .subject(first)) {
            case .scalar(let scalar): return scalar
            case .subject(let subject): return subject.predicateObjectID.map { .object($0) } ?? .null
            case .many, .list: throw PredicateProblem("\(self) reaches several values; use a to-one key path")
            }
        case .constant(let value):
            return PredicateScalar(value)
        case .arithmetic(let op, let lhs, let rhs):
            return try Self.apply(op, try lhs.value(in: group), try rhs.value(in: group))
        case .aggregate(let function, let argument):
            let values = try group.rows.map { try argument.value(in: ExpressionGroup(rows: [$0])) }.filter { !$0.isNull }
            return try Self.reduce(function, values)
        }
    }

    /// `a op b` as SQLite computes it: nil with nil, integers until they overflow, `/` in floating point.
    private static func apply(_ op: FetchExpression.ArithmeticOperator, _ a: PredicateScalar, _ b: PredicateScalar) throws -> PredicateScalar {
        if a.isNull || b.isNull { return .null }
        if op != .divide, case .integer(let x) = a, case .integer(let y) = b {
            let (result, overflow) = switch op {
            case .add: x.addingReportingOverflow(y)
            case .subtract: x.subtractingReportingOverflow(y)
            default: x.multipliedReportingOverflow(by: y)
            }
            if !overflow { return .integer(result) }
        }
        let x = try number(a), y = try number(b)
        switch op {
        case .add: return .real(x + y)
        case .subtract: return .real(x - y)
        case .multiply: return .real(x * y)
        case .divide: return y == 0 ? .null : .real(x / y)
        }
    }

    /// SQL's aggregates over the non-nil values: `TOTAL` for sum, `AVG`, `MIN`, `MAX`, `COUNT`, `COUNT(DISTINCT)`.
    private static func reduce(_ function: FetchExpression.Function, _ values: [PredicateScalar]) throws -> PredicateScalar {
        switch function {
        case .count:
            return .integer(Int64(values.count))
        case .countDistinct:
            return .integer(Int64(Set(values).count))
        case .sum, .average:
            let total = try values.reduce(0.0) { $0 + (try number($1)) }
            if function == .sum { return .real(total) }
            return values.isEmpty ? .null : .real(total / Double(values.count))
        case .min, .max:
            let wanted: ComparisonResult = function == .min ? .orderedAscending : .orderedDescending
            return values.dropFirst().reduce(values.first ?? .null) { best, value in
                PredicateScalar.compare(value, best) == wanted ? value : best
            }
        }
    }

    private static func number(_ value: PredicateScalar) throws -> Double {
        switch value {
        case .integer(let v): return Double(v)
        case .real(let v): return v
        default: throw PredicateProblem("arithmetic and sums need numbers, not \(value)")
        }
    }
}

extension PredicateScalar {
    /// The value read as an attribute of `type`, as the SQLite store reads a column of that type.
    func propertyValue(as type: AttributeType) -> PropertyValue {
        switch (self, type) {
        case (.null, _): return .null
        case (.object(let id), _): return type.isNumeric ? .integer(id.primaryKey ?? -1) : .object(id)
        case (.integer(let v), .integer16), (.integer(let v), .integer32), (.integer(let v), .integer64): return .integer(v)
        case (.real(let v), .integer16), (.real(let v), .integer32), (.real(let v), .integer64): return .integer(truncating: v)
        case (.integer(let v), .boolean): return .bool(v != 0)
        case (.real(let v), .boolean): return .bool(v != 0)
        case (.integer(let v), .double), (.integer(let v), .float): return .double(Double(v))
        case (.real(let v), .double), (.real(let v), .float): return .double(v)
        case (.integer(let v), .decimal): return .decimal(Decimal(v))
        case (.real(let v), .decimal): return .decimal(fromStored: v)
        case (.integer(let v), .date): return .date(Date(timeIntervalSinceReferenceDate: Double(v)))
        case (.real(let v), .date): return .date(Date(timeIntervalSinceReferenceDate: v))
        case (.text(let v), .string): return .string(v)
        case (.text(let v), .uri): return URL(string: v).map(PropertyValue.uri) ?? .null
        case (.blob(let v), .binaryData), (.blob(let v), .transformable): return .data(v)
        case (.blob(let v), .uuid) where v.count == 16:
            return .uuid(v.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) })
        case (.integer(let v), .string): return .string(String(v))
        case (.real(let v), .string): return .string(String(v))
        default: return .null
        }
    }
}
