import Foundation

/// A value computed from an object or from a group of objects: a key path, a
/// constant, arithmetic on them, or an aggregate function (Core Data: `NSExpression`).
///
/// ```swift
/// let total = FetchExpression.sum(.keyPath("price"))
/// let withTax = FetchExpression.keyPath("price") * 1.1
/// let sectors = FetchExpression.countDistinct(.keyPath("company.sector"))
/// ```
///
/// Expressions are built in Swift rather than parsed from Core Data's strings
/// (`sum:(price)`): the predicate grammar has no arithmetic, and factories with
/// operators are checked by the compiler. The name carries the `Fetch` prefix of
/// ``FetchPredicate`` and ``FetchSort`` because Foundation already has an `Expression`.
///
/// The same type gives a ``BatchUpdateRequest`` its new values, so one
/// vocabulary serves both; there, a value is computed from the row's own
/// attributes (no aggregates, no key paths through relationships).
///
/// An expression is compiled to SQL by the SQLite store and evaluated in memory
/// by the in-memory store, with SQLite's rules in both: arithmetic with nil is
/// nil, integers stay integers until they overflow, `/` always divides as
/// floating point and gives nil for a zero divisor; aggregates skip nil values,
/// ``sum(_:)`` of nothing is 0 (SQL's `TOTAL`, as Core Data compiles `sum:`),
/// ``average(_:)``, ``min(_:)`` and ``max(_:)`` of nothing are nil.
///
/// `/` divides as floating point even for two integers (`7 / 2` is 3.5, not
/// SQL's 3) because that is what Core Data's `divide:by:` gives, and because
/// the answer should not change when an attribute's type goes from
/// `Int64` to `Double`. A result stored in an integer attribute is truncated
/// toward zero, so `.keyPath("count") / 2` written into an integer still halves
/// it as integer division would.
///
/// A literal is a constant: `1`, `1.5`, `true`, `"text"`, `nil`. A string
/// literal is a string constant, not a key path (unlike ``PropertyToFetch``),
/// so that `["note": "repriced"]` in a batch update sets a text; write
/// ``keyPath(_:)`` to read a value.
///
/// ## Topics
/// - ``ExpressionDescription``
/// - ``FetchExpressionError``
public struct FetchExpression: Sendable, Hashable {
    /// The expression tree.
    package let node: Node

    package init(_ node: Node) {
        self.node = node
    }

    /// The parts of an expression.
    package indirect enum Node: Sendable, Hashable {
        /// A key path through to-one relationships; `[]` is the object itself.
        case keyPath([String])
        case constant(PropertyValue)
        case arithmetic(ArithmeticOperator, Node, Node)
        case aggregate(Function, Node)

        /// Whether it is a constant (checked when the request is made, unlike a computed value).
        package var isConstant: Bool {
            if case .constant = self { true } else { false }
        }
    }

    /// `+ - * /`, as SQL applies them.
    package enum ArithmeticOperator: String, Sendable, Hashable {
        case add = "+"
        case subtract = "-"
        case multiply = "*"
        case divide = "/"
    }

    /// The functions that reduce a group of values to one (Core Data's `sum:`, `count:`…).
    package enum Function: String, Sendable, Hashable {
        case sum
        case average
        case min
        case max
        case count
        case countDistinct

        /// Whether the function adds or averages, so needs numbers.
        var needsNumbers: Bool { self == .sum || self == .average }
    }
}

// MARK: - Building expressions

