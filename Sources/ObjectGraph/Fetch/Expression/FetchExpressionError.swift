import Foundation

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
public struct FetchExpressionError: Error, Sendable, Equatable {
    /// What kind of problem it is.
    public struct Code: Hashable, Sendable {
        let raw: UInt8
        /// A key path names no attribute, crosses a to-many relationship, or ends at a relationship where a value is needed.
        public static let unknownKeyPath = Code(raw: 1)
        /// `sum`, `average` or arithmetic over something that is not a number.
        public static let needsNumbers = Code(raw: 2)
        /// A fetched value is neither grouped nor an aggregate, or an aggregate is grouped or nested.
        public static let notGrouped = Code(raw: 3)
        /// Expressions, grouping or a having predicate in a fetch that doesn't return dictionaries.
        public static let needsDictionaryResults = Code(raw: 4)
        /// A name that the request uses (in a sort, a having predicate, a group) matches no fetched value,
        /// or two fetched values share one.
        public static let unknownName = Code(raw: 5)

        /// Matches a thrown error by code: `catch FetchExpressionError.Code.needsNumbers`.
        public static func ~= (code: Code, error: any Error) -> Bool { (error as? FetchExpressionError)?.code == code }
    }

    public var code: Code
    /// The entity fetched.
    public var entity: String
    /// The part of the request: `"propertiesToFetch[1] 'total'"`, `"propertiesToGroupBy[0]"`, `"havingPredicate"`.
    public var location: String
    /// What is wrong.
    public var reason: String

    public init(_ code: Code, entity: String, location: String, reason: String) {
        self.code = code
        self.entity = entity
        self.location = location
        self.reason = reason
    }
}

extension FetchExpressionError: CustomStringConvertible {
    public var description: String { "\(entity), \(location): \(reason)" }
}

extension FetchExpressionError: LocalizedError {
    public var errorDescription: String? { description }
}
