import Foundation
@_spi(DataStackInternal) import DataStackSupport

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
public struct SearchQueryError: CodedError, Sendable, Hashable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = SearchQueryError
        /// The code's name, as written in Swift (`"syntaxError"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The query does not parse: an unclosed group or phrase, an operator
        /// without the words it joins.
        public static let syntaxError = Code("syntaxError")
        /// The query parses but has no word to search for (only operators,
        /// punctuation or nothing at all).
        public static let noWords = Code("noWords")
    }

    /// The kind of failure.
    public var code: Code
    /// The query's text, as given to ``SearchQuery/init(_:)``.
    public var query: String
    /// The character position of the problem in ``query``.
    public var offset: Int
    /// What is wrong, in words, for example `"expected ')' closing the group opened at offset 6"`.
    public var message: String

    public init(_ code: Code, query: String, offset: Int, message: String) {
        self.code = code
        self.query = query
        self.offset = offset
        self.message = message
    }

    /// `bad search query at offset <offset> in '<query>': <message>`.
    public var description: String {
        "bad search query at offset \(offset) in '\(query)': \(message)"
    }
}
