import Foundation

/// A pragma refused by ``SQLitePragma/custom(name:value:)``: its name, its
/// value, and what is wrong with them.
///
/// ```swift
/// do {
///     _ = try SQLitePragma.custom(name: "cache_size; DROP TABLE ZITEM", value: 1)
/// } catch {
///     print(error)   // bad SQLite pragma 'PRAGMA cache_size; DROP TABLE ZITEM = 1': a pragma's name is letters, …
/// }
/// ```
public struct SQLitePragmaError: Error, Sendable, Hashable {
    /// The pragma's name, as given.
    public var name: String
    /// The pragma's value, as it would have been written into the statement.
    public var value: String
    /// What is wrong, for example `"a pragma's value is letters, digits, '_', '.' and '-' only"`.
    public var reason: String

    public init(name: String, value: String, reason: String) {
        self.name = name
        self.value = value
        self.reason = reason
    }
}

extension SQLitePragmaError: CustomStringConvertible {
    public var description: String {
        "bad SQLite pragma 'PRAGMA \(name) = \(value)': \(reason)"
    }
}

extension SQLitePragmaError: LocalizedError {
    public var errorDescription: String? { description }
}
