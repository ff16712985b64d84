import CSQLite
@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// One open SQLite database connection, with its statement cache and transactions.
///
/// The store layer owns connections and never shares one between queues: each
/// coordinator keeps its own, so SQLite's own mutexes are switched off
/// (`SQLITE_OPEN_NOMUTEX`) and every call is a plain function call.
///
/// ```swift
/// let connection = try Connection(path: storeURL.path)   // WAL, synchronous=NORMAL, BusyMode.default
/// try connection.inWriteTransaction {
///     let insert = try connection.cachedStatement("INSERT INTO ZTICKER (Z_PK, ZSYMBOL) VALUES (?, ?)")
///     try insert.bind(Int64(1), at: 1)
///     try insert.bind("AAPL", at: 2)
///     try insert.execute()
/// }
/// ```
///
/// Related SQLite documentation: <https://sqlite.org/c3ref/sqlite3.html>
///
/// ## Topics
///
/// ### Opening
/// - ``init(path:configuration:)``
/// - ``Configuration``
/// - ``applySettings(beforeJournalMode:)``
/// - ``hasMoved``
///
/// ### Running SQL
/// - ``execute(_:)``
/// - ``prepare(_:)``
/// - ``cachedStatement(_:)``
///
/// ### Transactions
/// - ``inWriteTransaction(_:)``
/// - ``inReadTransaction(_:)``
/// - ``isInTransaction``
package final class Connection {
    /// The path the connection was opened with (`":memory:"` for an in-memory database).
    package let path: String

    /// The settings the connection was opened with.
    package let configuration: Configuration

    // MARK: - Internal properties

    /// The SQLite connection, shared with this connection's statements.
    let handle: DatabaseHandle

    /// Prepared statements by SQL text. Protected by the owner's queue, like the connection.
    private var statementCache = ClockCache<String, Statement>(capacity: Connection.statementCacheLimit)

    /// Whether ``inWriteTransaction(_:)`` is running its body. Protected by the owner's queue.
    private var isInWriteTransactionBody = false

    /// Whether ``applySettings(beforeJournalMode:)`` has run. Protected by the owner's queue.
    private var settingsApplied = false

    /// The trace observer; retained here, handed to SQLite unretained, and
    /// unregistered in `deinit`. Protected by the owner's queue.
    var traceBox: TraceBox?

    var db: OpaquePointer { handle.db }

    // MARK: - Database Opening

    /// Opens (and by default creates) the database at `path`, then applies `configuration`.
    ///
    /// The file is checked to be an SQLite database here, so a wrong or corrupt
    /// file fails now with its path, not at the first fetch.
    ///
    /// - Parameters:
    ///   - path: A file path, or `":memory:"` for a private in-memory database.
    ///   - configuration: Journal mode, synchronous level, busy timeout and pragmas.
    /// - Throws: ``SQLiteError`` whose message names `path`:
    ///   ``SQLiteError/SQLITE_CANTOPEN`` (missing directory, no permission, or a
    ///   missing file with `createsIfMissing == false`), ``SQLiteError/SQLITE_NOTADB``
    ///   (not an SQLite file), ``SQLiteError/SQLITE_MISUSE`` (a refused pragma).
    package init(path: String, configuration: Configuration = .init()) throws {
        try configuration.validatePragmas()   // before the file is created or touched

        var flags = SQLITE_OPEN_NOMUTEX
        if configuration.isReadOnly {
            flags |= SQLITE_OPEN_READONLY
        } else {
            flags |= SQLITE_OPEN_READWRITE
            if configuration.createsIfMissing { flags |= SQLITE_OPEN_CREATE }
        }
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            var error = SQLiteError(db: opened, code: code, sql: nil)
            error.message += " at \(path)"
            sqlite3_close_v2(opened)   // SQLite allocates a handle even when opening fails
            throw error
        }
        let handle = DatabaseHandle(opened)   // closes the database if a step below throws
        self.path = path
        self.configuration = configuration
        self.handle = handle
        do {
            sqlite3_extended_result_codes(handle.db, 1)
            handle.setBusyMode(configuration.busyMode)
            // Reads the header: fails with SQLITE_NOTADB for a file that is not a database.
            _ = try retryingWhileBusy { try Self.pragma(handle, "PRAGMA schema_version") }
            if !configuration.defersSettings {
                try applySettings()
            } else if Self.hasFramesInLog(path) {
                // Closing the last connection would checkpoint the log into the main
                // file: a write, so it waits until the caller has looked. (With an
                // empty log the close only removes the -wal and -shm it created.)
                // The result is not checked: an SQLite without the option (before 3.28)
                // checkpoints on close, which changes the main file's bytes, not its data.
                _ = csqlite_set_no_checkpoint_on_close(handle.db, 1)
            }
        } catch var error as SQLiteError {
            error.message += " at \(path)"
            throw error
        }
    }

    /// Whether the database at `path` has a non-empty write-ahead log beside it.
    private static func hasFramesInLog(_ path: String) -> Bool {
        // No -wal, or none that can be looked at: there is no log a checkpoint could fold in.
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int
        return (size ?? 0) > 0
    }

    /// Applies the configuration's pragmas, journal mode and synchronous level,
    /// the settings that may write to the file; ``init(path:configuration:)``
    /// calls it unless ``Configuration/defersSettings`` is set. Later calls do nothing.
    ///
    /// - Parameter beforeJournalMode: Runs after the pragmas and before the
    ///   journal mode is set, for settings that must precede the first write of
    ///   a new file (switching to WAL writes the header).
    /// - Throws: ``SQLiteError`` for a refused pragma, or a journal mode SQLite would not take.
    package func applySettings(beforeJournalMode: () throws -> Void = {}) throws {
        guard !settingsApplied else { return }
        // Extra pragmas first, so ones that must precede the first write (page_size,
        // auto_vacuum) apply before switching to WAL writes the header.
        for (name, value) in configuration.pragmas.sorted(by: { $0.key < $1.key }) {
            _ = try Self.pragma(handle, "PRAGMA \(name) = \(value)")
        }
        try beforeJournalMode()
        let isInMemory = path == ":memory:" || path.isEmpty
        if !configuration.isReadOnly && !isInMemory {
            let requested = configuration.journalMode.rawValue
            let mode = try retryingWhileBusy { try Self.pragma(handle, "PRAGMA journal_mode = \(requested)") }
            guard mode?.lowercased() == requested else {
                throw SQLiteError(
                    resultCode: SQLiteError.SQLITE_ERROR,
                    message: "could not set journal mode \(requested) (SQLite kept \(mode ?? "none"))",
                    sql: "PRAGMA journal_mode = \(requested)")
            }
        }
        _ = try Self.pragma(handle, "PRAGMA synchronous = \(configuration.synchronous.rawValue)")
        _ = csqlite_set_no_checkpoint_on_close(handle.db, 0)
        settingsApplied = true
    }

    /// Runs `body` again while it fails with ``SQLiteError/SQLITE_BUSY`` or
    /// `SQLITE_PROTOCOL` and ``Configuration/busyMode`` says to wait: for the
    /// statements whose locks SQLite takes without asking the busy handler
    /// (entering WAL mode while another connection reads the file, as when
    /// several create one store; the first read of a WAL file while another
    /// process rebuilds its shared-memory index, which SQLite gives up on with
    /// `SQLITE_PROTOCOL` after a burst of its own tries).
    private func retryingWhileBusy<T>(_ body: () throws -> T) throws -> T {
        let clock = ContinuousClock()
        let start = clock.now
        var tries = 0
        while true {
            do {
                return try body()
            } catch let error as SQLiteError
                where error.resultCode == SQLiteError.SQLITE_BUSY || error.resultCode == SQLiteError.SQLITE_PROTOCOL {
                guard configuration.busyMode.waitsAgain(afterTries: tries, waited: clock.now - start) else { throw error }
                tries += 1
            }
        }
    }

    /// Runs a pragma to completion and returns the first column of its first row.
    private static func pragma(_ handle: DatabaseHandle, _ sql: String) throws -> String? {
        let statement = try Statement(handle: handle, sql: sql, persistent: false)
        var first: String?
        while try statement.step() {
            if first == nil { first = statement.string(at: 0) }
        }
        return first
    }

    deinit {
        if traceBox != nil { sqlite3_trace_v2(db, 0, nil, nil) }   // statements may outlive us
        statementCache.removeAll()   // finalize cached statements before the handle closes
    }

    /// Whether writes are refused: opened read-only, or SQLite fell back to
    /// read-only because the file or its directory is not writable.
    package var isReadOnly: Bool {
        sqlite3_db_readonly(db, "main") == 1
    }

    /// Whether the database file was deleted, renamed or replaced since the
    /// connection opened it (`SQLITE_FCNTL_HAS_MOVED`): writes would then go to
    /// an inode that no path leads to, and vanish with the process.
    ///
    /// One `stat` of the path; false for an in-memory database.
    ///
    /// Related SQLite documentation: <https://sqlite.org/c3ref/c_fcntl_begin_atomic_write.html#sqlitefcntlhasmoved>
    package var hasMoved: Bool {
        var moved: Int32 = 0
        let code = sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
        return code == SQLITE_OK && moved != 0
    }
}

