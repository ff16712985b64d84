import CSQLite

/// An error reported by SQLite, with the statement that caused it.
///
/// Every failure in the SQLite layer surfaces as this one type, so the store can
/// decide what to do from the result code alone (retry on ``isBusy``, report a
/// uniqueness conflict on ``SQLITE_CONSTRAINT``) and a person reading a log can see
/// what failed and where:
///
/// ```swift
/// do {
///     try connection.execute("INSERT INTO ZTICKER (Z_PK) VALUES (1)")
/// } catch let error as SQLiteError where error.resultCode == SQLiteError.SQLITE_CONSTRAINT {
///     print(error)
///     // SQLite error 19 (extended 1555): UNIQUE constraint failed: ZTICKER.Z_PK
///     //  - while executing `INSERT INTO ZTICKER (Z_PK) VALUES (1)`
/// }
/// ```
///
/// Bound values are user data, so they never appear in ``description``: the SQL
/// is kept with its `?` placeholders.
///
/// Related SQLite documentation: <https://sqlite.org/rescode.html>
///
/// ## Topics
///
/// ### Inspecting the error
/// - ``resultCode``
/// - ``extendedResultCode``
/// - ``message``
/// - ``sql``
/// - ``isBusy``
package struct SQLiteError: Error, Sendable {
    /// The primary result code, such as ``SQLITE_CONSTRAINT`` (the low byte of the
    /// extended code).
    package var resultCode: Int32

    /// The extended result code, such as `2067` for a UNIQUE constraint; equal to
    /// ``resultCode`` when SQLite gives no more detail.
    package var extendedResultCode: Int32

    /// SQLite's explanation, sometimes with context added by this layer (the
    /// database path when opening fails).
    package var message: String

    /// The SQL being run when the error happened, with placeholders, not values.
    package var sql: String?

    /// Creates an error from its parts.
    ///
    /// - Parameters:
    ///   - resultCode: The primary code; when `extendedResultCode` is given, pass
    ///     its low byte.
    ///   - extendedResultCode: The extended code; `nil` means the same as
    ///     `resultCode`.
    ///   - message: What failed, for a person.
    ///   - sql: The statement that failed, if any.
    package init(resultCode: Int32, extendedResultCode: Int32? = nil, message: String, sql: String? = nil) {
        self.resultCode = resultCode
        self.extendedResultCode = extendedResultCode ?? resultCode
        self.message = message
        self.sql = sql
    }

    /// Builds the error SQLite just reported on `db` for `code`.
    ///
    /// Reads `sqlite3_errmsg` immediately, before any other call on the
    /// connection can replace it.
    init(db: OpaquePointer?, code: Int32, sql: String?) {
        let message: String
        if let db, let text = sqlite3_errmsg(db) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(code) {
            message = String(cString: text)
        } else {
            message = "unknown error"
        }
        // APIs that return only the primary code (sqlite3_open_v2, bind) still
        // leave the extended one on the connection.
        var extended = code
        if let db, extended == code & 0xFF {
            let last = sqlite3_extended_errcode(db)
            if last & 0xFF == code { extended = last }
        }
        self.init(resultCode: code & 0xFF, extendedResultCode: extended, message: message, sql: sql)
    }

    /// `true` when the database was locked by another connection and the busy
    /// timeout ran out (`SQLITE_BUSY`), or a table was locked inside this process
    /// (`SQLITE_LOCKED`). Such an operation may succeed if retried later.
    ///
    /// This includes ``SQLITE_BUSY_SNAPSHOT``, which the busy handler never
    /// waits for: the transaction must be rolled back and started again.
    package var isBusy: Bool {
        resultCode == Self.SQLITE_BUSY || resultCode == Self.SQLITE_LOCKED
    }
}

// MARK: - Result Codes

extension SQLiteError {
    // Values are fixed by SQLite's file-format and API stability guarantees, so
    // they are spelled out here rather than leaking CSQLite's macros to callers.

    /// Generic error, such as an SQL syntax error (`1`).
    package static let SQLITE_ERROR: Int32 = 1
    /// The database file is locked by another connection (`5`).
    package static let SQLITE_BUSY: Int32 = 5
    /// A table is locked by another statement on a shared cache (`6`).
    package static let SQLITE_LOCKED: Int32 = 6
    /// An attempt to write to a read-only database or connection (`8`).
    package static let SQLITE_READONLY: Int32 = 8
    /// A WAL lock SQLite could not take after its own quick retries, while
    /// another connection rebuilt the shared-memory index; transient (`15`).
    package static let SQLITE_PROTOCOL: Int32 = 15
    /// Disk I/O error (`10`).
    package static let SQLITE_IOERR: Int32 = 10
    /// The database file is malformed (`11`).
    package static let SQLITE_CORRUPT: Int32 = 11
    /// The disk is full (`13`).
    package static let SQLITE_FULL: Int32 = 13
    /// The database file could not be opened (`14`).
    package static let SQLITE_CANTOPEN: Int32 = 14
    /// A string or blob is too big (`18`).
    package static let SQLITE_TOOBIG: Int32 = 18
    /// A constraint (UNIQUE, NOT NULL, CHECK, FOREIGN KEY) was violated (`19`).
    package static let SQLITE_CONSTRAINT: Int32 = 19
    /// The API was used incorrectly; this layer also uses it for refused input (`21`).
    package static let SQLITE_MISUSE: Int32 = 21
    /// A bind parameter index is out of range (`25`).
    package static let SQLITE_RANGE: Int32 = 25
    /// The file is not an SQLite database (`26`).
    package static let SQLITE_NOTADB: Int32 = 26

    /// Extended code: a UNIQUE constraint failed (`2067`).
    package static let SQLITE_CONSTRAINT_UNIQUE: Int32 = 2067
    /// Extended code: a PRIMARY KEY constraint failed (`1555`).
    package static let SQLITE_CONSTRAINT_PRIMARYKEY: Int32 = 1555
    /// Extended code: a NOT NULL constraint failed (`1299`).
    package static let SQLITE_CONSTRAINT_NOTNULL: Int32 = 1299
    /// Extended code: a deferred (WAL) read transaction could not become a write
    /// transaction because another connection committed since its snapshot (`517`).
    ///
    /// The busy handler is not called for it; roll back and retry the whole
    /// transaction. Related SQLite documentation: <https://sqlite.org/rescode.html#busy_snapshot>
    package static let SQLITE_BUSY_SNAPSHOT: Int32 = 517
}

// MARK: - CustomStringConvertible

extension SQLiteError: CustomStringConvertible {
    /// "SQLite error 19 (extended 2067): UNIQUE constraint failed: t.a - while
    /// executing \`INSERT INTO t (a) VALUES (?)\`". Bound values never appear.
    package var description: String {
        let code = extendedResultCode == resultCode
            ? "\(resultCode)"
            : "\(resultCode) (extended \(extendedResultCode))"
        return "SQLite error \(code): \(message)" + (sql.map { " - while executing `\($0)`" } ?? "")
    }
}
