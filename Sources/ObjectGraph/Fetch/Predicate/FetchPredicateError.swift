import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A predicate that could not be parsed, built, checked against an entity, or
/// evaluated: the format, where in it, and what was wrong.
///
/// ```swift
/// do {
///     _ = try FetchPredicate(format: "price > AND volume < 5")
/// } catch let error as FetchPredicateError {
///     print(error)   // bad predicate at offset 8 in 'price > AND volume < 5': expected a value
/// }
/// ```
///
/// A syntax error (``Code-swift.struct/syntaxError``) has an ``expected`` text,
/// and its ``message`` is "expected …". Other errors (an unknown key, a missing
/// or unsupported argument) have only a ``message``. ``offset`` counts
/// characters from the start of ``format``; it is -1 when the problem has no
/// single place in the text (a key given with `%K`, for example).
public struct FetchPredicateError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = FetchPredicateError
        /// The code's name, as written in Swift (`"syntaxError"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The format does not parse: ``FetchPredicateError/expected`` names what
        /// should have come at ``FetchPredicateError/offset``.
        public static let syntaxError = Code("syntaxError")
        /// The predicate parses but cannot be built, checked against the entity or
        /// evaluated: an unknown key, a missing or unsupported argument, a regular
        /// expression that does not compile, an operator a store cannot run.
        public static let invalidPredicate = Code("invalidPredicate")
    }

    /// The kind of failure.
    public var code: Code
    /// The predicate's format string (or, for a predicate built in code, its description).
    public var format: String
    /// The character position of the problem in ``format``, or -1 if there is none.
    public var offset: Int
    /// What the parser expected at ``offset``; empty unless the code is ``Code-swift.struct/syntaxError``.
    public var expected: String
    /// What is wrong, in words (`"entity Ticker has no property 'prize'"`, `"expected a value"`).
    public var message: String

    /// A syntax error: `expected` names what should have come at `offset`.
    public init(format: String, offset: Int, expected: String) {
        self.code = .syntaxError
        self.format = format
        self.offset = offset
        self.expected = expected
        self.message = "expected " + expected
    }

    /// Any other error: `message` says what is wrong (`"entity Ticker has no property 'prize'"`).
    public init(_ code: Code = .invalidPredicate, format: String, offset: Int = -1, message: String) {
        self.code = code
        self.format = format
        self.offset = offset
        self.expected = ""
        self.message = message
    }

    /// `bad predicate at offset <offset> in '<format>': <message>`.
    public var description: String {
        (offset >= 0 ? "bad predicate at offset \(offset) in '\(format)'" : "bad predicate '\(format)'") + ": " + message
    }
}

/// An error without a format yet; ``FetchPredicate`` adds the format and the
/// offset of the key it names before throwing it.
package struct PredicateProblem: Error {
    package var reason: String
    /// A key (or `$variable`) to point at in the format, when there is one.
    var key: String?

    package init(_ reason: String, key: String? = nil) {
        self.reason = reason
        self.key = key
    }

    /// The public error, pointing at the first whole-word occurrence of `key` in `format`.
    package func error(format: String) -> FetchPredicateError {
        FetchPredicateError(format: format, offset: key.flatMap { Self.offset(of: $0, in: format) } ?? -1, message: reason)
    }

    private static func offset(of key: String, in format: String) -> Int? {
        guard !key.isEmpty else { return nil }
        let characters = Array(format)
        let needle = Array(key)
        guard needle.count <= characters.count else { return nil }
        func isWordCharacter(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == "_" }
        for start in 0...(characters.count - needle.count) where characters[start..<(start + needle.count)].elementsEqual(needle) {
            let before = start == 0 ? nil : characters[start - 1]
            let after = start + needle.count < characters.count ? characters[start + needle.count] : nil
            if before.map(isWordCharacter) != true, after.map(isWordCharacter) != true { return start }
        }
        return nil
    }
}
