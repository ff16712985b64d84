import DataStackPostgreSQL
import Foundation
import Testing

/// A connection to a fresh database on the shared test server.
private func makeConnection(preparedStatementCacheCapacity: Int = 256) throws -> PostgreSQLConnection {
    let server = try PostgreSQLTestServer.shared.get()
    return try PostgreSQLConnection(url: server.makeDatabase(), preparedStatementCacheCapacity: preparedStatementCacheCapacity)
}

/// The error `body` throws, as a PostgreSQLError; records an issue when it throws nothing or something else.
private func postgreSQLError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> PostgreSQLError? {
    do {
        try body()
        Issue.record("expected a PostgreSQLError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PostgreSQLError {
        return error
    } catch {
        Issue.record("expected a PostgreSQLError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

@Suite("PostgreSQLConnection")
struct ConnectionTests {
    // MARK: - Values

    @Test func nullRoundTripsAsNull() throws {
        let db = try makeConnection()
        let result = try db.execute("SELECT $1::text, $2::int8, $3::bytea", [.null, .null, .null])
        for column in 0..<3 {
            #expect(result.isNull(row: 0, column: column))
        }
        #expect(result.string(row: 0, column: 0) == nil)
        #expect(try result.int64(row: 0, column: 1) == nil)
        #expect(try result.bytes(row: 0, column: 2) == nil)
        // The empty string is not NULL.
        let empty = try db.execute("SELECT $1::text", [.text("")])
        #expect(!empty.isNull(row: 0, column: 0))
        #expect(empty.string(row: 0, column: 0) == "")
    }

    @Test func textRoundTripsThroughATable() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE t (i int PRIMARY KEY, s text)")
        let texts = ["", "it's \"quoted\"", "naïve 日本語 🎉 é", "back\\slash\ttab\nnewline\rreturn", "$1 ; DROP TABLE t; --"]
        for (index, text) in texts.enumerated() {
            try db.execute("INSERT INTO t VALUES ($1, $2)", [PostgreSQLValue(Int64(index)), .text(text)])
        }
        let result = try db.execute("SELECT s FROM t ORDER BY i")
        #expect(result.rowCount == texts.count)
        #expect((0..<result.rowCount).map { result.string(row: $0, column: 0) } == texts)
    }

    @Test func textWithANulCharacterThrowsInsteadOfBeingCut() throws {
        let db = try makeConnection()
        let error = postgreSQLError { try db.execute("SELECT $1::text", [.text("a\u{0}b")]) }
        #expect(error?.message.contains("NUL") == true)
        #expect(error?.description.contains("a\u{0}b") == false)
    }

    @Test func int64ExtremesRoundTrip() throws {
        let db = try makeConnection()
        for value in [Int64.min, Int64.max, 0, -1] {
            let result = try db.execute("SELECT $1::int8", [PostgreSQLValue(value)])
            #expect(try result.int64(row: 0, column: 0) == value)
        }
    }

    @Test("integers are read from libpq's text exactly as Int64(_:) reads them, and text that is none throws")
    func integersAreReadAsInt64ReadsThem() throws {
        let db = try makeConnection()
        let texts = ["0", "-0", "+0", "+5", "-", "+", "", "12a", " 1", "1 ", "00012", "1_000", "0x10", "١٢", "--1",
                     "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                     "99999999999999999999", "18446744073709551615"]
        for text in texts {
            let result = try db.execute("SELECT $1::text", [.text(text)])
            if let expected = Int64(text) {
                #expect(try result.int64(row: 0, column: 0) == expected, "'\(text)'")
            } else {
                let error = postgreSQLError { _ = try result.int64(row: 0, column: 0) }
                #expect(error?.message.contains("a 64-bit integer") == true, "'\(text)': \(String(describing: error))")
            }
        }
    }

    @Test func doublesRoundTripBitForBit() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE d (i int PRIMARY KEY, x float8)")
        let values: [Double] = [
            0.1, 1e-300, -0.0, 0, .infinity, -.infinity, .nan, .greatestFiniteMagnitude,
            .leastNonzeroMagnitude, .leastNormalMagnitude, .pi, 1.0 / 3, -123456.789e200,
        ]
        for (index, value) in values.enumerated() {
            try db.execute("INSERT INTO d VALUES ($1, $2)", [PostgreSQLValue(Int64(index)), PostgreSQLValue(value)])
        }
        let result = try db.execute("SELECT x FROM d ORDER BY i")
        for (index, value) in values.enumerated() {
            let read = try #require(try result.double(row: index, column: 0))
            if value.isNaN {
                #expect(read.isNaN)
            } else {
                #expect(read.bitPattern == value.bitPattern, "\(value) read back as \(read)")
            }
        }
    }

    @Test func boolParametersAreUnderstood() throws {
        let db = try makeConnection()
        let result = try db.execute("SELECT $1::bool, $2::bool", [PostgreSQLValue(true), PostgreSQLValue(false)])
        #expect(result.string(row: 0, column: 0) == "t")
        #expect(result.string(row: 0, column: 1) == "f")
    }

    @Test func byteaWithAllByteValuesRoundTripsAsAParameter() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE b (i int PRIMARY KEY, data bytea)")
        let all = (0...255).map(UInt8.init)
        try db.execute("INSERT INTO b VALUES (1, $1), (2, $2)", [.bytes(all), .bytes([])])
        let result = try db.execute("SELECT data, length(data) FROM b ORDER BY i")
        #expect(try result.bytes(row: 0, column: 0) == all)
        #expect(try result.int64(row: 0, column: 1) == 256)
        #expect(try result.bytes(row: 1, column: 0) == [])
    }

    @Test func unparsableTextThrowsInsteadOfBecomingData() throws {
        let db = try makeConnection()
        let result = try db.execute("SELECT 'abc' AS price, '12.5' AS whole, 'inf' AS infinite, '\\xzz' AS blob, '99999999999999999999' AS big")
        let error = postgreSQLError { _ = try result.int64(row: 0, column: 0) }
        #expect(error?.message.contains("price") == true)
        #expect(error?.message.contains("abc") == true)
        #expect(throws: PostgreSQLError.self) { try result.int64(row: 0, column: 1) }
        #expect(throws: PostgreSQLError.self) { try result.double(row: 0, column: 0) }
        #expect(throws: PostgreSQLError.self) { try result.double(row: 0, column: 2) }
        #expect(throws: PostgreSQLError.self) { try result.bytes(row: 0, column: 3) }
        #expect(throws: PostgreSQLError.self) { try result.int64(row: 0, column: 4) }
        #expect(try result.double(row: 0, column: 1) == 12.5)
    }

    // MARK: - Statements

    @Test func resultReportsShapeAndAffectedRows() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE t (a int, b text); INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        let update = try db.execute("UPDATE t SET b = $1 WHERE a >= $2::int", [.text("w"), PostgreSQLValue(Int64(2))])
        #expect(update.affectedRowCount == 2)
        let select = try db.execute("SELECT a, b AS label FROM t ORDER BY a")
        #expect(select.rowCount == 3)
        #expect(select.columnCount == 2)
        #expect(select.columnName(at: 1) == "label")
        #expect(select.affectedRowCount == 3)
        #expect(try db.execute("CREATE TABLE u (a int)").affectedRowCount == 0)
    }

    @Test func cachedStatementIsPreparedOncePerConnection() throws {
        let db = try makeConnection()
        let sql = "SELECT $1::int8 + 1"
        for value in Int64(1)...5 {
            let result = try db.execute(cached: sql, [PostgreSQLValue(value)])
            #expect(try result.int64(row: 0, column: 0) == value + 1)
        }
        let prepared = try db.execute("SELECT name, statement FROM pg_prepared_statements")
        #expect(prepared.rowCount == 1)
        #expect(prepared.string(row: 0, column: 1) == sql)
        #expect(prepared.string(row: 0, column: 0)?.hasPrefix("ds_") == true)
    }

    @Test func fullStatementCacheEvictsOnlyTheLeastRecentlyUsed() throws {
        let db = try makeConnection(preparedStatementCacheCapacity: 3)
        let a = "SELECT 'a', $1::int", b = "SELECT 'b', $1::int", c = "SELECT 'c', $1::int", d = "SELECT 'd', $1::int"
        for sql in [a, b, c, a, d] {  // a is used again, so b is the oldest when d arrives
            try db.execute(cached: sql, [PostgreSQLValue(Int64(1))])
        }
        let prepared = try db.execute("SELECT statement FROM pg_prepared_statements")
        let statements = Set((0..<prepared.rowCount).compactMap { prepared.string(row: $0, column: 0) })
        #expect(statements == [a, c, d])
        // b comes back: it is prepared again, evicting c (now the oldest).
        try db.execute(cached: b, [PostgreSQLValue(Int64(1))])
        let after = try db.execute("SELECT statement FROM pg_prepared_statements")
        #expect(Set((0..<after.rowCount).compactMap { after.string(row: $0, column: 0) }) == [a, b, d])
    }

    @Test func syntaxErrorThrowsSyntaxOrSchemaWithTheSQLAndNoParameterValues() throws {
        let db = try makeConnection()
        let secret = "s3cret-value-4711"
        let sql = "SELECT * FROM no_such_table WHERE name = $1"
        let missing = postgreSQLError { try db.execute(sql, [.text(secret)]) }
        #expect(missing?.kind == .syntaxOrSchema)
        #expect(missing?.code == "42P01")
        #expect(missing?.sql == sql)
        #expect(missing?.description.contains("while executing `\(sql)`") == true)
        #expect(missing?.description.hasPrefix("PostgreSQL error 42P01: relation \"no_such_table\" does not exist") == true)
        #expect(missing?.description.contains(secret) == false)

        let cached = postgreSQLError { try db.execute(cached: "SELEC $1", [.text(secret)]) }
        #expect(cached?.kind == .syntaxOrSchema)
        #expect(cached?.code == "42601")
        #expect(cached?.description.contains(secret) == false)
        // The connection is still usable afterwards.
        #expect(try db.execute("SELECT 1").int64(row: 0, column: 0) == 1)
    }

    @Test func duplicateKeyThrowsUniqueViolationWithoutTheValue() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE person (name text UNIQUE)")
        try db.execute("INSERT INTO person VALUES ($1)", [.text("alice-unique")])
        let error = postgreSQLError { try db.execute("INSERT INTO person VALUES ($1)", [.text("alice-unique")]) }
        #expect(error?.kind == .uniqueViolation)
        #expect(error?.code == "23505")
        #expect(error?.detail?.contains("alice-unique") == true)  // the server's detail names the key…
        #expect(error?.description.contains("alice-unique") == false)  // …so the description leaves it out
        do {
            try db.execute("INSERT INTO person VALUES ($1)", [.text("alice-unique")])
        } catch PostgreSQLError.Kind.uniqueViolation {
            // matched by kind
        } catch {
            Issue.record("catch by kind did not match \(error)")
        }
    }

    @Test func executeScriptRunsSeveralStatementsQuietly() throws {
        let db = try makeConnection()
        try db.executeScript("""
            CREATE TABLE IF NOT EXISTS s (a int);
            CREATE TABLE IF NOT EXISTS s (a int);
            INSERT INTO s VALUES (1), (2);
            """)
        #expect(try db.execute("SELECT count(*) FROM s").int64(row: 0, column: 0) == 2)
    }

    // MARK: - Transactions

    private struct Abort: Error {}

    @Test func transactionRollsBackWhenTheBodyThrows() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE t (a int)")
        #expect(throws: Abort.self) {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (1), (2)")
                throw Abort()
            }
        }
        #expect(try db.execute("SELECT count(*) FROM t").int64(row: 0, column: 0) == 0)
        let value = try db.transaction {
            try db.execute("INSERT INTO t VALUES (3)")
            return 42
        }
        #expect(value == 42)
        #expect(try db.execute("SELECT count(*) FROM t").int64(row: 0, column: 0) == 1)
    }

    @Test func transactionWhoseFailedStatementWasCaughtThrowsInsteadOfCommitting() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE t (a int PRIMARY KEY)")
        let error = postgreSQLError {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (1)")
                _ = try? db.execute("INSERT INTO t VALUES (1)")  // fails, aborting the transaction
            }
        }
        #expect(error?.message.contains("rolled back") == true)
        #expect(try db.execute("SELECT count(*) FROM t").int64(row: 0, column: 0) == 0)
        // Nested transactions are refused.
        let nested = postgreSQLError { try db.transaction { try db.transaction {} } }
        #expect(nested?.message.contains("nested") == true)
        #expect(try db.execute("SELECT count(*) FROM t").int64(row: 0, column: 0) == 0)
    }

    // MARK: - LISTEN / NOTIFY

    @Test func notifyReachesAListeningConnectionWithChannelAndPayload() throws {
        let server = try PostgreSQLTestServer.shared.get()
        let url = try server.makeDatabase()
        let listener = try PostgreSQLConnection(url: url)
        let sender = try PostgreSQLConnection(url: url)
        let channel = "Item \"Changed\""  // case, space and a quote survive quoting
        try listener.listen(channel)
        try sender.notify(channel, payload: "id=7 ✓")
        let received = try listener.notifications(waitingUpTo: .seconds(5))
        #expect(received == [PostgreSQLNotification(channel: channel, payload: "id=7 ✓", processID: sender.serverProcessID)])
        #expect(sender.serverProcessID != listener.serverProcessID)
        // Nothing more is pending.
        #expect(try listener.notifications(waitingUpTo: .zero) == [])
    }

    @Test func waitingForNotificationsReturnsEmptyAfterTheTimeout() throws {
        let db = try makeConnection()
        try db.listen("quiet")
        let clock = ContinuousClock()
        let start = clock.now
        let received = try db.notifications(waitingUpTo: .milliseconds(100))
        let elapsed = clock.now - start
        #expect(received == [])
        #expect(elapsed >= .milliseconds(95))
        #expect(elapsed < .seconds(2))
    }

    // MARK: - COPY

    @Test func copyLoadsTenThousandRows() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE item (id int8 PRIMARY KEY, name text, price float8)")
        let copied = try db.copy(
            into: "item", columns: ["id", "name", "price"],
            rows: (1...10_000).lazy.map { [PostgreSQLValue(Int64($0)), .text("item \($0)"), PostgreSQLValue(Double($0) / 10)] })
        #expect(copied == 10_000)
        let check = try db.execute("SELECT count(*), sum(id), max(name) FROM item")
        #expect(try check.int64(row: 0, column: 0) == 10_000)
        #expect(try check.int64(row: 0, column: 1) == 50_005_000)
        #expect(check.string(row: 0, column: 2) == "item 9999")
    }

    @Test func copyEscapesTextNullAndBytes() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE c (i int, s text, b bytea)")
        let all = (0...255).map(UInt8.init)
        let tricky = "back\\slash\ttab\nnewline\rreturn \\N é"
        let copied = try db.copy(
            into: "c", columns: ["i", "s", "b"],
            rows: [
                [PostgreSQLValue(Int64(1)), .text(tricky), .bytes(all)],
                [PostgreSQLValue(Int64(2)), .null, .null],
                [PostgreSQLValue(Int64(3)), .text(""), .bytes([])],
            ])
        #expect(copied == 3)
        let result = try db.execute("SELECT s, b FROM c ORDER BY i")
        #expect(result.string(row: 0, column: 0) == tricky)
        #expect(try result.bytes(row: 0, column: 1) == all)
        #expect(result.isNull(row: 1, column: 0))
        #expect(result.isNull(row: 1, column: 1))
        #expect(result.string(row: 2, column: 0) == "")
        #expect(try result.bytes(row: 2, column: 1) == [])
    }

    @Test func copyWithABadRowCopiesNothingAndLeavesTheConnectionUsable() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE c (i int PRIMARY KEY)")
        let wrongCount = postgreSQLError {
            try db.copy(into: "c", columns: ["i"], rows: [[PostgreSQLValue(Int64(1))], []])
        }
        #expect(wrongCount?.message.contains("row 1 has 0 values for 1 columns") == true)
        let duplicate = postgreSQLError {
            try db.copy(into: "c", columns: ["i"], rows: [[PostgreSQLValue(Int64(1))], [PostgreSQLValue(Int64(1))]])
        }
        #expect(duplicate?.kind == .uniqueViolation)
        #expect(try db.execute("SELECT count(*) FROM c").int64(row: 0, column: 0) == 0)
        let missing = postgreSQLError { try db.copy(into: "nope", columns: ["i"], rows: [[PostgreSQLValue(Int64(1))]]) }
        #expect(missing?.kind == .syntaxOrSchema)
        #expect(try db.copy(into: "c", columns: ["i"], rows: [[PostgreSQLValue(Int64(5))]]) == 1)
    }

    @Test func copyStatementThroughExecuteThrowsAndLeavesTheConnectionUsable() throws {
        let db = try makeConnection()
        try db.executeScript("CREATE TABLE c (i int); INSERT INTO c VALUES (1), (2)")
        #expect(throws: PostgreSQLError.self) { try db.execute("COPY c TO STDOUT") }
        #expect(throws: PostgreSQLError.self) { try db.execute("COPY c FROM STDIN") }
        #expect(try db.execute("SELECT count(*) FROM c").int64(row: 0, column: 0) == 2)
    }

    // MARK: - Connection state

    @Test func connectingToAFolderWithoutAServerThrowsConnectionFailed() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ds-pg-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = postgreSQLError {
            _ = try PostgreSQLConnection(conninfo: "host=\(folder.path) user=datastack dbname=test")
        }
        #expect(error?.kind == .connectionFailed)
        #expect(error?.code == nil)
        #expect(error?.message.contains(folder.path) == true)
        #expect(error?.description.hasPrefix("PostgreSQL error: connection to server on socket") == true)
    }

    @Test func closeIsIdempotentAndLaterCallsThrow() throws {
        let db = try makeConnection()
        #expect(db.isConnected)
        db.close()
        db.close()
        #expect(!db.isConnected)
        #expect(db.serverProcessID == 0)
        let error = postgreSQLError { try db.execute("SELECT 1") }
        #expect(error?.kind == .connectionLost)
    }
}

