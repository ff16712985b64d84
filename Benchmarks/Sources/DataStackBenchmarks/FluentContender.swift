#if FLUENT_CONTENDER
import FluentKit
import FluentSQL
import FluentSQLiteDriver
import Foundation
import NIOPosix

/// The ticker as a Fluent model, on the same table as the other contenders.
final class FluentTicker: Model, @unchecked Sendable {
    static let schema = "ticker"

    @ID(custom: "id") var id: Int?
    @Field(key: "symbol") var symbol: String
    @Field(key: "name") var name: String
    @Field(key: "price") var price: Double
    @Field(key: "volume") var volume: Int64
    /// Seconds since 2001, as Core Data and the other contenders store dates
    /// (Fluent's SQLite driver would store a `Date` as seconds since 1970).
    @Field(key: "time") var time: Double

    init() {}

    init(_ values: TickerValues) {
        symbol = values.symbol
        name = values.name
        price = values.price
        volume = values.volume
        time = values.time.timeIntervalSinceReferenceDate
    }

    func read(into checksum: inout Checksum) {
        checksum.add(symbol: symbol, name: name, price: price, volume: volume, time: Date(timeIntervalSinceReferenceDate: time))
    }
}

/// Fluent (fluent-kit with its SQLite driver) as a server developer uses it: a
/// `Databases` with the SQLite driver on the file, on an event loop group and a
/// thread pool of its own (one thread each: the driver keeps one connection per
/// event loop), models created with `create(on:)` in a transaction per chunk,
/// read with `query(on:).all()` and `find(_:on:)`. Built only with
/// `DATASTACK_BENCH_FLUENT=1` (see Package.swift).
enum FluentBench {
    /// One `Databases` on a file and the `Database` the tasks use; ``close()`` shuts it all down.
    final class Connection: Sendable {
        let group: MultiThreadedEventLoopGroup
        let threadPool: NIOThreadPool
        let databases: Databases
        let db: any Database
        /// The SQLite library Fluent runs on (sqlite-nio's own copy, not the system's).
        let sqliteVersion: String

        /// Opens the file (creating the table if needed) in WAL mode with
        /// `synchronous=NORMAL`, like the other contenders; nothing here is timed.
        static func open(_ path: String) async throws -> Connection {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let threadPool = NIOThreadPool(numberOfThreads: 1)
            threadPool.start()
            let databases = Databases(threadPool: threadPool, on: group)
            databases.use(.sqlite(.file(path)), as: .sqlite)
            let logger = Logger(label: "datastack-benchmarks.fluent")
            do {
                guard let db = databases.database(logger: logger, on: group.next()) else {
                    throw BenchError("Fluent: no database for \(path)")
                }
                guard let sql = db as? any SQLDatabase else { throw BenchError("Fluent: the SQLite driver is not an SQLDatabase") }
                // One event loop, one connection: these settings hold for every later query.
                try await sql.raw("PRAGMA journal_mode=WAL").run()
                try await sql.raw("PRAGMA synchronous=NORMAL").run()
                let synchronous = try await sql.raw("PRAGMA synchronous").first(decodingColumn: "synchronous", as: Int.self)
                let journal = try await sql.raw("PRAGMA journal_mode").first(decodingColumn: "journal_mode", as: String.self)
                guard synchronous == 1, journal == "wal" else {
                    throw BenchError("Fluent: synchronous \(synchronous.map(String.init) ?? "?"), journal mode \(journal ?? "?")")
                }
                try await sql.raw(SQLQueryString("CREATE TABLE IF NOT EXISTS " + RawSQLite.schema.dropFirst("CREATE TABLE ".count))).run()
                let version = try await sql.raw("SELECT sqlite_version() AS version").first(decodingColumn: "version", as: String.self)
                return Connection(group: group, threadPool: threadPool, databases: databases, db: db, sqliteVersion: version ?? "?")
            } catch {
                await databases.shutdownAsync()
                // The setup's error is the one to report; a failed shutdown after it adds nothing.
                try? await threadPool.shutdownGracefully()
                try? await group.shutdownGracefully()
                throw error
            }
        }

        private init(group: MultiThreadedEventLoopGroup, threadPool: NIOThreadPool, databases: Databases, db: any Database,
                     sqliteVersion: String) {
            self.group = group
            self.threadPool = threadPool
            self.databases = databases
            self.db = db
            self.sqliteVersion = sqliteVersion
        }

        func close() async throws {
            await databases.shutdownAsync()
            try await threadPool.shutdownGracefully()
            try await group.shutdownGracefully()
        }
    }

    /// Inserts the rows, one transaction per chunk, each model with `create(on:)`
    /// (which reads the new ID back into the model, `RETURNING id`).
    static func insert(_ rows: [TickerValues], chunkSize: Int, into connection: Connection) async throws {
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try await connection.db.transaction { db in
                for row in chunk { try await FluentTicker(row).create(on: db) }
            }
        }
    }

    /// Inserts the rows, one transaction per chunk, each chunk with one
    /// `[Model].create(on:)`: one multi-row `INSERT` (the models' IDs are not read back).
    static func insertInBulk(_ rows: [TickerValues], chunkSize: Int, into connection: Connection) async throws {
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try await connection.db.transaction { db in
                try await chunk.map(FluentTicker.init).create(on: db)
            }
        }
    }

    static func count(in connection: Connection) async throws -> Int {
        try await FluentTicker.query(on: connection.db).count()
    }

    /// Every model, every field read.
    static func fetchAll(from connection: Connection) async throws -> Checksum {
        var checksum = Checksum()
        for ticker in try await FluentTicker.query(on: connection.db).all() { ticker.read(into: &checksum) }
        return checksum
    }

    /// The faulting pattern with Fluent: every ID, then every `stride`-th model with `find(_:on:)`.
    static func fetchIDsThenModels(every stride: Int, from connection: Connection) async throws -> Checksum {
        let ids = try await FluentTicker.query(on: connection.db).all(\.$id)
        var checksum = Checksum()
        for index in Swift.stride(from: 0, to: ids.count, by: stride) {
            guard let ticker = try await FluentTicker.find(ids[index], on: connection.db) else {
                throw BenchError("Fluent: row \(ids[index]) missing")
            }
            ticker.read(into: &checksum)
        }
        return checksum
    }
}
#endif
