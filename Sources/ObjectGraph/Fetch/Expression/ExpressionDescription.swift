import Foundation

/// A computed column of a dictionary fetch: its key in the result, the
/// expression, and the type to read the value as (Core Data: `NSExpressionDescription`).
///
/// ```swift
/// let total = ExpressionDescription(name: "total", expression: .sum(.keyPath("price")), resultType: .double)
/// request.propertiesToFetch = ["company.symbol", .expression(total)]
/// ```
///
/// The result type matters because SQL keeps no type with a computed value:
/// `max(time)` comes back as seconds unless it is read as `.date`, a count
/// as an integer only when read as an integer type.
public struct ExpressionDescription: Sendable, Hashable {
    /// The result dictionary's key for the value, and the name a
    /// ``FetchRequest/havingPredicate`` uses for it (`$total > 100`).
    public var name: String
    /// What to compute.
    public var expression: FetchExpression
    /// How to read the computed value (Core Data: `expressionResultType`).
    public var resultType: AttributeType

    public init(name: String, expression: FetchExpression, resultType: AttributeType) {
        self.name = name
        self.expression = expression
        self.resultType = resultType
    }
}

/// One entry of ``FetchRequest/propertiesToFetch``: an attribute by name or
/// key path, or a computed ``ExpressionDescription``.
///
/// A string literal is a key path, so plain lists read as before:
/// `["symbol", "company.sector", .expression(total)]`.
public enum PropertyToFetch: Sendable, Hashable {
    /// An attribute of the entity, or one reached through to-one relationships
    /// (`"company.sector"`); the result's key is the key path as written.
    case keyPath(String)
    /// A computed value; the result's key is the description's name.
    case expression(ExpressionDescription)

    /// The key of this entry's value in each result dictionary.
    public var name: String {
        switch self {
        case .keyPath(let keyPath): keyPath
        case .expression(let description): description.name
        }
    }
}

extension PropertyToFetch: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) {
        self = .keyPath(value)
    }
}
