import DataStack
import Foundation
import GRDBSQLite

/// Task 6: migrating a store of N rows to a model version with one added
/// attribute, against the same change done with raw SQLite the same way — a
/// copy of the file, `ALTER TABLE … ADD COLUMN` on the copy in one
/// transaction, the copy renamed over the original. Peak memory is measured in
/// child processes at N / 10 and N, as the memory task does.
enum MigrationBenchmark {
    static let childFlag = "--migration-child"

    struct Result: Sendable {
        var rows: Int
        var raw: Duration
        var dataStack: Duration
    }

    struct Memory: Sendable {
        var rows: Int
        /// Peak RSS before and after the migration, in the child (KiB).
        var baselineKiB: Int
        var peakKiB: Int
    }

    /// The model before and after: `Item` gains an optional `sector`.
    static func model(version: Int) -> ManagedObjectModel {
        var properties: [PropertyDescription] = [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string, isOptional: false),
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "time", type: .date, isOptional: false),
        ]
        if version == 2 { properties.append(AttributeDescription(name: "sector", type: .string)) }
        return ManagedObjectModel(entities: [EntityDescription(name: "Item", properties: properties)])
    }

    /// Best of `repetitions` for each contender, on copies of one store of `rows` rows.
    static func run(rows: Int, repetitions: Int) throws -> Result {
        let directory = ScratchDirectory("migration")
        let template = directory.file("Template.sqlite")
        try makeStore(at: template, rows: rows)
        var best = Result(rows: rows, raw: .seconds(1_000_000), dataStack: .seconds(1_000_000))
        for repetition in 1...repetitions {
            let raw = directory.file("Raw-\(repetition).sqlite")
            try FileManager.default.copyItem(at: template, to: raw)
            best.raw = min(best.raw, try measure { try migrateWithRawSQLite(raw) })
            let mine = directory.file("DataStack-\(repetition).sqlite")
            try FileManager.default.copyItem(at: template, to: mine)
            best.dataStack = min(best.dataStack, try measure { try migrateWithDataStack(mine) })
            try check(raw: raw, dataStack: mine, rows: rows)
        }
        return best
    }

    private static func measure(_ body: () throws -> Void) throws -> Duration {
        let start = ContinuousClock.now
        try body()
        return ContinuousClock.now - start
    }

    /// A store of model version 1 with `rows` items: the schema made by
    /// DataStack, the rows written with raw SQLite (fast, and not what is measured).
    static func makeStore(at url: URL, rows: Int) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model(version: 1))
        try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: url))
        let db = try RawConnection(url.path)
        let entity = try db.integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Item'")
        try db.execute("BEGIN")
        let insert = try db.prepare("""
            INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZPRICE, ZVOLUME, ZTIME) VALUES (?, \(entity), 1, ?, ?, ?, ?, ?)
            """)
        defer { sqlite3_finalize(insert) }
        for index in 0..<rows {
            let values = TickerValues(index: index)
            sqlite3_bind_int64(insert, 1, Int64(index + 1))
            sqlite3_bind_text(insert, 2, values.symbol, -1, RawConnection.transient)
            sqlite3_bind_text(insert, 3, values.name, -1, RawConnection.transient)
            sqlite3_bind_double(insert, 4, values.price)
            sqlite3_bind_int64(insert, 5, values.volume)
            sqlite3_bind_double(insert, 6, values.time.timeIntervalSinceReferenceDate)
            guard sqlite3_step(insert) == SQLITE_DONE else { throw db.error("inserting item \(index)") }
            sqlite3_reset(insert)
        }
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = \(rows) WHERE Z_NAME = 'Item'")
        try db.execute("COMMIT")
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// Raw SQLite: copy, add the column on the copy in one transaction, rename over the original.
    static func migrateWithRawSQLite(_ url: URL) throws {
        let copy = url.appendingPathExtension("migrating")
        try FileManager.default.copyItem(at: url, to: copy)
        do {
            let db = try RawConnection(copy.path)
            try db.execute("PRAGMA journal_mode = DELETE")
            try db.execute("BEGIN IMMEDIATE")
            try db.execute("ALTER TABLE ZITEM ADD COLUMN ZSECTOR VARCHAR")
            try db.execute("COMMIT")
        }
        guard rename(copy.path, url.path) == 0 else { throw BenchError("migration: cannot rename \(copy.path): errno \(errno)") }
    }

    /// DataStack: open the store with version 2 and the migration options.
    static func migrateWithDataStack(_ url: URL) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model(version: 2))
        try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: url, options: .stackDefaults))
    }

    /// Both files hold every row, with the new column.
    static func check(raw: URL, dataStack: URL, rows: Int) throws {
        for url in [raw, dataStack] {
            let db = try RawConnection(url.path)
            let count = try db.integer("SELECT count(*) FROM ZITEM")
            let sectors = try db.integer("SELECT count(*) FROM pragma_table_info('ZITEM') WHERE name = 'ZSECTOR'")
            guard count == rows, sectors == 1 else {
                throw BenchError("migration: \(url.lastPathComponent) holds \(count) rows and \(sectors) ZSECTOR columns")
            }
        }
    }

    // MARK: - Memory, in a child process

    static func measureMemory(rows: Int) async throws -> Memory {
        let fields = try await ChildProcess.report([childFlag, String(rows)], prefix: "migration-result", fields: 3, task: "migration")
        guard let baseline = Int(fields[1]), let peak = Int(fields[2]) else {
            throw BenchError("migration: cannot read the child's report `\(fields.joined(separator: " "))`")
        }
        return Memory(rows: rows, baselineKiB: baseline, peakKiB: peak)
    }

    /// The child's side: make the store, migrate it, print `migration-result BASELINE PEAK`.
    static func child(_ arguments: [String]) throws {
        guard arguments.count == 1, let rows = Int(arguments[0]) else { throw BenchError("usage: \(childFlag) ROWS") }
        let directory = ScratchDirectory("migration-memory")
        let url = directory.file("Memory.sqlite")
        try makeStore(at: url, rows: rows)
        let baseline = MemoryBenchmark.peakResidentKiB()
        try migrateWithDataStack(url)
        print("migration-result \(baseline) \(MemoryBenchmark.peakResidentKiB())")
    }
}

/// A plain SQLite connection for the setup, checks and raw contenders of the
/// migration, aggregate and batch tasks.
final class RawConnection {
    private var db: OpaquePointer?
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ path: String) throws {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            throw BenchError("raw SQLite: cannot open \(path)")
        }
    }

    deinit { sqlite3_close_v2(db) }

    func error(_ what: String) -> BenchError {
        BenchError("raw SQLite: \(String(cString: sqlite3_errmsg(db))) - while \(what)")
    }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error("executing `\(sql)`") }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw error("preparing `\(sql)`") }
        return statement
    }

    func integer(_ sql: String) throws -> Int64 {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw error("reading `\(sql)`") }
        return sqlite3_column_int64(statement, 0)
    }
}
