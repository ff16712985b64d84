#if FLUENT_CONTENDER
import FluentKit
import FluentPostgresDriver
import FluentSQL
import Foundation
import NIOPosix

/// The company as a Fluent model, with the types a Fluent user gives these
/// fields on PostgreSQL: a database-generated `BIGINT` key, `TEXT`, `BIGINT`,
/// `TIMESTAMPTZ` for the date (the store keeps seconds since 2001 in a
/// `DOUBLE PRECISION`; both are 8 bytes on the wire) and `DOUBLE PRECISION`.
final class FluentCompany: Model, @unchecked Sendable {
    // @unchecked Sendable: as every Fluent model (its property wrappers are classes);
    // each model here is made, written and read by one task.
    static let schema = "company"

    @ID(custom: "id") var id: Int?
    @Field(key: "symbol") var symbol: String
    @OptionalField(key: "name") var name: String?
    @Field(key: "employees") var employees: Int
    @OptionalField(key: "founded") var founded: Date?
    @Field(key: "price") var price: Double

    init() {}

    init(_ values: CompanyValues) {
        symbol = values.symbol
        name = values.name
        employees = values.employees
        founded = values.founded
        price = values.price
    }

    func read(into checksum: inout Checksum) {
        checksum.add(symbol: symbol, name: name, employees: employees, founded: founded, price: price)
    }
}

/// Fluent (fluent-kit with fluent-postgres-driver) as a server developer uses it:
/// a `Databases` with `.postgres(configuration:)` on an event loop group of its own
/// (one thread; the driver's pool keeps up to `maxConnectionsPerEventLoop`
/// connections per event loop), the table made with Fluent's schema builder,
/// models written with `create(on:)` and read with `query(on:).all()` and
/// `find(_:on:)`, async/await throughout. Fluent runs on SwiftNIO: every query is
/// a future on the event loop; the benchmark's async `main` awaits each one, so
/// one task drives Fluent at a time, as one request handler does. Built only with
/// `DATASTACK_BENCH_FLUENT=1` (see Package.swift).
enum FluentBench {
    /// One `Databases` on a database and the `Database` the tasks use; ``close()`` shuts it down.
    final class Connection: Sendable {
        let group: MultiThreadedEventLoopGroup
        let threadPool: NIOThreadPool
        let databases: Databases
        let db: any Database

        /// Connects to the database of `url` (a `postgresql://` URL as the store takes:
        /// `?host=` a socket folder or a host name, the user, the database in the path).
        static func open(_ url: URL, maximumConnections: Int = 1) async throws -> Connection {
            let settings = try configuration(url)
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let threadPool = NIOThreadPool(numberOfThreads: 1)
            threadPool.start()
            let databases = Databases(threadPool: threadPool, on: group)
            databases.use(.postgres(configuration: settings, maxConnectionsPerEventLoop: maximumConnections), as: .psql)
            let logger = Logger(label: "datastack-postgresql-benchmarks.fluent")
            guard let db = databases.database(logger: logger, on: group.next()) else {
                await databases.shutdownAsync()
                // The missing database is the error to report; a failed shutdown after it adds nothing.
                try? await threadPool.shutdownGracefully()
                try? await group.shutdownGracefully()
                throw BenchError("Fluent: no database for \(url)")
            }
            return Connection(group: group, threadPool: threadPool, databases: databases, db: db)
        }

        /// The driver's configuration for a store URL: a Unix socket when `host` is a
        /// folder (PostgreSQL's socket in it is `.s.PGSQL.<port>`), TCP otherwise.
        static func configuration(_ url: URL) throws -> SQLPostgresConfiguration {
            guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
                throw BenchError("Fluent: cannot read \(url)")
            }
            let query = components.queryItems ?? []
            let host = query.first { $0.name == "host" }?.value ?? components.host ?? "localhost"
            let port = components.port ?? 5432
            let user = components.user ?? "postgres"
            let database = String(components.path.dropFirst())
            if host.hasPrefix("/") {
                return SQLPostgresConfiguration(unixDomainSocketPath: "\(host)/.s.PGSQL.\(port)", username: user,
                                                password: components.password, database: database)
            }
            return SQLPostgresConfiguration(hostname: host, port: port, username: user, password: components.password,
                                            database: database, tls: .disable)
        }

        private init(group: MultiThreadedEventLoopGroup, threadPool: NIOThreadPool, databases: Databases, db: any Database) {
            self.group = group
            self.threadPool = threadPool
            self.databases = databases
            self.db = db
        }

