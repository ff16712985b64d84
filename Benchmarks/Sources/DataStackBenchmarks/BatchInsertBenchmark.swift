import DataStack
import Foundation
import GRDBSQLite

/// Task `insert`: N ticker rows written by one `BatchInsertRequest` against
/// raw SQLite writing the same rows into the same Core Data table of a copy of
/// the same empty store: one prepared `INSERT` bound by position, one
/// transaction, `Z_MAX` moved once. The target is DataStack at most 1.5× raw.
///
/// DataStack runs three ways: the handler form filling each row's dictionary
/// from the values as it goes (what an import reading a file does; the
/// dictionary's hashing is counted), the `objects:` form with the
/// dictionaries built before the clock starts (as raw's values are), and the
/// handler form on a store that tracks history (a change row per row, which
/// raw does not write). Each is reported by the wall clock and by the
/// inserting thread's CPU time, which moves less on a machine shared with other work.
enum BatchInsertBenchmark {
    struct Result: Sendable {
        var rows: Int
        /// Each contender's best wall-clock and best thread-CPU time, raw SQLite first.
        var timings: [(contender: String, timing: Timing)]
    }

    /// A wall-clock and a thread-CPU-time measurement of the same run.
    struct Timing: Sendable {
        var wall: Duration
        var cpu: Duration

        static let never = Timing(wall: .seconds(1_000_000), cpu: .seconds(1_000_000))

        static func measure(_ body: () throws -> Void) rethrows -> Timing {
            let cpuStart = threadCPUTime(), start = ContinuousClock.now
            try body()
            return Timing(wall: ContinuousClock.now - start, cpu: threadCPUTime() - cpuStart)
        }

        func best(_ other: Timing) -> Timing { Timing(wall: min(wall, other.wall), cpu: min(cpu, other.cpu)) }

        private static func threadCPUTime() -> Duration {
            var time = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
            return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
        }
    }

    /// How DataStack is given the rows.
    private enum Form {
        case handler, objects
    }

    /// The ways it runs, by their names on the command line (`--insert-forms`).
    static let forms: Set<String> = ["raw", "handler", "objects", "tracked"]

