extension Connection {
    /// How a ``Connection`` opens its database: typed options with documented defaults.
    ///
    /// The defaults are those the spec asks of a store: WAL, so readers never
    /// block the writer; `synchronous=NORMAL`, which in WAL mode never corrupts
    /// and loses at most the last commits on power loss; and ``BusyMode/default``,
    /// so two coordinators writing at once wait rather than fail.
    ///
    /// ```swift
    /// var configuration = Connection.Configuration()
    /// configuration.busyMode = .timeout(0.1)
    /// configuration.pragmas["foreign_keys"] = "ON"
    /// let connection = try Connection(path: path, configuration: configuration)
    /// ```
    package struct Configuration: Sendable {
        /// Whether to open the database read-only (`SQLITE_OPEN_READONLY`). Writes
        /// then throw ``SQLiteError/SQLITE_READONLY``. The default is `false`.
        package var isReadOnly = false

        /// Whether to create the file when it does not exist (`SQLITE_OPEN_CREATE`).
        /// Ignored when ``isReadOnly`` is set. The default is `true`.
        package var createsIfMissing = true

        /// The journal mode set on a writable file database (not on `":memory:"`,
        /// and not on a read-only connection, which cannot change it).
        /// The default is ``JournalMode/wal``.
        ///
        /// Related SQLite documentation: <https://sqlite.org/wal.html>
        package var journalMode: JournalMode = .wal

        /// How often SQLite waits for the disk. The default is ``Synchronous/normal``.
        ///
        /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_synchronous>
        package var synchronous: Synchronous = .normal

        /// How a statement waits for another connection's lock before it throws
        /// ``SQLiteError/SQLITE_BUSY``. The busy handler covers `BEGIN IMMEDIATE`;
        /// it never covers `SQLITE_BUSY_SNAPSHOT`. The default is ``BusyMode/default``.
        ///
        /// Related SQLite documentation: <https://sqlite.org/c3ref/busy_handler.html>
        package var busyMode: BusyMode = .default

        /// Extra pragmas, run as `PRAGMA name = value` in name order, after the
        /// file is checked and before the journal mode is set (so `page_size` and
        /// `auto_vacuum` apply to a new file). The default is none.
        ///
        /// Names must match `[A-Za-z_][A-Za-z0-9_]*` and values `[A-Za-z0-9_.-]+`;
        /// anything else throws ``SQLiteError/SQLITE_MISUSE`` before the file is
        /// opened, because these are spliced into SQL and cannot be bound.
        package var pragmas: [String: String] = [:]

        /// Whether ``Connection/init(path:configuration:)`` leaves the pragmas,
        /// journal mode and synchronous level for a later
        /// ``Connection/applySettings(beforeJournalMode:)``, so that the caller can
        /// look at a file before anything writes to it — closing it before then
        /// does not checkpoint the log either. The default is `false`.
        package var defersSettings = false

        /// Creates the default configuration.
        package init() {}
    }

    /// A journal mode (`PRAGMA journal_mode`): ``SQLiteJournalMode``.
    package typealias JournalMode = SQLiteJournalMode
    /// A synchronous level (`PRAGMA synchronous`): ``SQLiteSynchronous``.
    package typealias Synchronous = SQLiteSynchronous
}

// MARK: - Internal helpers

extension Connection.Configuration {
    /// Throws for any pragma name or value that is not a plain word, because
    /// both are written into the SQL text. A store's pragmas were checked when
    /// they were made (``SQLitePragma``); this guards the layer's other callers.
    func validatePragmas() throws {
        for (name, value) in pragmas {
            guard SQLitePragma.isName(name) else {
                throw SQLiteError(
                    resultCode: SQLiteError.SQLITE_MISUSE,
                    message: "invalid pragma name \"\(name)\"; expected letters, digits and underscores")
            }
            guard SQLitePragma.isValue(value) else {
                throw SQLiteError(
                    resultCode: SQLiteError.SQLITE_MISUSE,
                    message: "invalid value for pragma \(name); expected letters, digits, '_', '.' and '-'")
            }
        }
    }
}