// MARK: - Running SQL

extension Connection {
    /// Runs one or more `;`-separated statements to completion, ignoring rows.
    ///
    /// Use it for schema changes and one-off commands; for anything that runs
    /// per object, use ``cachedStatement(_:)`` and bind values instead. Never
    /// splice user values into `sql`.
    ///
    /// - Throws: ``SQLiteError`` carrying the statement that failed; statements
    ///   before it have run (wrap the call in a transaction for all-or-nothing).
    package func execute(_ sql: String) throws {
        var utf8 = sql
        try utf8.withUTF8 { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { text in
                guard var cursor = text.baseAddress else { return }
                let end = cursor + text.count
                while cursor < end {
                    var prepared: OpaquePointer?
                    var tail: UnsafePointer<CChar>?
                    let code = sqlite3_prepare_v2(db, cursor, Int32(clamping: end - cursor), &prepared, &tail)
                    guard code == SQLITE_OK else {
                        let error = SQLiteError(db: db, code: code, sql: sql)
                        sqlite3_finalize(prepared)
                        throw error
                    }
                    if let prepared {
                        defer { sqlite3_finalize(prepared) }
                        var stepCode = sqlite3_step(prepared)
                        while stepCode == SQLITE_ROW { stepCode = sqlite3_step(prepared) }
                        guard stepCode == SQLITE_DONE else {
                            throw SQLiteError(db: db, code: stepCode, sql: sqlite3_sql(prepared).map { String(cString: $0) } ?? sql)
                        }
                    }
                    guard let tail, tail > cursor else { return }   // only comments were left
                    cursor = tail
                }
            }
        }
    }

