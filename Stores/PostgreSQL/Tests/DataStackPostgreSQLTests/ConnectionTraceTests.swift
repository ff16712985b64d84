import DataStackPostgreSQL
import Foundation
import Testing

/// `PostgreSQLConnection.traceStatements(_:)`: every way a session runs a statement reports it.
@Suite("PostgreSQLConnection trace")
struct ConnectionTraceTests {
    private struct Refused: Error {}

    private func makeConnection(cacheCapacity: Int = 256) throws -> PostgreSQLConnection {
        try PostgreSQLConnection(url: try PostgreSQLTestServer.shared.get().makeDatabase(), preparedStatementCacheCapacity: cacheCapacity)
    }

    @Test func everyExecutePathReportsItsStatementWithoutValues() throws {
        let db = try makeConnection(cacheCapacity: 1)
        defer { db.close() }
        let recorder = StatementRecorder()
        db.traceStatements(recorder.observer)
        try db.executeScript("CREATE TABLE item (id int8 PRIMARY KEY, name text); CREATE INDEX item_name ON item (name)")
        try db.execute("INSERT INTO item VALUES ($1, $2)", [.text("1"), .text("secret-pen")])
        try db.execute(cached: "SELECT name FROM item WHERE id = $1", [.text("1")])
        try db.execute(cached: "SELECT name FROM item WHERE id = $1", [.text("1")])
        // A capacity of 1: this one evicts the first, with a DEALLOCATE.
        try db.execute(cached: "SELECT id FROM item WHERE name = $1", [.text("secret-pen")])
        try db.transaction { _ = try db.execute("UPDATE item SET name = $1", [.text("secret-pencil")]) }
        #expect(throws: Refused.self) {
            try db.transaction {
                try db.execute("DELETE FROM item")
                throw Refused()
            }
        }
        #expect(try db.copy(into: "item", columns: ["id", "name"], rows: [[.text("2"), .text("secret-ink")]]) == 1)
        try db.listen("news")
        try db.ping(timeout: .seconds(10))
        #expect(recorder.recorded == [
            "CREATE TABLE item (id int8 PRIMARY KEY, name text); CREATE INDEX item_name ON item (name)",
            "INSERT INTO item VALUES ($1, $2)",
            "SELECT name FROM item WHERE id = $1",
            "SELECT name FROM item WHERE id = $1",
            "DEALLOCATE ds_1",
            "SELECT id FROM item WHERE name = $1",
            "BEGIN", "UPDATE item SET name = $1", "COMMIT",
            "BEGIN", "DELETE FROM item", "ROLLBACK",
            #"COPY "item" ("id", "name") FROM STDIN"#,
            #"LISTEN "news""#,
        ])
        #expect(!recorder.recorded.contains { $0.contains("secret") }, "values are never reported")
    }

    @Test func aFailingStatementIsReportedToo() throws {
        let db = try makeConnection()
        defer { db.close() }
        let recorder = StatementRecorder()
        db.traceStatements(recorder.observer)
        #expect(throws: PostgreSQLError.self) { try db.execute("SELECT * FROM no_such_table") }
        #expect(recorder.recorded == ["SELECT * FROM no_such_table"])
    }

    @Test func nilStopsAndANewObserverReplaces() throws {
        let db = try makeConnection()
        defer { db.close() }
        let first = StatementRecorder()
        let second = StatementRecorder()
        db.traceStatements(first.observer)
        db.traceStatements(second.observer)
        try db.execute("SELECT 1")
        db.traceStatements(nil)
        try db.execute("SELECT 2")
        try db.transaction { _ = try db.execute("SELECT 3") }
        #expect(first.recorded.isEmpty)
        #expect(second.recorded == ["SELECT 1"])
    }
}
