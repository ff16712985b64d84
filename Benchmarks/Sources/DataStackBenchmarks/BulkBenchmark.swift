import DataStack
import Foundation
import GRDBSQLite

/// Tasks `aggregate` and `batch` (issue #17): set-based work on a store of N
/// rows (the migration task's `Item` store), DataStack against the same SQL
/// run raw on a copy of the same file.
enum BulkBenchmark {
    struct Result: Sendable {
        var task: String
        var raw: Duration
        var dataStack: Duration
        /// With persistent history tracked (batch requests write one change row per row).
        var dataStackWithHistory: Duration?
    }

    /// What each contender computes, checked against each other.
    static let groupedSum = "SELECT ZPRICE, total(ZVOLUME) FROM ZITEM GROUP BY ZPRICE ORDER BY ZPRICE"
    /// Half of the rows: `price = index % 10,000 / 4 + 1`, so below 1,251 is `index % 10,000 < 5,000`.
    static let halfPredicate = "price < 1251"

    static func run(rows: Int, repetitions: Int) throws -> [Result] {
        let directory = ScratchDirectory("bulk")
        let base = directory.file("Base.sqlite")
        try MigrationBenchmark.makeStore(at: base, rows: rows)
        func copy(_ name: String) throws -> URL {
            let url = directory.file(name)
            try? FileManager.default.removeItem(at: url)   // the previous repetition's copy, if any
            try FileManager.default.copyItem(at: base, to: url)
            return url
        }
        func best(_ body: () throws -> Duration) rethrows -> Duration {
            var best = Duration.seconds(1_000_000)
            for _ in 0..<repetitions { best = min(best, try body()) }
            return best
        }

        // Aggregate: one grouped sum over every row.
        var checks: [String: Double] = [:]
        let rawSum = try best {
            let db = try RawConnection(try copy("raw.sqlite").path)
            let start = ContinuousClock.now
            let statement = try db.prepare(groupedSum)
            defer { sqlite3_finalize(statement) }
            var groups = 0, total = 0.0
            while sqlite3_step(statement) == SQLITE_ROW { groups += 1; total += sqlite3_column_double(statement, 1) }
            let duration = ContinuousClock.now - start
            checks["raw"] = total + Double(groups)
            return duration
        }
        let dataStackSum = try best {
            let context = try openContext(try copy("datastack.sqlite"), tracking: false)
            let start = ContinuousClock.now
            let results = try context.performAndWait {
                var request = FetchRequest<[String: Any]>(entityName: "Item")
                request.resultType = .dictionary
                request.propertiesToFetch = ["price", .expression(ExpressionDescription(
                    name: "total", expression: .sum(.keyPath("volume")), resultType: .double))]
                request.propertiesToGroupBy = ["price"]
                request.sortDescriptors = [FetchSort(key: "price")]
                return try context.fetch(request).map { ($0["total"] as? NSNumber)?.doubleValue ?? .nan }
            }
            let duration = ContinuousClock.now - start
            checks["datastack"] = results.reduce(0, +) + Double(results.count)
            return duration
        }
        guard checks["raw"] == checks["datastack"] else {
            throw BenchError("aggregate: DataStack's grouped sums \(checks["datastack"] ?? 0) differ from raw SQLite's \(checks["raw"] ?? 0)")
        }

        // Batch update of one column on every row, and batch delete of half of them.
        let rawUpdate = try best { try timedRaw(try copy("raw.sqlite"), "UPDATE ZITEM SET ZPRICE = ZPRICE * 1.1") }
        let rawDelete = try best { try timedRaw(try copy("raw.sqlite"), "DELETE FROM ZITEM WHERE ZPRICE < 1251") }
        func update(tracking: Bool) throws -> Duration {
            try best {
                try timedBatch(try copy("datastack.sqlite"), tracking: tracking) { context in
                    try context.execute(BatchUpdateRequest(entityName: "Item", propertiesToUpdate: ["price": .keyPath("price") * 1.1]))
                } isDone: { context in
                    // Every price was at most 2,500.75 before.
                    try count(context) == rows && count(context, "price > 2501") > 0
                }
            }
        }
        func delete(tracking: Bool) throws -> Duration {
            try best {
                try timedBatch(try copy("datastack.sqlite"), tracking: tracking) { context in
                    var fetch = FetchRequest<ManagedObject>(entityName: "Item")
                    fetch.predicate = try FetchPredicate(format: halfPredicate)
                    return try context.execute(BatchDeleteRequest(fetchRequest: fetch))
                } isDone: { context in
                    try count(context) == rows - (0..<rows).count { $0 % 10_000 < 5_000 }
                }
            }
        }
        return [
            Result(task: "sum grouped by a column (\(rows) rows)", raw: rawSum, dataStack: dataStackSum),
            Result(task: "batch update of one column (\(rows) rows)", raw: rawUpdate, dataStack: try update(tracking: false),
                   dataStackWithHistory: try update(tracking: true)),
            Result(task: "batch delete of half (\(rows) rows)", raw: rawDelete, dataStack: try delete(tracking: false),
                   dataStackWithHistory: try delete(tracking: true)),
        ]
    }

    /// A private-queue context on a coordinator opened on `url` (opening is not timed).
    private static func openContext(_ url: URL, tracking: Bool) throws -> ManagedObjectContext {
        var options = StoreOptions()
        options.persistentHistoryTracking = tracking
        let coordinator = PersistentStoreCoordinator(managedObjectModel: MigrationBenchmark.model(version: 1))
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        return ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    private static func timedRaw(_ url: URL, _ sql: String) throws -> Duration {
        let db = try RawConnection(url.path)
        let start = ContinuousClock.now
        try db.execute(sql)
        return ContinuousClock.now - start
    }

    /// Times `body` on a context over `url`, then checks its effect with `isDone`.
    private static func timedBatch(_ url: URL, tracking: Bool, _ body: (ManagedObjectContext) throws -> BatchResult,
                                   isDone: (ManagedObjectContext) throws -> Bool) throws -> Duration {
        let context = try openContext(url, tracking: tracking)
        return try context.performAndWait {
            let start = ContinuousClock.now
            _ = try body(context)
            let duration = ContinuousClock.now - start
            guard try isDone(context) else { throw BenchError("batch: the request on \(url.lastPathComponent) did not do its work") }
            return duration
        }
    }

    private static func count(_ context: ManagedObjectContext, _ predicate: String? = nil) throws -> Int {
        var request = FetchRequest<ManagedObject>(entityName: "Item")
        request.predicate = try predicate.map { try FetchPredicate(format: $0) }
        return try context.count(for: request)
    }
}