    /// Prepares one statement that is not cached; use it for SQL that runs once.
    ///
    /// - Throws: ``SQLiteError`` if the SQL does not compile or holds more than one statement.
    package func prepare(_ sql: String) throws -> Statement {
        try Statement(handle: handle, sql: sql, persistent: false)
    }

    /// Returns this connection's prepared statement for `sql`, preparing it on first use.
    ///
    /// The statement comes back reset, with every parameter NULL. Do not hold
    /// it across a call that may ask for the same SQL: that call resets it.
    ///
    /// - Complexity: One dictionary lookup, and no allocation, once the SQL has been seen.
    package func cachedStatement(_ sql: String) throws -> Statement {
        if let statement = statementCache.value(forKey: sql) {
            statement.reset()
            statement.clearBindings()
            return statement
        }
        let statement = try Statement(handle: handle, sql: sql, persistent: true)
        // SQL built per request (IN lists of varying length) must not grow the
        // cache without bound, nor evict the hot statements: the clock evicts one
        // not used since the hand last passed.
        statementCache.updateValue(statement, forKey: sql)
        return statement
    }

    /// The most statements kept prepared per connection.
    package static let statementCacheLimit = 256

    /// Resets every statement of the connection that is still stepping (a
    /// read stopped before its last row), ending the read transaction it
    /// holds open, so that the connection's next statement reads from the
    /// last commit rather than from that statement's snapshot.
    ///
    /// - Complexity: One pass over the connection's prepared statements.
    package func resetActiveStatements() {
        var statement = sqlite3_next_stmt(db, nil)
        while let current = statement {
            if sqlite3_stmt_busy(current) != 0 { sqlite3_reset(current) }
            statement = sqlite3_next_stmt(db, current)
        }
    }

    /// The rows changed by the most recent INSERT, UPDATE or DELETE.
    package var changes: Int {
        Int(sqlite3_changes64(db))
    }

    /// The rowid of the most recent successful INSERT on this connection.
    package var lastInsertedRowID: Int64 {
        sqlite3_last_insert_rowid(db)
    }

    /// Sets ``lastInsertedRowID`` to 0, so that after a statement that may or
    /// may not insert (an upsert) it tells which it did.
    package func resetLastInsertedRowID() {
        sqlite3_set_last_insert_rowid(db, 0)
    }
}

// MARK: - Transactions

