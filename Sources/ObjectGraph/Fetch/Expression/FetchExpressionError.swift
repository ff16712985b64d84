import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A dictionary fetch whose expressions, grouping or having predicate don't
/// fit the entity: what is wrong, and in which part of the request.
///
/// ```swift
/// do {
///     _ = try context.fetch(request)
/// } catch let error as FetchExpressionError where error.code == .needsNumbers {
///     print(error)   // StockUpdate, propertiesToFetch[1] 'total' sum:(company.symbol): sum needs numbers, and company.symbol is a string
/// }
/// ```
public struct FetchExpressionError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = FetchExpressionError
        /// The code's name, as written in Swift (`"needsNumbers"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// A key path names no attribute, crosses a to-many relationship, or ends at a relationship where a value is needed.
        public static let unknownKeyPath = Code("unknownKeyPath")
        /// `sum`, `average` or arithmetic over something that is not a number.
        public static let needsNumbers = Code("needsNumbers")
        /// A fetched value is neither grouped nor an aggregate, or an aggregate is grouped or nested.
        public static let notGrouped = Code("notGrouped")
        /// Expressions, grouping or a having predicate in a fetch that doesn't return dictionaries.
        public static let needsDictionaryResults = Code("needsDictionaryResults")
        /// A name that the request uses (in a sort, a having predicate, a group) matches no fetched value,
        /// or two fetched values share one.
        public static let unknownName = Code("unknownName")
    }

    /// The kind of failure.
    public var code: Code
    /// The entity fetched.
    public var entityName: String
    /// The part of the request: `"propertiesToFetch[1] 'total'"`, `"propertiesToGroupBy[0]"`, `"havingPredicate"`.
    public var location: String
    /// What is wrong, in words.
    public var message: String

    public init(_ code: Code, entityName: String, location: String, message: String) {
        self.code = code
        self.entityName = entityName
        self.location = location
        self.message = message
    }

    /// `<entity>, <location>: <message>`.
    public var description: String { "\(entityName), \(location): \(message)" }
}
