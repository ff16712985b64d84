import Foundation

/// A search query that could not be parsed: the query, where in it, and what was wrong.
///
/// ```swift
/// do {
///     _ = try SearchQuery("apple (pie")
/// } catch {
///     print(error)   // bad search query at offset 10 in 'apple (pie': expected ')' closing the group opened at offset 6
/// }
/// ```
///
/// ``offset`` counts characters (`Character`s, as `query.count` does) from the
/// start of ``query``.
public struct SearchQueryError: Error, Sendable, Hashable {
    /// The query's text, as given to ``SearchQuery/init(_:)``.
    public var query: String
    /// The character position of the problem in ``query``.
    public var offset: Int
    /// What is wrong, for example `"expected ')' closing the group opened at offset 6"`.
    public var reason: String

    public init(query: String, offset: Int, reason: String) {
        self.query = query
        self.offset = offset
        self.reason = reason
    }
}

extension SearchQueryError: CustomStringConvertible {
    public var description: String {
        "bad search query at offset \(offset) in '\(query)': \(reason)"
    }
}

extension SearchQueryError: LocalizedError {
    public var errorDescription: String? { description }
}
