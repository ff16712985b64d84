import Foundation
@_spi(DataStackInternal) import DataStackSupport

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
public struct SQLitePragmaError: CodedError, Sendable, Hashable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = SQLitePragmaError
        /// The code's name, as written in Swift (`"invalidName"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The name is not letters, digits and `_`, or starts with a digit.
        public static let invalidName = Code("invalidName")
        /// The value is not letters, digits, `_`, `.` and `-`.
        public static let invalidValue = Code("invalidValue")
        /// The pragma is one ``StoreOptions`` sets with a typed option
        /// (`journal_mode`, `synchronous`, `busy_timeout`); set that option instead.
        public static let setByStoreOptions = Code("setByStoreOptions")
    }

    /// The kind of failure.
    public var code: Code
    /// The pragma's name, as given.
    public var name: String
    /// The pragma's value, as it would have been written into the statement.
    public var value: String
    /// What is wrong, in words, for example `"a pragma's value is letters, digits, '_', '.' and '-' only"`.
    public var message: String

    public init(_ code: Code, name: String, value: String, message: String) {
        self.code = code
        self.name = name
        self.value = value
        self.message = message
    }

    /// `bad SQLite pragma 'PRAGMA <name> = <value>': <message>`.
    public var description: String {
        "bad SQLite pragma 'PRAGMA \(name) = \(value)': \(message)"
    }
}