        func close() async throws {
            await databases.shutdownAsync()
            try await threadPool.shutdownGracefully()
            try await group.shutdownGracefully()
        }
    }

    /// Creates the table with Fluent's schema builder (not timed).
    static func createTable(in connection: Connection) async throws {
        try await connection.db.schema(FluentCompany.schema)
            .field("id", .int64, .identifier(auto: true))
            .field("symbol", .string, .required)
            .field("name", .string)
            .field("employees", .int64, .required)
            .field("founded", .datetime)
            .field("price", .double, .required)
            .create()
    }

    /// Inserts the rows, one transaction per chunk, each chunk with one
    /// `[Model].create(on:)`: Fluent's batch create, one multi-row `INSERT` (the
    /// models' IDs are not read back).
    static func insertInBulk(_ rows: [CompanyValues], chunkSize: Int, into connection: Connection) async throws {
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try await connection.db.transaction { db in
                try await chunk.map(FluentCompany.init).create(on: db)
            }
        }
    }

    /// Inserts the rows, one transaction per chunk, each model with `create(on:)`
    /// (one `INSERT … RETURNING id` each: a round trip per row).
    static func insert(_ rows: [CompanyValues], chunkSize: Int, into connection: Connection) async throws {
        for start in stride(from: 0, to: rows.count, by: chunkSize) {
            let chunk = rows[start..<min(start + chunkSize, rows.count)]
            try await connection.db.transaction { db in
                for row in chunk { try await FluentCompany(row).create(on: db) }
            }
        }
    }

    /// Every model, every field read.
    static func fetchAll(from connection: Connection) async throws -> Checksum {
        var checksum = Checksum()
        for company in try await FluentCompany.query(on: connection.db).all() { company.read(into: &checksum) }
        return checksum
    }

    /// The faulting pattern with Fluent: every ID, then every `stride`-th model with `find(_:on:)`.
    static func fetchIDsThenModels(every stride: Int, from connection: Connection) async throws -> Checksum {
        let ids = try await FluentCompany.query(on: connection.db).all(\.$id)
        var checksum = Checksum()
        for index in Swift.stride(from: 0, to: ids.count, by: stride) {
            guard let company = try await FluentCompany.find(ids[index], on: connection.db) else {
                throw BenchError("Fluent: company \(ids[index]) missing")
            }
            company.read(into: &checksum)
        }
        return checksum
    }
}

/// Fluent in the readers task: ``ReadersBenchmark/threads`` tasks, each
/// `query(on:).filter(\.$price < bound).all()` as often as it can, on one `Databases`
/// whose pool keeps up to `maximumConnections` connections on its one event loop.
enum FluentReaders {
    static let onePool = "Fluent, 1 connection (maxConnectionsPerEventLoop 1)"
    static let fivePool = "Fluent, maxConnectionsPerEventLoop 5"

    /// A fresh database with the rows, made by Fluent (not timed).
    static func makeDatabase(_ rows: [CompanyValues], server: BenchServer) async throws -> URL {
        let url = try server.makeDatabase()
        let writer = try await FluentBench.Connection.open(url)
        do {
            try await FluentBench.createTable(in: writer)
            try await FluentBench.insertInBulk(rows, chunkSize: rows.count, into: writer)
        } catch {
            // The insert's error is the one to report.
            try? await writer.close()
            throw error
        }
        try await writer.close()
        return url
    }

    /// The reads of the tasks in `seconds`, each read checked; connections are opened
    /// by three untimed reads of each task first.
    static func reads(_ url: URL, maximumConnections: Int, seconds: Double, expected: Checksum) async throws -> Int {
        let connection = try await FluentBench.Connection.open(url, maximumConnections: maximumConnections)
        let bound = ReadersBenchmark.priceBound
        @Sendable func read() async throws -> Checksum {
            var checksum = Checksum()
            for company in try await FluentCompany.query(on: connection.db).filter(\.$price < bound).all() {
                company.read(into: &checksum)
            }
            return checksum
        }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<ReadersBenchmark.threads {
                    group.addTask { for _ in 0..<3 { _ = try await read() } }
                }
                try await group.waitForAll()
            }
            let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            let reads = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<ReadersBenchmark.threads {
                    group.addTask {
                        var count = 0
                        while ContinuousClock.now < deadline {
                            let checksum = try await read()
                            guard checksum.matches(expected) else { throw BenchError("readers: Fluent read \(checksum), expected \(expected)") }
                            count += 1
                        }
                        return count
                    }
                }
                return try await group.reduce(0, +)
            }
            try await connection.close()
            return reads
        } catch {
            // The read's error is the one to report.
            try? await connection.close()
            throw error
        }
    }
}

/// Fluent's part of one repetition of the import, fetch and fault tasks, the same
/// work as the other contenders': both imports into fresh databases (the table made
/// first, untimed), then the fetch and the fault on a fresh `Databases` each;
/// every read is checked as the others' are.
enum FluentRun {
    static func run(_ rows: [CompanyValues], options: Options, bulkURL: URL, eachURL: URL, expected: Checksum, fired: Int,
                    into repetition: inout Benchmarks.Repetition) async throws {
        for (name, url, bulk) in [(Benchmarks.fluentBulk, bulkURL, true), (Benchmarks.fluentEach, eachURL, false)] {
            let writer = try await FluentBench.Connection.open(url)
            try await FluentBench.createTable(in: writer)
            let start = ContinuousClock.now
            if bulk {
                try await FluentBench.insertInBulk(rows, chunkSize: options.chunkSize, into: writer)
            } else {
                try await FluentBench.insert(rows, chunkSize: options.chunkSize, into: writer)
            }
            repetition.importTimes[name] = ContinuousClock.now - start
            let count = try await FluentCompany.query(on: writer.db).count()
            try await writer.close()
            guard count == rows.count else { throw BenchError("import: \(name) stored \(count) rows of \(rows.count)") }
        }

        let reader = try await FluentBench.Connection.open(bulkURL)
        let fetchStart = ContinuousClock.now
        let fetched = try await FluentBench.fetchAll(from: reader)
        repetition.fetchTimes[Benchmarks.fluentFetch] = ContinuousClock.now - fetchStart
        try await reader.close()
        guard fetched.matches(expected) else { throw BenchError("fetch: Fluent read \(fetched), expected \(expected)") }

        let faulter = try await FluentBench.Connection.open(bulkURL)
        let faultStart = ContinuousClock.now
        let faulted = try await FluentBench.fetchIDsThenModels(every: options.fireStride, from: faulter)
        repetition.faultTimes[Benchmarks.fluentFault] = ContinuousClock.now - faultStart
        try await faulter.close()
        guard faulted.rows == fired else { throw BenchError("fault: Fluent fired \(faulted.rows) rows, expected \(fired)") }
    }
}
#endif
