import CLibPQ

/// An error from PostgreSQL or from talking to it.
///
/// The ``kind`` says what a caller can do about it (retry a serialization failure,
/// reconnect after a lost connection, report a duplicate); ``code`` is the server's
/// SQLSTATE for anything finer.
///
/// ```swift
/// do {
///     try connection.execute("INSERT INTO item (name) VALUES ($1)", [.text("a")])
/// } catch let error as PostgreSQLError where error.kind == .uniqueViolation {
///     // "a" already exists
/// }
/// // or: catch PostgreSQLError.Kind.uniqueViolation { … }
/// ```
///
/// The description reads like GRDB's:
/// `PostgreSQL error 23505: duplicate key value violates unique constraint "item_name_key" - while executing `INSERT …``.
/// It never contains parameter values, and it leaves out ``detail`` too, because the
/// server puts row data there ("Key (name)=(a) already exists."): values are user data.
///
/// Related PostgreSQL documentation: <https://www.postgresql.org/docs/current/errcodes-appendix.html>
///
/// ## Topics
///
/// - ``kind``
/// - ``code``
/// - ``message``
/// - ``detail``
/// - ``sql``
public struct PostgreSQLError: Error, Sendable {
    /// What kind of failure this is, derived from the SQLSTATE and the connection state.
    ///
    /// A struct with static members rather than an enum, so kinds can be added without
    /// breaking a caller's exhaustive `switch` (STYLE.md rule 16).
    public struct Kind: Hashable, Sendable {
        let raw: UInt8

        /// The connection could not be opened (no server, wrong socket, refused login).
        public static let connectionFailed = Kind(raw: 1)
        /// The connection broke while in use: the server went away, closed the session
        /// (SQLSTATE class 08, 57P01 `admin_shutdown`, 57P02 `crash_shutdown`,
        /// 57P03 `cannot_connect_now`), or the connection was closed by ``PostgreSQLConnection/close()``.
        /// ``PostgreSQLConnection/reconnect()`` may bring it back.
        public static let connectionLost = Kind(raw: 2)
        /// A unique constraint or unique index refused the row (23505).
        public static let uniqueViolation = Kind(raw: 3)
        /// The transaction lost to a concurrent one (40001 `serialization_failure`,
        /// 40P01 `deadlock_detected`); running it again may succeed.
        public static let serializationFailure = Kind(raw: 4)
        /// The SQL does not parse or names something that does not exist (class 42).
        public static let syntaxOrSchema = Kind(raw: 5)
        /// Anything else; see ``PostgreSQLError/code``.
        public static let other = Kind(raw: 0)

        /// Matches an error of this kind, so `catch PostgreSQLError.Kind.uniqueViolation { … }` works.
        public static func ~= (kind: Kind, error: any Error) -> Bool {
            (error as? PostgreSQLError)?.kind == kind
        }
    }

    /// What kind of failure this is.
    public var kind: Kind
    /// The five-character SQLSTATE (for example `"23505"`), or nil when the failure
    /// did not come from the server (connection problems, invalid input caught before sending).
    public var code: String?
    /// The primary message, for example `duplicate key value violates unique constraint "item_name_key"`.
    public var message: String
    /// The server's detail message. It may contain row values, so it is not part of ``description``.
    public var detail: String?
    /// The statement that failed, if any.
    public var sql: String?

    /// Creates an error. The kind is derived from `code` unless given.
    public init(kind: Kind? = nil, code: String? = nil, message: String, detail: String? = nil, sql: String? = nil) {
        self.kind = kind ?? Self.kind(forSQLState: code)
        self.code = code
        self.message = message
        self.detail = detail
        self.sql = sql
    }

    /// The kind a SQLSTATE maps to. Without a SQLSTATE the kind is ``Kind/other``:
    /// the caller knows whether it was connecting or executing and passes a kind itself.
    static func kind(forSQLState code: String?) -> Kind {
        guard let code else { return .other }
        switch code {
        case "23505": return .uniqueViolation
        case "40001", "40P01": return .serializationFailure
        case "57P01", "57P02", "57P03": return .connectionLost
        default: break
        }
        if code.hasPrefix("08") { return .connectionLost }
        if code.hasPrefix("42") { return .syntaxOrSchema }
        return .other
    }
}

// MARK: - Reading libpq errors

extension PostgreSQLError {
    // Field codes from postgres_ext.h (`#define PG_DIAG_SQLSTATE 'C'` …): character
    // literal macros are not imported into Swift.
    private static let sqlStateField = Int32(UInt8(ascii: "C"))
    private static let primaryMessageField = Int32(UInt8(ascii: "M"))
    private static let detailField = Int32(UInt8(ascii: "D"))

    /// The error a failed PGresult describes.
    ///
    /// When the result carries no SQLSTATE the failure happened on the client side of
    /// the socket (libpq's "server closed the connection unexpectedly"); if the
    /// connection is then bad, the kind is ``Kind/connectionLost``.
    init(result: OpaquePointer, connection: OpaquePointer?, sql: String?) {
        let code = PQresultErrorField(result, Self.sqlStateField).map { String(cString: $0) }
        var message = PQresultErrorField(result, Self.primaryMessageField).map { String(cString: $0) }
        if message == nil {
            message = String(cString: PQresultErrorMessage(result))
        }
        let detail = PQresultErrorField(result, Self.detailField).map { String(cString: $0) }
        var kind: Kind? = nil
        if code == nil, let connection, Self.isBroken(connection) {
            kind = .connectionLost
        }
        self.init(kind: kind, code: code, message: Self.trimmed(message ?? ""), detail: detail, sql: sql)
    }

    /// The error libpq reports for the connection itself (PQerrorMessage).
    init(connection: OpaquePointer?, kind: Kind? = nil, sql: String? = nil) {
        let text = connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? ""
        var resolvedKind = kind
        if resolvedKind == nil, let connection, Self.isBroken(connection) {
            resolvedKind = .connectionLost
        }
        let message = Self.trimmed(text)
        self.init(
            kind: resolvedKind ?? .other,
            message: message.isEmpty ? "unknown libpq error" : message,
            sql: sql)
    }

    /// Whether the connection is gone, reading first so the answer is current.
    ///
    /// libpq can report "server closed the connection unexpectedly" while its status
    /// still says CONNECTION_OK; it notices the end of the socket on the next read.
    /// PQconsumeInput reads without blocking; its result is the status checked next.
    static func isBroken(_ connection: OpaquePointer) -> Bool {
        if PQstatus(connection) == CONNECTION_OK {
            _ = PQconsumeInput(connection)
        }
        return PQstatus(connection) == CONNECTION_BAD
    }

    /// libpq messages end with a newline; some are several lines ("…failed: No such file
    /// or directory\n\tIs the server running locally…"). Keep the lines, drop the end.
    static func trimmed(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return String(text)
    }
}

// MARK: - CustomStringConvertible

extension PostgreSQLError: CustomStringConvertible {
    /// `PostgreSQL error 23505: <message> - while executing `<sql>``; no parameter values, no detail.
    public var description: String {
        let head = code.map { "PostgreSQL error \($0): " } ?? "PostgreSQL error: "
        return head + message + (sql.map { " - while executing `\($0)`" } ?? "")
    }
}
