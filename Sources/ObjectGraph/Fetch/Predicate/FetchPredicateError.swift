import Foundation

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
/// A syntax error has an ``expected`` text. Other errors (an unknown key, a
/// missing or unsupported argument) have a ``reason`` instead. ``offset``
/// counts characters from the start of ``format``; it is -1 when the problem
/// has no single place in the text (a key given with `%K`, for example).
public struct FetchPredicateError: Error, Sendable, Equatable {
    /// The predicate's format string (or, for a predicate built in code, its description).
    public var format: String
    /// The character position of the problem in ``format``, or -1 if there is none.
    public var offset: Int
    /// What the parser expected at ``offset``; empty when ``reason`` says what went wrong.
    public var expected: String
    /// What is wrong, for errors that are not a syntax error; nil for syntax errors.
    public var reason: String?

    /// A syntax error: `expected` names what should have come at `offset`.
    public init(format: String, offset: Int, expected: String) {
        self.format = format
        self.offset = offset
        self.expected = expected
        self.reason = nil
    }

    /// Any other error: `reason` says what is wrong (`"entity Ticker has no property 'prize'"`).
    public init(format: String, offset: Int = -1, reason: String) {
        self.format = format
        self.offset = offset
        self.expected = ""
        self.reason = reason
    }
}

extension FetchPredicateError: CustomStringConvertible {
    public var description: String {
        let place = offset >= 0 ? "bad predicate at offset \(offset) in '\(format)'" : "bad predicate '\(format)'"
        if let reason { return place + ": " + reason }
        return place + ": expected " + expected
    }
}

extension FetchPredicateError: LocalizedError {
    public var errorDescription: String? { description }
}

/// An error without a format yet; ``FetchPredicate`` adds the format and the
/// offset of the key it names before throwing it.
struct PredicateProblem: Error {
    var reason: String
    /// A key (or `$variable`) to point at in the format, when there is one.
    var key: String?

    init(_ reason: String, key: String? = nil) {
        self.reason = reason
        self.key = key
    }

    /// The public error, pointing at the first whole-word occurrence of `key` in `format`.
    func error(format: String) -> FetchPredicateError {
        FetchPredicateError(format: format, offset: key.flatMap { Self.offset(of: $0, in: format) } ?? -1, reason: reason)
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