extension FetchExpression {
    /// The value at a key path of each object: an attribute, possibly through
    /// to-one relationships (`"company.sector"`) (Core Data: `NSExpression(forKeyPath:)`).
    public static func keyPath(_ keyPath: String) -> FetchExpression {
        FetchExpression(.keyPath(keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)))
    }

    /// The object itself, to count objects rather than values (Core Data: `NSExpression.expressionForEvaluatedObject()`).
    public static let evaluatedObject = FetchExpression(.keyPath([]))

    /// A constant (Core Data: `NSExpression(forConstantValue:)`).
    public static func constant(_ value: PropertyValue) -> FetchExpression {
        FetchExpression(.constant(value))
    }

    /// The sum of the non-nil values; 0 when there are none (Core Data: `sum:`).
    public static func sum(_ argument: FetchExpression) -> FetchExpression {
        FetchExpression(.aggregate(.sum, argument.node))
    }

    /// The mean of the non-nil values; nil when there are none (Core Data: `average:`).
    public static func average(_ argument: FetchExpression) -> FetchExpression {
        FetchExpression(.aggregate(.average, argument.node))
    }

    /// The smallest non-nil value; nil when there is none (Core Data: `min:`).
    public static func min(_ argument: FetchExpression) -> FetchExpression {
        FetchExpression(.aggregate(.min, argument.node))
    }

    /// The largest non-nil value; nil when there is none (Core Data: `max:`).
    public static func max(_ argument: FetchExpression) -> FetchExpression {
        FetchExpression(.aggregate(.max, argument.node))
    }

    /// How many non-nil values there are; `.count(.evaluatedObject)`, the
    /// default, counts the objects themselves (Core Data: `count:`).
    public static func count(_ argument: FetchExpression = .evaluatedObject) -> FetchExpression {
        FetchExpression(.aggregate(.count, argument.node))
    }

    /// How many different non-nil values there are (SQL's `COUNT(DISTINCT …)`).
    public static func countDistinct(_ argument: FetchExpression) -> FetchExpression {
        FetchExpression(.aggregate(.countDistinct, argument.node))
    }

    public static func + (lhs: FetchExpression, rhs: FetchExpression) -> FetchExpression {
        FetchExpression(.arithmetic(.add, lhs.node, rhs.node))
    }

    public static func - (lhs: FetchExpression, rhs: FetchExpression) -> FetchExpression {
        FetchExpression(.arithmetic(.subtract, lhs.node, rhs.node))
    }

    public static func * (lhs: FetchExpression, rhs: FetchExpression) -> FetchExpression {
        FetchExpression(.arithmetic(.multiply, lhs.node, rhs.node))
    }

    /// Floating-point division, whatever the operands' types (Core Data: `divide:by:`); nil for a zero divisor.
    public static func / (lhs: FetchExpression, rhs: FetchExpression) -> FetchExpression {
        FetchExpression(.arithmetic(.divide, lhs.node, rhs.node))
    }
}

// MARK: - Reading expressions

extension FetchExpression.Node {
    /// Whether an aggregate function appears anywhere in the tree.
    var containsAggregate: Bool {
        switch self {
        case .keyPath, .constant: false
        case .aggregate: true
        case .arithmetic(_, let lhs, let rhs): lhs.containsAggregate || rhs.containsAggregate
        }
    }

    /// The key paths read per object, outside any aggregate: in a grouped
    /// fetch, each must be one of the grouped key paths.
    var keyPathsOutsideAggregates: [[String]] {
        switch self {
        case .keyPath(let keys): [keys]
        case .constant, .aggregate: []
        case .arithmetic(_, let lhs, let rhs): lhs.keyPathsOutsideAggregates + rhs.keyPathsOutsideAggregates
        }
    }
}

// MARK: - Conformances

extension FetchExpression: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) {
        self.init(.constant(.integer(value)))
    }
}

extension FetchExpression: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) {
        self.init(.constant(.double(value)))
    }
}

extension FetchExpression: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) {
        self.init(.constant(.bool(value)))
    }
}

extension FetchExpression: ExpressibleByStringLiteral {
    /// A string constant; a key path is ``keyPath(_:)``.
    public init(stringLiteral value: String) {
        self.init(.constant(.string(value)))
    }
}

extension FetchExpression: ExpressibleByNilLiteral {
    /// The constant nil: in a batch update, clears the attribute.
    public init(nilLiteral: ()) {
        self.init(.constant(.null))
    }
}

extension FetchExpression: CustomStringConvertible {
    /// Core Data's format: `price * 1.1`, `sum:(price)`, `count:(SELF)`.
    public var description: String { node.description }
}

extension FetchExpression.Node: CustomStringConvertible {
    package var description: String {
        switch self {
        case .keyPath(let keys): keys.isEmpty ? "SELF" : keys.joined(separator: ".")
        case .constant(let value): FetchPredicate(expression: .constant(value)).description
        case .arithmetic(let op, let lhs, let rhs): "(\(lhs) \(op.rawValue) \(rhs))"
        case .aggregate(.countDistinct, let argument): "count:(DISTINCT \(argument))"
        case .aggregate(let function, let argument): "\(function.rawValue):(\(argument))"
        }
    }
}
