import Foundation

/// The new value of one attribute in a ``BatchUpdateRequest``: a constant, or
/// arithmetic on the row's own numeric attributes (Core Data: the values of
/// `NSBatchUpdateRequest.propertiesToUpdate`, a constant or an `NSExpression`).
///
/// ```swift
/// let request = BatchUpdateRequest(entityName: "Stock", propertiesToUpdate: [
///     "price": .attribute("price") * 1.1,
///     "note": "repriced",
/// ])
/// ```
///
/// Arithmetic is kept to `+ - * /` on integer and floating-point attributes,
/// because that is what both stores compute alike: the SQLite store writes it
/// as SQL over the row's columns, the in-memory store evaluates it per row.
/// Integers combine as integers (division truncates, as in SQL); a
/// floating-point operand makes the result floating-point; `nil` in any
/// operand gives `nil`. A result stored into an integer attribute is
/// truncated toward zero.
///
/// It is a type of its own, and small, because a batch update needs only
/// this much; a general expression type (aggregates, functions) can take its
/// place without changing ``BatchUpdateRequest``'s callers, which write
/// literals and ``attribute(_:)``.
public indirect enum BatchUpdateValue: Sendable {
    /// A constant, converted as key-value coding converts it (`NSNull()` for nil).
    case value(any Sendable)
    /// The row's current value of an attribute of the request's entity.
    case attribute(String)
    /// Arithmetic on two values.
    case arithmetic(BatchUpdateValue, ArithmeticOperator, BatchUpdateValue)

    /// The four operators ``arithmetic(_:_:_:)`` knows.
    public enum ArithmeticOperator: String, Sendable {
        case add = "+", subtract = "-", multiply = "*", divide = "/"
    }

    public static func + (lhs: BatchUpdateValue, rhs: BatchUpdateValue) -> BatchUpdateValue { .arithmetic(lhs, .add, rhs) }
    public static func - (lhs: BatchUpdateValue, rhs: BatchUpdateValue) -> BatchUpdateValue { .arithmetic(lhs, .subtract, rhs) }
    public static func * (lhs: BatchUpdateValue, rhs: BatchUpdateValue) -> BatchUpdateValue { .arithmetic(lhs, .multiply, rhs) }
    public static func / (lhs: BatchUpdateValue, rhs: BatchUpdateValue) -> BatchUpdateValue { .arithmetic(lhs, .divide, rhs) }
}

extension BatchUpdateValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
                            ExpressibleByStringLiteral, ExpressibleByNilLiteral {
    public init(integerLiteral value: Int) { self = .value(value) }
    public init(floatLiteral value: Double) { self = .value(value) }
    public init(booleanLiteral value: Bool) { self = .value(value) }
    public init(stringLiteral value: String) { self = .value(value) }
    public init(nilLiteral: ()) { self = .value(NSNull()) }
}

// MARK: - Resolved against the model

/// A ``BatchUpdateValue`` checked against its entity: constants converted to
/// slot values, attribute names to descriptions. What a store executes.
package indirect enum ResolvedUpdateValue: Sendable {
    case constant(PropertyValue)
    case attribute(AttributeDescription)
    case arithmetic(ResolvedUpdateValue, BatchUpdateValue.ArithmeticOperator, ResolvedUpdateValue)

    /// The value for one row, whose slots are `values`, stored as `target` keeps it.
    package func evaluate(on values: ContiguousArray<PropertyValue>, storedAs target: AttributeType) -> PropertyValue {
        let result = evaluate(on: values)
        switch (result, target) {
        case (.double(let double), .integer16), (.double(let double), .integer32), (.double(let double), .integer64):
            return double.isFinite ? .integer(Int64(double.rounded(.towardZero))) : .null
        case (.integer(let integer), .double), (.integer(let integer), .float):
            return .double(Double(integer))
        default:
            return result
        }
    }

    private func evaluate(on values: ContiguousArray<PropertyValue>) -> PropertyValue {
        switch self {
        case .constant(let value): return value
        case .attribute(let attribute): return values[attribute.index]
        case .arithmetic(let lhs, let op, let rhs):
            switch (lhs.evaluate(on: values), rhs.evaluate(on: values)) {
            case (.integer(let a), .integer(let b)): return Self.apply(op, a, b)
            case (.integer(let a), .double(let b)): return Self.apply(op, Double(a), b)
            case (.double(let a), .integer(let b)): return Self.apply(op, a, Double(b))
            case (.double(let a), .double(let b)): return Self.apply(op, a, b)
            default: return .null
            }
        }
    }

    /// Integer arithmetic as SQLite does it: overflow and division by zero give NULL.
    private static func apply(_ op: BatchUpdateValue.ArithmeticOperator, _ a: Int64, _ b: Int64) -> PropertyValue {
        let (value, overflow): (Int64, Bool)
        switch op {
        case .add: (value, overflow) = a.addingReportingOverflow(b)
        case .subtract: (value, overflow) = a.subtractingReportingOverflow(b)
        case .multiply: (value, overflow) = a.multipliedReportingOverflow(by: b)
        case .divide:
            guard b != 0 else { return .null }
            (value, overflow) = a.dividedReportingOverflow(by: b)
        }
        // SQLite turns an overflowing integer operation into a floating-point one.
        return overflow ? apply(op, Double(a), Double(b)) : .integer(value)
    }

    private static func apply(_ op: BatchUpdateValue.ArithmeticOperator, _ a: Double, _ b: Double) -> PropertyValue {
        switch op {
        case .add: .double(a + b)
        case .subtract: .double(a - b)
        case .multiply: .double(a * b)
        case .divide: b == 0 ? .null : .double(a / b)
        }
    }
}