/// Tests that kill their server: each starts its own.
@Suite("PostgreSQLConnection with a dying server")
struct ConnectionLossTests {
    @Test func killedServerThrowsConnectionLostAndReconnectRecovers() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let db = try PostgreSQLConnection(url: url)
        try db.executeScript("CREATE TABLE t (a int)")
        try db.execute(cached: "INSERT INTO t VALUES ($1::int)", [PostgreSQLValue(Int64(1))])
        try db.listen("after_restart")
        let oldProcessID = db.serverProcessID

        try server.kill()
        let lost = postgreSQLError { try db.execute("SELECT count(*) FROM t") }
        #expect(lost?.kind == .connectionLost)
        #expect(!db.isConnected)
        #expect(postgreSQLError { try db.execute("SELECT 1") }?.kind == .connectionLost)
        #expect(throws: PostgreSQLError.self) { try db.notifications(waitingUpTo: .milliseconds(10)) }
        // While the server is down, reconnecting fails cleanly.
        let refused = postgreSQLError { try db.reconnect() }
        #expect(refused?.kind == .connectionFailed)

        try server.restart()
        try db.reconnect()
        #expect(db.isConnected)
        #expect(db.serverProcessID != oldProcessID)
        // Committed before the kill, so still there; the cached statement is prepared again.
        try db.execute(cached: "INSERT INTO t VALUES ($1::int)", [PostgreSQLValue(Int64(2))])
        #expect(try db.execute("SELECT count(*) FROM t").int64(row: 0, column: 0) == 2)
        // reconnect() listened again.
        let sender = try PostgreSQLConnection(url: url)
        try sender.notify("after_restart", payload: "back")
        #expect(try db.notifications(waitingUpTo: .seconds(5)).map(\.payload) == ["back"])
    }
}
