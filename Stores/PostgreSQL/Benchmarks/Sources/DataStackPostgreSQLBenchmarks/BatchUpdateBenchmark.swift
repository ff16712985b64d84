import DataStackPostgreSQL
import Foundation
import ObjectGraph

/// The **batch-update** task (issue #37's target: a batch update of 1 M rows
/// within 1.5× the raw `UPDATE`): every price raised by 1 with one statement.
///
/// Each contender gets a database of its own laid out by the store (its
/// coordinator opens it, creating `ZCOMPANY` with the store's indexes) and
/// filled on the server with the same N rows (`INSERT … SELECT … FROM
/// generate_series`, not timed, then `VACUUM ANALYZE`), so both update the
/// same table on the same layout:
/// - raw: `UPDATE ZCOMPANY SET ZPRICE = ZPRICE + 1`, in one transaction;
/// - DataStack: `BatchUpdateRequest(entityName: "Company", propertiesToUpdate:
///   ["price": .keyPath("price") + 1])`, `.statusOnly`: one `UPDATE … SET …,
///   Z_OPT = Z_OPT + 1 … RETURNING Z_PK, Z_ENT` (the IDs every batch hands
///   its did-save), with history (a change row per updated row) and without.
///
/// Each database is read back (the sum of the prices) and checked.
enum BatchUpdateBenchmark {
    static let raw = "raw libpq, UPDATE of every row"
    static let historyOn = "DataStack batch update, history on (default)"
    static let historyOff = "DataStack batch update, history off"
    static let contenders = [raw, historyOn, historyOff]

    static func run(rows: Int, repetitions: Int, server: BenchServer) throws -> [String: Duration] {
        var best: [String: Duration] = [:]
        for repetition in 0..<repetitions {
            var order = contenders
            // Alternate which goes first, so that neither always follows the other's writes (checkpoints, autovacuum).
            if repetition % 2 == 1 { order.reverse() }
            for contender in order {
                let time = try measure(contender, rows: rows, server: server)
                best[contender] = min(best[contender] ?? time, time)
            }
        }
        return best
    }

    private static func measure(_ contender: String, rows: Int, server: BenchServer) throws -> Duration {
        let url = try server.makeDatabase()
        let stack = try DataStackContender(url: url, options: contender == historyOff ? DataStackContender.historyOff : DataStackContender.historyOn)
        defer { _ = try? stack.close() }   // a close that fails leaves a database the server drops at the end
        let connection = try PostgreSQLConnection(url: url)
        defer { connection.close() }
        try fill(connection, rows: rows)
        let expected = try priceSum(connection) + Double(rows)
        let duration: Duration
        if contender == raw {
            duration = try Benchmarks.time {
                try connection.transaction {
                    let updated = try connection.execute("UPDATE ZCOMPANY SET ZPRICE = ZPRICE + 1").affectedRowCount
                    guard updated == rows else { throw BenchError("the raw UPDATE changed \(updated) rows of \(rows)") }
                }
            }.0
        } else {
            let context = stack.context
            duration = try Benchmarks.time {
                try context.performAndWait {
                    var request = BatchUpdateRequest(entityName: CompanyModel.entityName, propertiesToUpdate: ["price": .keyPath("price") + 1])
                    request.resultType = .count
                    guard try context.execute(request) == .count(rows) else { throw BenchError("the batch update did not change \(rows) rows") }
                }
            }.0
        }
        let sum = try priceSum(connection)
        guard abs(sum - expected) < 1e-6 * max(1, abs(expected)) else {
            throw BenchError("batch-update: \(contender) read back a price sum of \(sum), expected \(expected)")
        }
        return duration
    }

    /// N rows in the store's table, written on the server, and the key counter moved past them.
    private static func fill(_ connection: PostgreSQLConnection, rows: Int) throws {
        let entity = try connection.execute("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'")
        guard entity.rowCount == 1, let number = try entity.int64(row: 0, column: 0) else { throw BenchError("no Company in Z_PRIMARYKEY") }
        try connection.transaction {
            _ = try connection.execute("""
                INSERT INTO ZCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZEMPLOYEES, ZFOUNDED, ZPRICE) \
                SELECT g, \(number), 1, 'S' || g, 'Company number ' || g, (g * 7919) % 250000, 1000.0 * g, (g % 5000) * 0.25 \
                FROM generate_series(1::bigint, \(rows)) AS g
                """)
            _ = try connection.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = \(rows) WHERE Z_ENT = \(number)")
        }
        _ = try connection.execute("VACUUM ANALYZE ZCOMPANY")
    }

    private static func priceSum(_ connection: PostgreSQLConnection) throws -> Double {
        try connection.execute("SELECT COALESCE(SUM(ZPRICE), 0) FROM ZCOMPANY").double(row: 0, column: 0) ?? 0
    }
}