    /// Runs the ways named in `forms` (raw SQLite, DataStack's `handler`, `objects` and `tracked` handler);
    /// the untimed pass first runs raw and DataStack's first way.
    static func run(rows count: Int, repetitions: Int, forms: Set<String> = forms) throws -> Result {
        let rows = TickerValues.rows(count)
        let directory = ScratchDirectory("batch-insert")
        let empty = directory.file("Empty.sqlite")
        do {
            // The store's own tables (Z_PRIMARYKEY, Z_METADATA, ZBENCHTICKER), made once, all in the
            // main file, and copied.
            let coordinator = PersistentStoreCoordinator(managedObjectModel: BenchModel.make())
            try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: empty))
            try RawConnection(empty.path).execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        func copy(_ name: String) throws -> URL {
            let url = directory.file(name)
            for suffix in ["", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: url.path + suffix)   // the previous repetition's copy, if any
            }
            try FileManager.default.copyItem(at: empty, to: url)
            return url
        }
        // A short untimed pass first, so no contender pays for first use.
        let warm = Array(rows.prefix(1_000))
        if forms.contains("raw") { _ = try raw(warm, into: try copy("warm-raw.sqlite")) }
        if forms.contains("tracked") {
            _ = try dataStack(warm, .handler, into: try copy("warm.sqlite"), tracking: true)
        } else if forms.contains("handler") {
            _ = try dataStack(warm, .handler, into: try copy("warm.sqlite"), tracking: false)
        } else if forms.contains("objects") {
            _ = try dataStack(warm, .objects, into: try copy("warm.sqlite"), tracking: false)
        }
        var raw = Timing.never, handler = Timing.never, objects = Timing.never, tracked = Timing.never
        for _ in 0..<repetitions {
            if forms.contains("raw") { raw = raw.best(try Self.raw(rows, into: try copy("raw.sqlite"))) }
            if forms.contains("handler") {
                handler = handler.best(try dataStack(rows, .handler, into: try copy("handler.sqlite"), tracking: false))
            }
            if forms.contains("objects") {
                objects = objects.best(try dataStack(rows, .objects, into: try copy("objects.sqlite"), tracking: false))
            }
            if forms.contains("tracked") {
                tracked = tracked.best(try dataStack(rows, .handler, into: try copy("history.sqlite"), tracking: true))
            }
        }
        let all = [("raw", "raw SQLite (prepared INSERT)", raw), ("handler", "DataStack, dictionary handler", handler),
                   ("objects", "DataStack, dictionaries built before", objects),
                   ("tracked", "DataStack, dictionary handler, history tracked", tracked)]
        return Result(rows: count, timings: all.filter { forms.contains($0.0) }.map { ($0.1, $0.2) })
    }

    /// The baseline, timed: the rows bound to one prepared statement in one transaction.
    private static func raw(_ rows: [TickerValues], into url: URL) throws -> Timing {
        let db = try RawConnection(url.path)
        try db.execute("PRAGMA synchronous=NORMAL")   // DataStack's default
        let entity = try db.integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = '\(BenchModel.entityName)'")
        let sql = """
            INSERT INTO ZBENCHTICKER (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZPRICE, ZVOLUME, ZTIME) VALUES (?, \(entity), 1, ?, ?, ?, ?, ?)
            """
        let timing = try Timing.measure {
            try db.execute("BEGIN IMMEDIATE")
            let first = try db.integer("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = \(entity)") + 1
            let statement = try db.prepare(sql)
            defer { sqlite3_finalize(statement) }
            for (offset, row) in rows.enumerated() {
                var symbol = row.symbol, name = row.name
                let code = symbol.withUTF8 { symbolBytes in
                    name.withUTF8 { nameBytes in
                        symbolBytes.withMemoryRebound(to: CChar.self) { symbolChars in
                            nameBytes.withMemoryRebound(to: CChar.self) { nameChars in
                                sqlite3_bind_int64(statement, 1, first + Int64(offset))
                                sqlite3_bind_text(statement, 2, symbolChars.baseAddress, Int32(symbolChars.count), RawConnection.transient)
                                sqlite3_bind_text(statement, 3, nameChars.baseAddress, Int32(nameChars.count), RawConnection.transient)
                                sqlite3_bind_double(statement, 4, row.price)
                                sqlite3_bind_int64(statement, 5, row.volume)
                                sqlite3_bind_double(statement, 6, row.time.timeIntervalSinceReferenceDate)
                                let code = sqlite3_step(statement)
                                sqlite3_reset(statement)
                                return code
                            }
                        }
                    }
                }
                guard code == SQLITE_DONE else { throw db.error("inserting row \(offset)") }
            }
            try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = Z_MAX + \(rows.count) WHERE Z_ENT = \(entity)")
            try db.execute("COMMIT")
        }
        guard try db.integer("SELECT count(*) FROM ZBENCHTICKER") == rows.count else { throw BenchError("insert: raw SQLite lost rows") }
        return timing
    }

    /// DataStack, timed: one batch insert, its handler filling each row's
    /// dictionary from the values, or of dictionaries built before the clock starts.
    private static func dataStack(_ rows: [TickerValues], _ form: Form, into url: URL, tracking: Bool) throws -> Timing {
        var options = StoreOptions()
        options.persistentHistoryTracking = tracking
        let coordinator = PersistentStoreCoordinator(managedObjectModel: BenchModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return try context.performAndWait {
            var request = switch form {
            case .handler:
                BatchInsertRequest(entityName: BenchModel.entityName) { index, row in
                    guard index < rows.count else { return true }
                    let values = rows[index]
                    row["symbol"] = values.symbol
                    row["name"] = values.name
                    row["price"] = values.price
                    row["volume"] = values.volume
                    row["time"] = values.time
                    return false
                }
            case .objects:
                BatchInsertRequest(entityName: BenchModel.entityName, objects: rows.map { values in
                    ["symbol": values.symbol, "name": values.name, "price": values.price, "volume": values.volume, "time": values.time]
                })
            }
            request.resultType = .count
            var result = BatchResult.statusOnly
            let timing = try Timing.measure { result = try context.execute(request) }
            guard result == .count(rows.count), try context.count(for: FetchRequest<ManagedObject>(entityName: BenchModel.entityName)) == rows.count else {
                throw BenchError("insert: DataStack's batch insert returned \(result)")
            }
            return timing
        }
    }
}
