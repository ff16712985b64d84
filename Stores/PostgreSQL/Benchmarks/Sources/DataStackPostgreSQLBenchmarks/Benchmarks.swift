import DataStack
import DataStackPostgreSQL
import DataStackSync
import Foundation

/// `datastack-postgresql-benchmarks [--n N] [--repetitions R] [--quick] [--url URL]`:
/// DataStack's PostgreSQL store side by side with raw libpq on the same rows and
/// the same server (see the README's "Benchmarks").
@main
struct Benchmarks {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            if arguments.first == MergeLatency.viewerFlag {
                try await MergeLatency.viewer(Array(arguments.dropFirst()))
                return
            }
            try await run(try Options.parse(arguments))
        } catch let error as UsageError {
            if error.message.isEmpty {
                print(Options.usage)
                exit(0)
            }
            printError("error: \(error.message)\n\(Options.usage)")
            exit(2)
        } catch {
            printError("error: \(error)")
            exit(1)
        }
    }

    static func printError(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }

    static let rawPrepared = "raw libpq, prepared INSERT"
    static let rawBatched = "raw libpq, prepared INSERT of 256 rows"
    static let rawCopy = "raw libpq, COPY"
    static let rawSelect = "raw libpq, SELECT"
    static let rawByKey = "raw libpq, ids then 1 % by key"
    static let historyOn = "DataStack, history on (default)"
    static let historyOff = "DataStack, history off"
    static let faultsWithRows = "DataStack, faults with rows (default)"
    static let faultsIDsOnly = "DataStack, faults IDs only"
    static let rawUpdate = "raw libpq, UPDATE of 256 rows"
    static let fluentBulk = "Fluent, [Model].create(on:) per 1,000"
    static let fluentEach = "Fluent, create(on:) per model"
    static let fluentFetch = "Fluent, query(on:).all()"
    static let fluentFault = "Fluent, ids then find(_:on:)"

    /// One repetition's times by contender, and what the reads saw.
    struct Repetition {
        var importTimes: [String: Duration] = [:]
        var fetchTimes: [String: Duration] = [:]
        var faultTimes: [String: Duration] = [:]
        var updateTimes: [String: Duration] = [:]
    }

    static func run(_ options: Options) async throws {
        let server = try options.url.map(BenchServer.init(existing:)) ?? BenchServer.start()
        defer { server.stop() }
        let admin = try PostgreSQLConnection(url: server.baseURL)
        print(Report.machine(server: admin))
        admin.close()
        print("N = \(options.n), best of \(options.repetitions), \(options.chunkSize) rows per save or transaction, "
              + "server: \(options.url == nil ? "private (initdb, fsync=off, Unix socket)" : "--url")\n")
        #if FLUENT_CONTENDER
        print("Fluent: fluent-kit 1.57.0 with fluent-postgres-driver 2.14.0 (PostgresNIO) on a one-thread event loop group, "
              + "each query awaited from the benchmark's async main\n")
        #endif

        if options.runs("import") || options.runs("fetch") || options.runs("fault") || options.runs("update") {
            let rows = CompanyValues.rows(options.n)
            // An untimed pass over 1,000 rows warms every path up first.
            _ = try await runRepetition(Array(rows.prefix(1_000)), index: 0, options: options, server: server)
            var best = Repetition()
            for index in 0..<options.repetitions {
                let repetition = try await runRepetition(rows, index: index, options: options, server: server)
                best.importTimes.merge(repetition.importTimes, uniquingKeysWith: min)
                best.fetchTimes.merge(repetition.fetchTimes, uniquingKeysWith: min)
                best.faultTimes.merge(repetition.faultTimes, uniquingKeysWith: min)
                best.updateTimes.merge(repetition.updateTimes, uniquingKeysWith: min)
            }
            var measurements: [Measurement] = []
            func add(_ task: String, _ times: [String: Duration], _ contenders: [String], baseline: String, fluent: String? = nil,
                     objects: Int) {
                guard options.runs(task) else { return }
                let fluent = fluent.flatMap { times[$0] == nil ? nil : $0 }
                for contender in contenders {
                    guard let time = times[contender] else { continue }
                    measurements.append(Measurement(task: task, contender: contender, best: time, objects: objects,
                                                    baseline: contender == baseline ? nil : baseline, fluentBaseline: fluent))
                }
            }
            // The like-for-like baselines: the store's saves insert up to 256 rows a statement,
            // Fluent's batch create all the rows of a chunk in one statement.
            add("import", best.importTimes, [rawBatched, rawPrepared, rawCopy, fluentBulk, fluentEach, historyOn, historyOff],
                baseline: rawBatched, fluent: fluentBulk, objects: options.n)
            add("fetch", best.fetchTimes, [rawSelect, fluentFetch, "DataStack"], baseline: rawSelect, fluent: fluentFetch, objects: options.n)
            add("fault", best.faultTimes, [rawByKey, fluentFault, faultsWithRows, faultsIDsOnly], baseline: rawByKey, fluent: fluentFault,
                objects: options.n)
            add("update", best.updateTimes, [rawUpdate, "DataStack"], baseline: rawUpdate, objects: options.n)
            print(Report.results(measurements, repetitions: options.repetitions))
            print("")
        }

        if options.runs("batch-update") {
            let best = try BatchUpdateBenchmark.run(rows: options.n, repetitions: options.repetitions, server: server)
            let measurements = BatchUpdateBenchmark.contenders.compactMap { contender in
                best[contender].map {
                    Measurement(task: "batch-update", contender: contender, best: $0, objects: options.n,
                                baseline: contender == BatchUpdateBenchmark.raw ? nil : BatchUpdateBenchmark.raw)
                }
            }
            print(Report.results(measurements, repetitions: options.repetitions))
            print("")
        }

        if options.runs("readers") {
            let results = try await ReadersBenchmark.run(server: server, seconds: options.readersSeconds, repetitions: options.repetitions)
            print(Report.readers(results, repetitions: options.repetitions))
            print("")
        }

        if options.runs("merge") {
            let result = try await MergeLatency.run(on: try server.makeDatabase(), saves: options.saves, interval: .milliseconds(20))
            guard !result.samples.isEmpty else { throw BenchError("merge: the viewer saw none of \(result.saves) saves") }
            print(Report.table(["merge latency: save → another process's main context (\(result.saves) saves, 20 ms apart)",
                                "median", "p99", "max", "saves seen"],
                               [["DataStack, StackManager viewer", Report.milliseconds(result.percentile(0.5)),
                                 Report.milliseconds(result.percentile(0.99)), Report.milliseconds(result.samples.last ?? .zero),
                                 "\(result.samples.count) of \(result.saves)"]]))
        }

        try await runSync(options, server: server)
    }

    /// The sync tasks (issue #39): two replicas, each a stack on a local SQLite
    /// file, syncing through a PostgreSQLSyncHub on a fresh database of the server.
    static func runSync(_ options: Options, server: BenchServer) async throws {
        if options.runs("sync-converge") {
            print(SyncConvergeBenchmark.report(try await SyncConvergeBenchmark.run(server: server, edits: options.syncEdits)))
            print("")
        }
        if options.runs("sync-latency") {
            let listen = try await SyncLatencyBenchmark.run(server: server, saves: options.syncSaves, wakeUp: true)
            let polled = try await SyncLatencyBenchmark.run(server: server, saves: max(5, options.syncSaves / 5), wakeUp: false)
            print(SyncLatencyBenchmark.report([listen, polled]))
            print("")
        }
        if options.runs("sync-bytes") {
            print(SyncBytesBenchmark.report(try await SyncBytesBenchmark.run(server: server, objects: options.syncObjects)))
            print("")
        }
    }

    static func time<T>(_ body: () throws -> T) rethrows -> (Duration, T) {
        let start = ContinuousClock.now
        let value = try body()
        return (ContinuousClock.now - start, value)
    }

    /// Imports into fresh databases, then fetches and faults each on a fresh connection
    /// (a fresh coordinator, with an empty row cache, for DataStack); checks that every
    /// contender read back what was written.
    static func runRepetition(_ rows: [CompanyValues], index: Int, options: Options, server: BenchServer) async throws -> Repetition {
        var repetition = Repetition()
        let expected = rows.reduce(into: Checksum()) {
            $0.add(symbol: $1.symbol, name: $1.name, employees: $1.employees, founded: $1.founded, price: $1.price)
        }
        let fired = (rows.count + options.fireStride - 1) / options.fireStride

        // Import.
        let rawURL = try server.makeDatabase()
        let raw = try RawPostgreSQL(url: rawURL)
        try raw.createTable("company")
        try raw.createTable("company_copy")
        try raw.createTable("company_batched")
        repetition.importTimes[rawBatched] = try time { try raw.insertBatched(rows, chunkSize: options.chunkSize, into: "company_batched") }.0
        repetition.importTimes[rawPrepared] = try time { try raw.insert(rows, chunkSize: options.chunkSize, into: "company") }.0
        repetition.importTimes[rawCopy] = try time { try raw.copy(rows, into: "company_copy") }.0
        raw.close()
        let dataStackURL = try server.makeDatabase()
        var imports = [(historyOn, DataStackContender.historyOn, dataStackURL),
                       (historyOff, DataStackContender.historyOff, try server.makeDatabase())]
        // Alternate which goes first, so that neither always follows the other's writes (checkpoints, autovacuum).
        if index % 2 == 1 { imports.reverse() }
        for (name, storeOptions, url) in imports {
            let importer = try DataStackContender(url: url, options: storeOptions)
            repetition.importTimes[name] = try time { try importer.insert(rows, chunkSize: options.chunkSize) }.0
            try importer.close()
        }

        #if FLUENT_CONTENDER
        let fluentURL = try server.makeDatabase()
        try await FluentRun.run(rows, options: options, bulkURL: fluentURL, eachURL: try server.makeDatabase(),
                                expected: expected, fired: fired, into: &repetition)
        #endif

        // Fetch.
        let rawReader = try RawPostgreSQL(url: rawURL)
        let (rawFetch, rawFetched) = try time { try rawReader.fetchAll(from: "company") }
        rawReader.close()
        let reader = try DataStackContender(url: dataStackURL)
        let (fetch, fetched) = try time { try reader.fetchAll() }
        try reader.close()
        for (name, checksum) in [(rawSelect, rawFetched), ("DataStack", fetched)] where !checksum.matches(expected) {
            throw BenchError("fetch: \(name) read \(checksum), expected \(expected)")
        }
        repetition.fetchTimes[rawSelect] = rawFetch
        repetition.fetchTimes["DataStack"] = fetch

        // Fault.
        let rawFaulter = try RawPostgreSQL(url: rawURL)
        let (rawFault, rawFired) = try time { try rawFaulter.fetchIDsThenRows(every: options.fireStride, from: "company") }
        rawFaulter.close()
        repetition.faultTimes[rawByKey] = rawFault
        var firedCounts = [rawByKey: rawFired.rows]
        for (name, includesPropertyValues) in [(faultsWithRows, true), (faultsIDsOnly, false)] {
            let faulter = try DataStackContender(url: dataStackURL)
            let (duration, checksum) = try time {
                try faulter.fetchFaultsThenFire(every: options.fireStride, includesPropertyValues: includesPropertyValues)
            }
            try faulter.close()
            repetition.faultTimes[name] = duration
            firedCounts[name] = checksum.rows
        }
        // Which 1 % is fired depends on each table's row order, so only the count is compared.
        if let wrong = firedCounts.first(where: { $0.value != fired }) {
            throw BenchError("fault: \(wrong.key) fired \(wrong.value) rows, expected \(fired)")
        }

        // Update: every price raised by 1 (read included), then both read back.
        let rawUpdater = try RawPostgreSQL(url: rawURL)
        repetition.updateTimes[rawUpdate] = try time { try rawUpdater.raiseEveryPrice(chunkSize: options.chunkSize, in: "company") }.0
        let rawUpdated = try rawUpdater.fetchAll(from: "company")
        rawUpdater.close()
        let updater = try DataStackContender(url: dataStackURL)
        repetition.updateTimes["DataStack"] = try time { try updater.raiseEveryPrice(chunkSize: options.chunkSize) }.0
        try updater.close()
        let check = try DataStackContender(url: dataStackURL)
        let updated = try check.fetchAll()
        try check.close()
        let raised = rows.reduce(into: Checksum()) {
            $0.add(symbol: $1.symbol, name: $1.name, employees: $1.employees, founded: $1.founded, price: $1.price + 1)
        }
        for (name, checksum) in [(rawUpdate, rawUpdated), ("DataStack", updated)] where !checksum.matches(raised) {
            throw BenchError("update: \(name) read back \(checksum), expected \(raised)")
        }
        return repetition
    }
}
