@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Testing

/// Tests for `Sources/DataStackSQLite` (the driver): opening, statements, errors, transactions.
///
/// Each test gets its own temporary directory, removed when it ends.
@Suite struct SQLiteLayerTests {
    // MARK: - Support

    /// Runs `body` with a fresh directory, then deletes it.
    private func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("SQLiteLayerTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    /// The first column of the first row of `sql`, as text.
    private func scalarText(_ connection: Connection, _ sql: String) throws -> String? {
        let statement = try connection.prepare(sql)
        guard try statement.step() else { return nil }
        return statement.string(at: 0)
    }

    private func scalarInt(_ connection: Connection, _ sql: String) throws -> Int64? {
        let statement = try connection.prepare(sql)
        guard try statement.step() else { return nil }
        return statement.int64(at: 0)
    }

    /// Runs `body`, which must throw an `SQLiteError`, and returns that error.
    private func sqliteError(_ body: () throws -> Void) throws -> SQLiteError {
        let error = #expect(throws: SQLiteError.self) { try body() }
        return try #require(error)
    }

    // MARK: - Opening

    @Test func openingCreatesWALDatabaseWithNormalSynchronous() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let connection = try Connection(path: path)
            #expect(FileManager.default.fileExists(atPath: path))
            #expect(try scalarText(connection, "PRAGMA journal_mode") == "wal")
            #expect(try scalarInt(connection, "PRAGMA synchronous") == 1)
            #expect(try scalarInt(connection, "PRAGMA busy_timeout") == 5000)
            #expect(connection.path == path)
            #expect(!connection.isReadOnly)
            #expect(!connection.isInTransaction)
        }
    }

    @Test func inMemoryDatabaseOpens() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
        #expect(try scalarInt(connection, "SELECT count(*) FROM t") == 1)
    }

    @Test func fileThatIsNotSQLiteThrowsNotADatabaseWithPath() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("notes.sqlite").path
            let text = String(repeating: "This is plain text, not a database.\n", count: 114)
            try Data(text.utf8.prefix(4096)).write(to: URL(fileURLWithPath: path))

            let error = try sqliteError { _ = try Connection(path: path) }
            #expect(error.resultCode == SQLiteError.SQLITE_NOTADB)
            #expect(error.description.contains(path))
            // The file was left as it was.
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 4096)
        }
    }

    @Test func missingDirectoryThrowsCantOpenWithPath() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("missing/deeper/store.sqlite").path
            let error = try sqliteError { _ = try Connection(path: path) }
            #expect(error.resultCode == SQLiteError.SQLITE_CANTOPEN)
            #expect(error.description.contains("unable to open database file at \(path)"))
        }
    }

    @Test func pathThroughARegularFileThrowsCantOpenWithPath() throws {
        // Refused even for root, unlike a directory without write permission.
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("plain-file")
            try Data("x".utf8).write(to: file)
            let path = file.appendingPathComponent("store.sqlite").path
            let error = try sqliteError { _ = try Connection(path: path) }
            #expect(error.resultCode == SQLiteError.SQLITE_CANTOPEN)
            #expect(error.description.contains(path))
        }
    }

    @Test(.enabled(if: getuid() != 0, "root can write anywhere"))
    func unwritableDirectoryThrowsWithPath() throws {
        try withTemporaryDirectory { directory in
            let locked = directory.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: false)
            try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: locked.path)
            defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: locked.path) }
            let path = locked.appendingPathComponent("store.sqlite").path
            let error = try sqliteError { _ = try Connection(path: path) }
            #expect(error.resultCode == SQLiteError.SQLITE_CANTOPEN)
            #expect(error.description.contains(path))
        }
    }

    @Test func missingFileIsNotCreatedWhenCreationIsOff() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("absent.sqlite").path
            var configuration = Connection.Configuration()
            configuration.createsIfMissing = false
            let error = try sqliteError { _ = try Connection(path: path, configuration: configuration) }
            #expect(error.resultCode == SQLiteError.SQLITE_CANTOPEN)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func readOnlyConnectionRefusesWrites() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            do {
                let writer = try Connection(path: path)
                try writer.execute("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (42)")
            }
            var configuration = Connection.Configuration()
            configuration.isReadOnly = true
            let reader = try Connection(path: path, configuration: configuration)
            #expect(reader.isReadOnly)
            #expect(try scalarInt(reader, "SELECT a FROM t") == 42)
            let error = try sqliteError { try reader.execute("INSERT INTO t VALUES (1)") }
            #expect(error.resultCode == SQLiteError.SQLITE_READONLY)
            #expect(error.sql == "INSERT INTO t VALUES (1)")
        }
    }

    @Test(arguments: [
        ("foreign keys", "ON"),          // space in name
        ("1cache", "10"),                // starts with a digit
        ("cache_size", "10; DROP TABLE t"),
        ("cache_size", ""),
        ("cache_size", "'x'"),
    ])
    func unsafePragmaIsRefusedBeforeOpening(name: String, value: String) throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            var configuration = Connection.Configuration()
            configuration.pragmas[name] = value
            let error = try sqliteError { _ = try Connection(path: path, configuration: configuration) }
            #expect(error.resultCode == SQLiteError.SQLITE_MISUSE)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func extraPragmasAndTypedSettingsApply() throws {
        try withTemporaryDirectory { directory in
            var configuration = Connection.Configuration()
            configuration.pragmas = ["cache_size": "-4000", "foreign_keys": "ON"]
            configuration.synchronous = .full
            configuration.journalMode = .delete
            configuration.busyMode = .timeout(0.25)
            let connection = try Connection(path: directory.appendingPathComponent("s.sqlite").path, configuration: configuration)
            #expect(try scalarInt(connection, "PRAGMA cache_size") == -4000)
            #expect(try scalarInt(connection, "PRAGMA foreign_keys") == 1)
            #expect(try scalarInt(connection, "PRAGMA synchronous") == 2)
            #expect(try scalarText(connection, "PRAGMA journal_mode") == "delete")
            #expect(try scalarInt(connection, "PRAGMA busy_timeout") == 250)
        }
    }

    // MARK: - Statements

    @Test func typedValuesRoundTrip() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, i, d, s, b)")
        let insert = try connection.prepare("INSERT INTO t (id, i, d, s, b) VALUES (?, ?, ?, ?, ?)")
        #expect(insert.parameterCount == 5)
        let strings = ["", "plain", "Zürich 東京 🚀", "nul\u{0}inside"]
        let rows: [(Int64, Double, String?, Data?)] = [
            (Int64.min, -0.5, strings[0], Data()),
            (Int64.max, .greatestFiniteMagnitude, strings[1], nil),
            (0, .pi, strings[2], Data([0, 1, 2, 255])),
            (-1, -1e-300, strings[3], Data(repeating: 7, count: 10_000)),
            (7, 0, nil, nil),
        ]
        for (offset, row) in rows.enumerated() {
            try insert.bind(Int64(offset), at: 1)
            try insert.bind(row.0, at: 2)
            try insert.bind(row.1, at: 3)
            if let text = row.2 { try insert.bind(text, at: 4) } else { try insert.bindNull(at: 4) }
            if let data = row.3 { try insert.bind(data, at: 5) } else { try insert.bindNull(at: 5) }
            try insert.execute()
            #expect(connection.changes == 1)
            #expect(connection.lastInsertedRowID == Int64(offset))
        }

        let select = try connection.prepare("SELECT i, d, s, b FROM t ORDER BY id")
        #expect(select.columnCount == 4)
        #expect(select.columnName(at: 2) == "s")
        for row in rows {
            #expect(try select.step())
            #expect(select.columnType(at: 0) == .integer)
            #expect(select.int64(at: 0) == row.0)
            #expect(select.columnType(at: 1) == .double)
            #expect(select.double(at: 1) == row.1)
            #expect(select.string(at: 2) == row.2)
            #expect(select.isNull(at: 2) == (row.2 == nil))
            #expect(select.data(at: 3) == row.3)
            #expect(select.columnType(at: 3) == (row.3 == nil ? .null : .blob))
        }
        #expect(try !select.step())
    }

    @Test func emptyBlobAndEmptyTextAreNotNull() throws {
        let connection = try Connection(path: ":memory:")
        let statement = try connection.prepare("SELECT ?1, ?2, ?3, typeof(?1), typeof(?2), typeof(?3), length(?1)")
        try statement.bind([UInt8](), at: 1)
        try statement.bind("", at: 2)
        try statement.bindNull(at: 3)
        #expect(try statement.step())
        #expect(statement.data(at: 0) == Data())
        #expect(statement.string(at: 1) == "")
        #expect(statement.data(at: 2) == nil)
        #expect(statement.string(at: 2) == nil)
        #expect(statement.string(at: 3) == "blob")
        #expect(statement.string(at: 4) == "text")
        #expect(statement.string(at: 5) == "null")
        #expect(statement.int64(at: 6) == 0)
    }

    @Test func textBoundForExecutionIsWrittenAsGivenAndUnboundAfterTheRow() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (n INTEGER, a TEXT, b TEXT, c TEXT)")
        let insert = try connection.prepare("INSERT INTO t (n, a, b, c) VALUES (?, ?, ?, ?)")
        // Short (inline) strings, empty text, non-ASCII, and rows whose text
        // outgrows the statement's buffer (256 bytes at first) midway.
        var rows: [[String]] = [["", "a", "Zürich 東京 🚀"]]
        for n in 1..<60 {
            rows.append([String(repeating: "x", count: n * 13), "row \(n)", String(repeating: "é", count: n * 7)])
        }
        for (n, row) in rows.enumerated() {
            try insert.bind(Int64(n), at: 1)
            for (offset, text) in row.enumerated() { try insert.bindForExecution(text, at: Int32(offset + 2)) }
            try insert.execute()
        }
        let select = try connection.prepare("SELECT a, b, c, typeof(a) FROM t ORDER BY n")
        for row in rows {
            #expect(try select.step())
            #expect([select.string(at: 0), select.string(at: 1), select.string(at: 2)] == row)
            #expect(select.string(at: 3) == "text")
        }
        #expect(try !select.step())

        // The row has run: the statement holds no text (nor pointer) any more.
        try insert.execute()
        #expect(try scalarInt(connection, "SELECT count(*) FROM t WHERE n IS NULL AND a IS NULL AND b IS NULL AND c IS NULL") == 1)
    }

    @Test func textBoundForExecutionIsUnboundWhenTheRowFails() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE u (k TEXT UNIQUE)")
        let insert = try connection.prepare("INSERT INTO u (k) VALUES (?)")
        try insert.bindForExecution("key", at: 1)
        try insert.execute()
        try insert.bindForExecution("key", at: 1)
        let error = try sqliteError { try insert.execute() }
        #expect(error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE)
        try insert.execute()
        #expect(try scalarInt(connection, "SELECT count(*) FROM u WHERE k IS NULL") == 1)
        #expect(try scalarInt(connection, "SELECT count(*) FROM u") == 2)
    }

    @Test func bindingOutOfRangeThrowsWithIndexAndSQL() throws {
        let connection = try Connection(path: ":memory:")
        let statement = try connection.prepare("SELECT ?")
        let error = try sqliteError { try statement.bind(Int64(1), at: 2) }
        #expect(error.resultCode == SQLiteError.SQLITE_RANGE)
        #expect(error.message.contains("parameter index 2"))
        #expect(error.sql == "SELECT ?")
        _ = try sqliteError { try statement.bind("x", at: 0) }
    }

    @Test func prepareRefusesEmptyAndMultipleStatements() throws {
        let connection = try Connection(path: ":memory:")
        #expect(try sqliteError { _ = try connection.prepare("  -- nothing") }.resultCode == SQLiteError.SQLITE_MISUSE)
        #expect(try sqliteError { _ = try connection.prepare("SELECT 1; SELECT 2") }.resultCode == SQLiteError.SQLITE_MISUSE)
        // A trailing semicolon, whitespace or comment is one statement.
        _ = try connection.prepare("SELECT 1;  -- done\n")
        let syntax = try sqliteError { _ = try connection.prepare("SELEC 1") }
        #expect(syntax.resultCode == SQLiteError.SQLITE_ERROR)
        #expect(syntax.sql == "SELEC 1")
    }

    @Test func cachedStatementIsReusedAndComesBackReset() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1), (2), (3)")
        let sql = "SELECT a, ? FROM t ORDER BY a"
        let first = try connection.cachedStatement(sql)
        try first.bind("bound", at: 1)
        #expect(try first.step())
        #expect(first.int64(at: 0) == 1)
        #expect(first.string(at: 1) == "bound")

        let second = try connection.cachedStatement(sql)
        #expect(first === second)
        #expect(try second.step())
        #expect(second.int64(at: 0) == 1)   // reset: starts over
        #expect(second.isNull(at: 1))       // bindings cleared
        #expect(try connection.cachedStatement("SELECT 1") !== second)
    }

    @Test func failingStatementErrorCarriesSQLAndExtendedCodeButNoValues() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a TEXT UNIQUE)")
        let insert = try connection.cachedStatement("INSERT INTO t (a) VALUES (?)")
        try insert.bind("secret-value", at: 1)
        try insert.execute()
        try insert.bind("secret-value", at: 1)
        let error = try sqliteError { try insert.execute() }
        #expect(error.resultCode == SQLiteError.SQLITE_CONSTRAINT)
        #expect(error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE)
        #expect(error.sql == "INSERT INTO t (a) VALUES (?)")
        #expect(error.description.hasPrefix("SQLite error 19 (extended 2067): UNIQUE constraint failed: t.a"))
        #expect(error.description.hasSuffix(" - while executing `INSERT INTO t (a) VALUES (?)`"))
        #expect(!error.description.contains("secret-value"))
        // The statement was reset and can run again.
        try insert.bind("other", at: 1)
        try insert.execute()
    }

    @Test func errorDescriptionOmitsExtendedCodeWhenSame() {
        let error = SQLiteError(resultCode: 1, message: "no such table: x", sql: "SELECT * FROM x")
        #expect(error.description == "SQLite error 1: no such table: x - while executing `SELECT * FROM x`")
        #expect(SQLiteError(resultCode: 5, message: "database is locked").description == "SQLite error 5: database is locked")
    }

    @Test func executeRunsEveryStatementAndReportsTheFailingOne() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("""
            CREATE TABLE a (x); -- first
            ;
            CREATE TABLE b (y);
            PRAGMA table_info(a);
            """)
        #expect(try connection.tableExists("a"))
        #expect(try connection.tableExists("B"))
        let error = try sqliteError { try connection.execute("INSERT INTO a VALUES (1); INSERT INTO missing VALUES (2)") }
        #expect(error.message.contains("no such table: missing"))
        #expect(try scalarInt(connection, "SELECT count(*) FROM a") == 1)
    }

    // MARK: - Transactions

    @Test func writeTransactionCommitsOnSuccess() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let connection = try Connection(path: path)
            try connection.execute("CREATE TABLE t (a)")
            let value = try connection.inWriteTransaction {
                #expect(connection.isInTransaction)
                try connection.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
                return 42
            }
            #expect(value == 42)
            #expect(!connection.isInTransaction)
            let other = try Connection(path: path)
            #expect(try scalarInt(other, "SELECT count(*) FROM t") == 2)
        }
    }

    @Test func writeTransactionRollsBackEverythingOnThrownError() throws {
        struct Abort: Error {}
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a UNIQUE)")
        #expect(throws: Abort.self) {
            try connection.inWriteTransaction {
                try connection.execute("INSERT INTO t VALUES (1)")
                throw Abort()
            }
        }
        let constraint = try sqliteError {
            try connection.inWriteTransaction {
                try connection.execute("INSERT INTO t VALUES (2)")
                try connection.execute("INSERT INTO t VALUES (2)")
            }
        }
        #expect(constraint.resultCode == SQLiteError.SQLITE_CONSTRAINT)
        #expect(!connection.isInTransaction)
        #expect(try scalarInt(connection, "SELECT count(*) FROM t") == 0)
    }

    @Test func nestedWriteTransactionThrowsAndLeavesOuterIntact() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (a)")
        try connection.inWriteTransaction {
            try connection.execute("INSERT INTO t VALUES (1)")
            let error = try sqliteError { try connection.inWriteTransaction {} }
            #expect(error.resultCode == SQLiteError.SQLITE_MISUSE)
            #expect(error.message == "a write transaction is already open on this connection")
            #expect(connection.isInTransaction)
        }
        #expect(try scalarInt(connection, "SELECT count(*) FROM t") == 1)
        try connection.inReadTransaction {
            _ = try sqliteError { try connection.inWriteTransaction {} }
        }
    }

    @Test func readTransactionSeesOneSnapshotAndNests() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let reader = try Connection(path: path)
            let writer = try Connection(path: path)
            try writer.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
            try reader.inReadTransaction {
                #expect(try scalarInt(reader, "SELECT count(*) FROM t") == 1)
                try writer.execute("INSERT INTO t VALUES (2)")
                #expect(try scalarInt(reader, "SELECT count(*) FROM t") == 1)
                try reader.inReadTransaction { () throws in   // nested: runs in the same snapshot
                    #expect(try scalarInt(reader, "SELECT count(*) FROM t") == 1)
                }
            }
            #expect(!reader.isInTransaction)
            #expect(try scalarInt(reader, "SELECT count(*) FROM t") == 2)
        }
    }

    @Test func secondWriterGetsBusyAfterItsTimeout() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let holder = try Connection(path: path)
            var configuration = Connection.Configuration()
            configuration.busyMode = .timeout(0.1)
            let waiter = try Connection(path: path, configuration: configuration)
            try holder.execute("CREATE TABLE t (a)")

            try holder.execute("BEGIN IMMEDIATE")
            let clock = ContinuousClock()
            let start = clock.now
            let error = try sqliteError { try waiter.inWriteTransaction { try waiter.execute("INSERT INTO t VALUES (1)") } }
            let elapsed = clock.now - start
            #expect(error.isBusy)
            #expect(error.resultCode == SQLiteError.SQLITE_BUSY)
            #expect(elapsed >= .milliseconds(90))
            #expect(elapsed < .seconds(3))
            #expect(!waiter.isInTransaction)
            try holder.execute("COMMIT")

            try waiter.inWriteTransaction { try waiter.execute("INSERT INTO t VALUES (1)") }
            #expect(try scalarInt(holder, "SELECT count(*) FROM t") == 1)
        }
    }

    // MARK: - Schema and maintenance

    @Test func schemaIntrospectionQuotesTableNames() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute(#"""
            CREATE TABLE "odd ""name""" (Z_PK INTEGER PRIMARY KEY, ZTITLE VARCHAR NOT NULL, ZDATA BLOB, ZUNTYPED);
            CREATE INDEX "odd_title" ON "odd ""name""" (ZTITLE);
            CREATE TABLE u (a UNIQUE);
            """#)
        let table = #"odd "name""#
        #expect(try connection.tableExists(table))
        #expect(try !connection.tableExists("odd"))
        #expect(try connection.columns(in: table) == [
            ColumnInfo(name: "Z_PK", declaredType: "INTEGER", isNotNull: false, isPrimaryKey: true),
            ColumnInfo(name: "ZTITLE", declaredType: "VARCHAR", isNotNull: true, isPrimaryKey: false),
            ColumnInfo(name: "ZDATA", declaredType: "BLOB", isNotNull: false, isPrimaryKey: false),
            ColumnInfo(name: "ZUNTYPED", declaredType: "", isNotNull: false, isPrimaryKey: false),
        ])
        #expect(try connection.indexNames(on: table) == ["odd_title"])
        #expect(try connection.indexNames(on: "u") == ["sqlite_autoindex_u_1"])
        #expect(try connection.columns(in: "nope") == [])
        #expect(try connection.columns(in: "u); DROP TABLE u; --") == [])
        #expect(try connection.tableExists("u"))
    }

    @Test func registeredFunctionIsCallableFromSQL() throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused by test" } }
        let connection = try Connection(path: ":memory:")
        try connection.registerFunction(name: "fold", argumentCount: 1, deterministic: true) { arguments in
            guard case .text(let text) = arguments[0] else { return arguments[0] }
            return .text(text.lowercased())
        }
        try connection.registerFunction(name: "describe", argumentCount: -1, deterministic: false) { arguments in
            if arguments.isEmpty { throw Refused() }
            return .text(arguments.map { "\($0)" }.joined(separator: ","))
        }
        try connection.registerFunction(name: "empty_blob", argumentCount: 0, deterministic: true) { _ in .blob([]) }

        #expect(try scalarText(connection, "SELECT fold('ÉCOLE Straße')") == "école straße")
        #expect(try scalarText(connection, "SELECT describe(1, 2.5, NULL, x'00ff')")
            == "integer(1),double(2.5),null,blob([0, 255])")
        #expect(try scalarText(connection, "SELECT typeof(empty_blob())") == "blob")
        let error = try sqliteError { _ = try scalarText(connection, "SELECT describe()") }
        #expect(error.message == "refused by test")
        #expect(error.sql == "SELECT describe()")
        let unknown = try sqliteError { _ = try scalarText(connection, "SELECT fold(1, 2)") }
        #expect(unknown.message.contains("fold"))
    }

    @Test func traceReportsSQLWithoutBoundValues() throws {
        final class Recorder { var sql: [String] = [] }
        let recorder = Recorder()
        let connection = try Connection(path: ":memory:")
        connection.trace { recorder.sql.append($0) }
        let statement = try connection.prepare("SELECT ?")
        try statement.bind("secret", at: 1)
        try statement.execute()
        connection.trace(nil)
        try connection.execute("SELECT 2")
        #expect(recorder.sql == ["SELECT ?"])
    }

    @Test func integrityCheckAndCheckpointOnHealthyStore() throws {
        try withTemporaryDirectory { directory in
            let connection = try Connection(path: directory.appendingPathComponent("store.sqlite").path)
            try connection.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
            #expect(try connection.integrityCheck() == ["ok"])
            let result = try connection.checkpoint(mode: .truncate)
            #expect(result.walFrameCount == 0)
        }
    }

    @Test func statementOutlivingItsConnectionStaysUsable() throws {
        var connection: Connection? = try Connection(path: ":memory:")
        let statement = try #require(connection).prepare("SELECT 40 + 2")
        connection = nil
        #expect(try statement.step())
        #expect(statement.int64(at: 0) == 42)
    }
}