extension Connection {
    /// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits, or rolls back
    /// everything and rethrows if `body` throws.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so a transaction never
    /// fails halfway with `SQLITE_BUSY_SNAPSHOT`. While another connection
    /// writes, the busy handler waits for the lock as ``Configuration/busyMode``
    /// says; after that, this throws ``SQLiteError/SQLITE_BUSY``
    /// (``SQLiteError/isBusy``), and the caller may retry. A failed `COMMIT` is
    /// rolled back and thrown too, so the connection never stays in a transaction.
    ///
    /// Not reentrant: calling it inside another transaction on this connection
    /// throws ``SQLiteError/SQLITE_MISUSE`` without touching the open one.
    ///
    /// Related SQLite documentation: <https://sqlite.org/lang_transaction.html>
    package func inWriteTransaction<T>(_ body: () throws -> T) throws -> T {
        guard !isInTransaction else {
            throw SQLiteError(
                resultCode: SQLiteError.SQLITE_MISUSE,
                message: isInWriteTransactionBody
                    ? "a write transaction is already open on this connection"
                    : "a transaction is already open on this connection; a write transaction cannot be nested in it")
        }
        isInWriteTransactionBody = true
        defer { isInWriteTransactionBody = false }
        return try inTransaction(beginning: "BEGIN IMMEDIATE", body)
    }

    /// Runs `body` in a `BEGIN DEFERRED` transaction, so that all its reads see
    /// one snapshot of the database, then ends it.
    ///
    /// Inside a transaction already open on this connection, `body` simply runs
    /// in that one. Keep read transactions short: an open one keeps its snapshot
    /// (and stops WAL checkpoints from completing) until it ends.
    package func inReadTransaction<T>(_ body: () throws -> T) throws -> T {
        if isInTransaction { return try body() }
        return try inTransaction(beginning: "BEGIN DEFERRED", body)
    }

    /// Begins a transaction, runs `body`, commits; rolls back and rethrows on any error.
    private func inTransaction<T>(beginning begin: String, _ body: () throws -> T) throws -> T {
        try cachedStatement(begin).execute()
        let result: T
        do {
            result = try body()
            try cachedStatement("COMMIT").execute()
        } catch {
            rollbackIgnoringErrors()
            throw error
        }
        return result
    }

    /// Whether a transaction is open (SQLite is not in autocommit mode).
    package var isInTransaction: Bool {
        sqlite3_get_autocommit(db) == 0
    }

    private func rollbackIgnoringErrors() {
        // SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR...).
        guard isInTransaction else { return }
        do {
            try cachedStatement("ROLLBACK").execute()
        } catch {
            // Nothing more to do: the caller gets the error that caused the rollback.
        }
    }
}

// MARK: - DatabaseHandle

/// Owns an open `sqlite3*` and closes it when the last owner lets go.
///
/// Both a ``Connection`` and each of its ``Statement``s hold the handle, so a
/// statement that outlives its connection object stays valid instead of using
/// a closed database. `sqlite3_close_v2` would defer the close anyway; this makes
/// the ordering explicit.
final class DatabaseHandle {
    let db: OpaquePointer

    /// The closure of a ``BusyMode/callback(_:)`` busy mode, handed to SQLite
    /// unretained: kept here, it lives exactly as long as the database.
    private var busyCallback: BusyCallbackBox?

    init(_ db: OpaquePointer) {
        self.db = db
    }

    /// Installs SQLite's busy handler for `mode`: the one place a ``BusyMode`` becomes SQLite calls.
    func setBusyMode(_ mode: BusyMode) {
        switch mode {
        case .immediateError:
            busyCallback = nil
            sqlite3_busy_timeout(db, 0)
        case .timeout(let seconds):
            busyCallback = nil
            sqlite3_busy_timeout(db, BusyMode.milliseconds(seconds))
        case .callback(let body):
            let box = BusyCallbackBox(body)
            busyCallback = box
            sqlite3_busy_handler(db, { context, tries in
                guard let context else { return 0 }
                let box = Unmanaged<BusyCallbackBox>.fromOpaque(context).takeUnretainedValue()
                return box.body(Int(tries)) ? 1 : 0
            }, Unmanaged.passUnretained(box).toOpaque())
        }
    }

    deinit {
        sqlite3_close_v2(db)
    }
}

// MARK: - Sendable

// A connection is used on one queue at a time by its owner (a coordinator); share the owner.
@available(*, unavailable) extension Connection: Sendable {}

@available(*, unavailable) extension DatabaseHandle: Sendable {}

/// Holds a busy callback for SQLite's C busy handler.
final class BusyCallbackBox {
    let body: @Sendable (Int) -> Bool
    init(_ body: @escaping @Sendable (Int) -> Bool) { self.body = body }
}
