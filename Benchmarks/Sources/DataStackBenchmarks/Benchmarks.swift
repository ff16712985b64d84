import DataStack
import Foundation
import GRDB

/// `datastack-benchmarks [--n N] [--repetitions R] [--quick]`: DataStack side by
/// side with raw SQLite and GRDB on the same data (see Benchmarks/README.md).
@main
struct Benchmarks {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            if arguments.first == MemoryBenchmark.childFlag {
                try await MemoryBenchmark.child(Array(arguments.dropFirst()))
                return
            }
            if arguments.first == HistoryBenchmark.childFlag {
                try await HistoryBenchmark.child(Array(arguments.dropFirst()))
                return
            }
            if arguments.first == MigrationBenchmark.childFlag {
                try MigrationBenchmark.child(Array(arguments.dropFirst()))
                return
            }
            let options = try Options.parse(arguments)
            try await run(options)
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

    enum Contender: String, CaseIterable {
        case raw = "raw SQLite"
        /// Import only: raw SQLite also writing Core Data's history rows, DataStack's default's like.
        case rawHistory = "raw SQLite + history"
        case grdbCodable = "GRDB Codable"
        case grdbHandWritten = "GRDB hand-written"
        #if FLUENT_CONTENDER
        case fluent = "Fluent"
        #endif
        case dataStack = "DataStack"

        /// Its name on the command line (`--contenders`).
        var flag: String {
            switch self {
            case .raw: "raw"
            case .rawHistory: "raw-history"
            case .grdbCodable: "grdb-codable"
            case .grdbHandWritten: "grdb-hand-written"
            #if FLUENT_CONTENDER
            case .fluent: "fluent"
            #endif
            case .dataStack: "datastack"
            }
        }

        /// Whether it runs the import task only (its rows are still read back and checked).
        var importsOnly: Bool { self == .rawHistory }
    }

    /// One repetition's times and what the reads saw.
    struct Repetition {
        var importTime: Duration
        var fetchTime: Duration
        var faultTime: Duration
        var fetched: Checksum
        var fired: Checksum
        /// DataStack only: the fault task with `includesPropertyValues = false`
        /// (IDs only, as the raw and GRDB contenders fetch them).
        var faultIDsOnlyTime: Duration?
        /// DataStack only: the row cache's hits and misses while the fault task fired its faults.
        var faultCache: (hits: Int, misses: Int)?
        /// GRDB hand-written only: the fault task reading every row (`fetchAll`) and
        /// "firing" 1% from the fetched records, as DataStack's faults fire from its row cache.
        var faultRowsTime: Duration?
        /// Fluent only: the import with one `[Model].create(on:)` per chunk instead of one `create(on:)` per model.
        var bulkImportTime: Duration?
        /// DataStack only: the import with persistent history off, the like of
        /// the raw and GRDB imports, which write no `ACHANGE` rows.
        var importWithoutHistoryTime: Duration?
        /// Fluent only: the SQLite library it runs on.
        var sqliteVersion: String?
    }

    /// Fraction of faults fired in the fault task: 1%.
    static let fireStride = 100

    static func run(_ options: Options) async throws {
        print(Report.machine())
        print("N = \(options.n), best of \(options.repetitions), chunks of \(options.chunkSize)\n")
        if options.runs("import") || options.runs("fetch") || options.runs("fault") {
            try await runTable(options)
        }
        if options.runs("merge") { try await runMerge(options) }
        if options.runs("memory") { try await runMemory(options) }
        if options.runs("migration") { try await runMigration(options) }
        if options.runs("history") { try await runHistory(options) }
        if options.runs("bulk") { try runBulk(options) }
        if options.runs("insert") { try runBatchInsert(options) }
        if options.runs("window") {
            let result = try await WindowBenchmark.run(rows: options.n, chunkSize: options.chunkSize)
            print(Report.table(["window: N imported, a list of the 10 best on main", "merges", "merges' total without the list",
                                "with the list", "the list's share", "list changes"],
                               [[String(result.rows), String(result.merges), Report.milliseconds(result.withoutList),
                                 Report.milliseconds(result.withList), Report.milliseconds(result.withList - result.withoutList),
                                 String(result.listChanges)]]))
            print("")
        }
        if options.runs("tomany") {
            let result = try ToManyPredicateBenchmark.run(companies: max(100, options.n / 10), repetitions: options.repetitions)
            print(Report.table(["tomany: \(result.companies) companies, 10 updates and 3 of 50 tags each", "matches",
                                "raw SQLite (EXISTS by hand)", "DataStack", "× raw"],
                               result.rows.map { [$0.task, String($0.matches), Report.milliseconds($0.raw), Report.milliseconds($0.dataStack),
                                                  String(format: "%.2f×", $0.dataStack.seconds / max($0.raw.seconds, 1e-9))] }))
            print("")
        }
        if options.runs("tomany-build") {
            let rows = try ToManyBuildBenchmark.run(sizes: options.toManyBuildSizes, repetitions: options.repetitions)
            print(Report.table(["tomany-build: update.company = company, n times in one context", "n", "build", "per update",
                                "× the previous n's time (2× = linear)", "save"],
                               rows.enumerated().map { offset, row in
                                   let previous = offset > 0 && rows[offset - 1].owner == row.owner ? rows[offset - 1] : nil
                                   let ratio = previous.map { String(format: "%.2f× for %.0f× n", row.build.seconds / max($0.build.seconds, 1e-9),
                                                                     Double(row.updates) / Double($0.updates)) } ?? "–"
                                   return [row.owner, String(row.updates), Report.milliseconds(row.build),
                                           Report.milliseconds(row.build / row.updates), ratio, Report.milliseconds(row.save)]
                               }))
            print("")
        }
        if options.runs("pending") {
            let result = try await PendingChangesBenchmark.run(stored: options.n, chunkSize: options.chunkSize, repetitions: options.repetitions)
            func ratio(_ a: Duration, _ b: Duration) -> String { String(format: "%.2f×", a.seconds / max(b.seconds, 1e-9)) }
            print(Report.table(["pending: N stored, 1,000 inserted + 1,000 updated unsaved", "no pending changes", "pending changes", "× (target ≤ 3×)"],
                               [["fetch sorted, limit 20 (N = \(result.stored))", Report.milliseconds(result.fetchClean),
                                 Report.milliseconds(result.fetchPending), ratio(result.fetchPending, result.fetchClean)],
                                ["count", Report.milliseconds(result.countClean), Report.milliseconds(result.countPending),
                                 ratio(result.countPending, result.countClean)]]))
            print("")
        }
        if options.runs("readers") {
            // Reads in parallel gain only from idle cores: say how busy the machine was.
            let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ")
            let rows = try await ReadersBenchmark.run(stored: options.n, importing: options.readersImportRows,
                                                      window: options.readersWindow, chunkSize: options.chunkSize)
            func rate(_ perSecond: Double) -> String { String(format: "%.0f", perSecond) }
            print("readers: load average before (1, 5, 15 min): \(load ?? "unknown"); \(ProcessInfo.processInfo.activeProcessorCount) cores")
            print(Report.table(["readers: N = \(options.n) stored, fetch 100 by price, loaded", "reader connections", "window",
                                "main reads/s", "private 1 reads/s", "private 2 reads/s", "total reads/s", "import"],
                               rows.map { row in
                                   [row.importing ? "importing \(options.readersImportRows) rows" : "no import", String(row.readers),
                                    Report.milliseconds(row.window)]
                                       + row.readsPerSecond.map(rate) + [rate(row.readsPerSecond.reduce(0, +)),
                                                                        row.importing ? Report.milliseconds(row.importTime) : "–"]
                               }))
            print("")
        }
        if options.runs("upsert") {
            let result = try await UpsertBenchmark.run(rows: options.upsertRows, chunkSize: options.chunkSize, repetitions: options.repetitions)
            func ratio(_ duration: Duration) -> String { String(format: "%.2f×", duration.seconds / max(result.raw.seconds, 1e-9)) }
            print(Report.table(["upsert: N imported, N/2 stored before", "raw SQLite (INSERT … ON CONFLICT DO UPDATE)",
                                "DataStack performImport(upserting:)", "× raw", "DataStack BatchInsertRequest (object trump)", "× raw",
                                "the same, history not tracked", "× raw"],
                               [[String(result.rows), Report.milliseconds(result.raw), Report.milliseconds(result.dataStack),
                                 ratio(result.dataStack), Report.milliseconds(result.batchInsert), ratio(result.batchInsert),
                                 Report.milliseconds(result.batchInsertUntracked), ratio(result.batchInsertUntracked)]]))
            print("")
        }
        if options.runs("search") { try await runSearch(options) }
        if options.runs("sync-import") {
            let result = try await SyncImportBenchmark.run(rows: options.n, chunkSize: options.chunkSize, repetitions: options.repetitions)
            print(SyncImportBenchmark.report(result, repetitions: options.repetitions))
            print("")
        }
    }

    // MARK: - Full-text search

    static func runSearch(_ options: Options) async throws {
        if let only = options.searchImportOnly {
            let imports = try await SearchBenchmark.runImports(rows: options.searchRows, chunkSize: options.chunkSize,
                                                               repetitions: options.repetitions, plain: only.contains("plain"),
                                                               indexed: only.contains("indexed"))
            func time(_ duration: Duration?) -> String { duration.map(Report.milliseconds) ?? "—" }
            let ratio = imports.plain.flatMap { plain in imports.indexed.map { String(format: "%.2f×", $0.seconds / max(plain.seconds, 1e-9)) } }
            print(Report.table(["search: import of N through the stack", "name not indexed", "name indexed", "× (target ≤ 1.5×)"],
                               [[String(options.searchRows), time(imports.plain), time(imports.indexed), ratio ?? "—"]]))
            print("")
            return
        }
        let result = try await SearchBenchmark.run(rows: options.searchRows, chunkSize: options.chunkSize, repetitions: options.repetitions,
                                                   imports: options.searchImports)
        func ratio(_ a: Duration, _ b: Duration) -> String { String(format: "%.2f×", a.seconds / max(b.seconds, 1e-9)) }
        print("search: \(result.rows) companies, store and index built untimed in \(Report.milliseconds(result.build)); best of \(options.repetitions)")
        let headers = ["search: query (N = \(result.rows))", "matches", "raw FTS5 MATCH", "DataStack MATCHES[search]", "× raw",
                       "DataStack CONTAINS[cd] (scan)", "scan ÷ search"]
        let rows = result.queries.map { row -> [String] in
            let query: String = row.query.label + ": " + row.query.search
            return [query, String(row.matches), Report.milliseconds(row.raw), Report.milliseconds(row.search), ratio(row.search, row.raw),
                    Report.milliseconds(row.scan), ratio(row.scan, row.search)]
        }
        print(Report.table(headers, rows))
        let ranked = result.ranked
        print(Report.table(["search: most relevant \(ranked.limit) for \(ranked.query)", "raw FTS5 ORDER BY rank", "DataStack relevance sort", "× raw"],
                           [["limit \(ranked.limit)", Report.milliseconds(ranked.raw), Report.milliseconds(ranked.dataStack),
                             ratio(ranked.dataStack, ranked.raw)]]))
        if let imports = result.imports {
            print(Report.table(["search: import of N through the stack", "name not indexed", "name indexed", "× (target ≤ 1.5×)"],
                               [[String(result.rows), Report.milliseconds(imports.plain), Report.milliseconds(imports.indexed),
                                 ratio(imports.indexed, imports.plain)]]))
        }
        print("")
    }

    // MARK: - Aggregates and batch requests

    static func runBulk(_ options: Options) throws {
        let results = try BulkBenchmark.run(rows: options.bulkRows, repetitions: options.repetitions)
        print(Report.table(["bulk task", "raw SQLite", "DataStack", "× raw", "DataStack, history tracked", "× raw"],
                           results.map { result in
                               func ratio(_ time: Duration) -> String {
                                   String(format: "%.2f×", time.seconds / max(result.raw.seconds, 1e-9))
                               }
                               return [result.task, Report.milliseconds(result.raw), Report.milliseconds(result.dataStack),
                                       ratio(result.dataStack), result.dataStackWithHistory.map(Report.milliseconds) ?? "—",
                                       result.dataStackWithHistory.map(ratio) ?? "—"]
                           }))
        print("")
    }

    // MARK: - Batch insert

    static func runBatchInsert(_ options: Options) throws {
        let result = try BatchInsertBenchmark.run(rows: options.insertRows, repetitions: options.repetitions,
                                                  forms: options.insertForms.isEmpty ? BatchInsertBenchmark.forms : options.insertForms)
        guard let raw = result.timings.first?.timing else { return }
        let hasRaw = options.insertForms.isEmpty || options.insertForms.contains("raw")
        func ratio(_ time: Duration, _ raw: Duration) -> String {
            hasRaw ? String(format: "%.2f×", time.seconds / max(raw.seconds, 1e-9)) : "–"
        }
        print(Report.table(["insert: \(result.rows) rows in one transaction", "wall", "× raw", "thread CPU", "× raw"],
                           result.timings.map { contender, timing in
                               [contender, Report.milliseconds(timing.wall), ratio(timing.wall, raw.wall),
                                Report.milliseconds(timing.cpu), ratio(timing.cpu, raw.cpu)]
                           }))
        print("")
    }

    // MARK: - History

    static func runHistory(_ options: Options) async throws {
        let cost = try await HistoryBenchmark.importCost(rows: options.n, chunkSize: options.chunkSize, repetitions: options.repetitions)
        func extra(_ time: Duration) -> String {
            String(format: "%+.1f %%", (time.seconds / max(cost.untracked.seconds, 1e-9) - 1) * 100)
        }
        print(Report.table(["history: N imported", "neither", "history tracked", "cost", "tracked + watched (stackDefaults)", "cost"],
                           [[String(cost.rows), Report.milliseconds(cost.untracked), Report.milliseconds(cost.trackedOnly),
                             extra(cost.trackedOnly), Report.milliseconds(cost.tracked), extra(cost.tracked)]]))
        let latency = try await HistoryBenchmark.latency(saves: options.historySaves, interval: .milliseconds(20))
        print(Report.table(["cross-process: saves (10 updated + 1 inserted, 20 ms apart)", "median", "p99", "max"],
                           [[String(latency.saves), Report.milliseconds(latency.percentile(0.5)),
                             Report.milliseconds(latency.percentile(0.99)), Report.milliseconds(latency.samples.last ?? .zero)]]))
        let idle = try await HistoryBenchmark.idleCost(seconds: options.idleSeconds)
        func share(_ cpu: Duration) -> String {
            String(format: "%.1f ms (%.3f %% of a core)", cpu.seconds * 1000, cpu.seconds / idle.seconds * 100)
        }
        print(Report.table(["idle: seconds", "CPU, defaults (history + watching)", "CPU, neither"],
                           [[String(format: "%.0f", idle.seconds), share(idle.watching), share(idle.notWatching)]]))
        print("")
    }

    // MARK: - Migration

    static func runMigration(_ options: Options) async throws {
        let result = try MigrationBenchmark.run(rows: options.migrationRows, repetitions: options.repetitions)
        let small = try await MigrationBenchmark.measureMemory(rows: max(1, options.migrationRows / 10))
        let large = try await MigrationBenchmark.measureMemory(rows: options.migrationRows)
        print(Report.table(["migration: rows, one attribute added", "raw SQLite (copy + ALTER TABLE ADD COLUMN)", "DataStack", "× raw"],
                           [[String(result.rows), Report.milliseconds(result.raw), Report.milliseconds(result.dataStack),
                             String(format: "%.2f×", result.dataStack.seconds / max(result.raw.seconds, 1e-9))]]))
        func growth(_ memory: MigrationBenchmark.Memory) -> String {
            String(format: "%.1f MiB", Double(memory.peakKiB - memory.baselineKiB) / 1024)
        }
        print(Report.table(["migration memory: rows", "peak RSS before", "peak RSS after", "growth"],
                           [small, large].map { [String($0.rows), String(format: "%.1f MiB", Double($0.baselineKiB) / 1024),
                                                 String(format: "%.1f MiB", Double($0.peakKiB) / 1024), growth($0)] }))
        // Growths of a few hundred KiB make a ratio meaningless: flat means both stay small.
        print(String(format: "migration peak RSS growth: %@ for %d rows, %@ for %d rows (flat: no growth with the row count)\n",
                     growth(large), large.rows, growth(small), small.rows))
    }

    // MARK: - Import, fetch, fault

    static func runTable(_ options: Options) async throws {
        let rows = TickerValues.rows(options.n)
        let contenders = Contender.allCases.filter { options.runs(contender: $0.flag) }
        // A short untimed pass first, so no contender pays for first use (code, file system, allocator).
        let warmUp = Array(rows.prefix(1_000))
        for contender in contenders { _ = try await runRepetition(contender, rows: warmUp, options: options) }
        PageFaults.reset()
        var best: [Contender: Repetition] = [:]
        for _ in 1...options.repetitions {
            for contender in contenders {
                let repetition = try await runRepetition(contender, rows: rows, options: options)
                guard var current = best[contender] else { best[contender] = repetition; continue }
                current.importTime = min(current.importTime, repetition.importTime)
                current.fetchTime = min(current.fetchTime, repetition.fetchTime)
                current.faultTime = min(current.faultTime, repetition.faultTime)
                if let idsOnly = repetition.faultIDsOnlyTime {
                    current.faultIDsOnlyTime = min(current.faultIDsOnlyTime ?? idsOnly, idsOnly)
                }
                if let rowsTime = repetition.faultRowsTime {
                    current.faultRowsTime = min(current.faultRowsTime ?? rowsTime, rowsTime)
                }
                if let bulk = repetition.bulkImportTime {
                    current.bulkImportTime = min(current.bulkImportTime ?? bulk, bulk)
                }
                if let withoutHistory = repetition.importWithoutHistoryTime {
                    current.importWithoutHistoryTime = min(current.importWithoutHistoryTime ?? withoutHistory, withoutHistory)
                }
                best[contender] = current
            }
        }
        try check(best, n: options.n)
        var measurements: [Measurement] = []
        for task in ["import", "fetch", "fault"] where options.runs(task) {
            for contender in contenders where task == "import" || !contender.importsOnly {
                guard let repetition = best[contender] else { continue }
                let time = task == "import" ? repetition.importTime : task == "fetch" ? repetition.fetchTime : repetition.faultTime
                // GRDB hand-written faults both ways: by ID, and from fetched rows.
                let label = task == "fault" && repetition.faultRowsTime != nil ? contender.rawValue + " (IDs)" : contender.rawValue
                measurements.append(Measurement(task: task, contender: label, best: time, objects: options.n))
                if task == "import", let bulk = repetition.bulkImportTime {
                    measurements.append(Measurement(task: task, contender: contender.rawValue + " (bulk [Model].create)",
                                                    best: bulk, objects: options.n))
                }
                if task == "import", let withoutHistory = repetition.importWithoutHistoryTime {
                    measurements.append(Measurement(task: task, contender: contender.rawValue + " (history off)",
                                                    best: withoutHistory, objects: options.n))
                }
                if task == "fault", let rowsTime = repetition.faultRowsTime {
                    measurements.append(Measurement(task: task, contender: contender.rawValue + " (rows)", best: rowsTime, objects: options.n))
                }
                if task == "fault", let idsOnly = repetition.faultIDsOnlyTime {
                    measurements.append(Measurement(task: task, contender: contender.rawValue + " (includesPropertyValues = false)",
                                                    best: idsOnly, objects: options.n))
                }
            }
        }
        print(Report.results(measurements, repetitions: options.repetitions))
        if let withHistory = best[.rawHistory]?.importTime, let dataStack = best[.dataStack]?.importTime {
            print(String(format: "(import like against like: DataStack, history tracked, ÷ raw SQLite + history = %.2f×)",
                         dataStack.seconds / max(withHistory.seconds, 1e-9)))
        }
        print("(fault: N fetched as faults or IDs, then 1% fired or read by ID; \"(rows)\": all N rows fetched, 1% read from them)")
        #if FLUENT_CONTENDER
        if let version = best[.fluent]?.sqliteVersion {
            print("(Fluent: one create(on:) per model, on sqlite-nio's own SQLite \(version); the others on the system's \(Report.sqliteVersion))")
        }
        #endif
        if let cache = best[.dataStack]?.faultCache {
            print(String(format: "(DataStack fault: row cache %d hits, %d misses while firing, %.1f %% hit rate)",
                         cache.hits, cache.misses, 100 * Double(cache.hits) / Double(max(1, cache.hits + cache.misses))))
        }
        print("")
        if let pageFaults = PageFaults.table() {
            print(pageFaults)
            print("")
        }
        if options.runs("fault"), options.runs(contender: Contender.dataStack.flag), options.runs(contender: Contender.grdbHandWritten.flag) {
            // Empty where the C library does not count its heap.
            let memory = try await ObjectMemory.measure(rows, chunkSize: options.chunkSize)
            if !memory.isEmpty {
                print(Report.table(["memory per fetched object (N = \(options.n), fetch result alive)", "heap bytes per object"],
                                   memory.map { [$0.way, String(format: "%.0f", $0.bytesPerObject)] }))
                print("")
            }
        }
    }

    /// Every contender reads the same values back.
    static func check(_ results: [Contender: Repetition], n: Int) throws {
        guard let raw = results[.raw] else { return }
        for (contender, result) in results {
            // Which 1% the fault task fires depends on the store's row order (DataStack
            // numbers a chunk's rows in its own order), so only its count is compared.
            guard contender.importsOnly || result.fired.rows == raw.fired.rows else {
                throw BenchError("\(contender.rawValue) fault fired \(result.fired.rows) objects, raw SQLite read \(raw.fired.rows)")
            }
            let mine = result.fetched, theirs = raw.fetched
            let same = mine.rows == theirs.rows && mine.characters == theirs.characters && mine.volume == theirs.volume
                && abs(mine.price - theirs.price) <= 1e-9 * max(1, abs(theirs.price))
                && abs(mine.time - theirs.time) <= 1e-9 * max(1, abs(theirs.time))
            guard same else { throw BenchError("\(contender.rawValue) fetch read \(mine), raw SQLite read \(theirs)") }
        }
        guard raw.fetched.rows == n else { throw BenchError("raw SQLite fetched \(raw.fetched.rows) rows, expected \(n)") }
    }

    static func time<T>(_ body: () async throws -> T) async rethrows -> (Duration, T) {
        let start = ContinuousClock.now
        let value = try await body()
        return (ContinuousClock.now - start, value)
    }

    /// Import into a fresh file, then fetch and fault each on a fresh connection to it.
    static func runRepetition(_ contender: Contender, rows: [TickerValues], options: Options) async throws -> Repetition {
        let directory = ScratchDirectory(contender == .dataStack ? "datastack" : "sqlite")
        let chunk = options.chunkSize
        switch contender {
        case .raw:
            let path = directory.file("raw.sqlite").path
            let writer = try RawSQLite(path: path)
            let importTime = try await PageFaults.time("import, raw SQLite") { try writer.insert(rows, chunkSize: chunk) }.0
            let reader = try RawSQLite(path: path)
            let (fetchTime, fetched) = try await PageFaults.time("fetch, raw SQLite") { try reader.fetchAll() }
            let faulter = try RawSQLite(path: path)
            let (faultTime, fired) = try await PageFaults.time("fault, raw SQLite") { try faulter.fetchIDsThenRows(every: fireStride) }
            return Repetition(importTime: importTime, fetchTime: fetchTime, faultTime: faultTime, fetched: fetched, fired: fired)

        case .rawHistory:
            // Fetched and faulted by no task: its rows and history are read back untimed, for the check.
            let empty = directory.file("empty.sqlite")
            try RawSQLiteWithHistory.makeEmptyStore(at: empty)
            let writer = try RawSQLiteWithHistory(copying: empty, to: directory.file("raw-history.sqlite"))
            let importTime = try await PageFaults.time("import, raw SQLite + history") { try writer.insert(rows, chunkSize: chunk) }.0
            let fetched = try writer.check(chunks: (rows.count + chunk - 1) / chunk)
            return Repetition(importTime: importTime, fetchTime: .zero, faultTime: .zero, fetched: fetched, fired: Checksum())

        case .grdbCodable, .grdbHandWritten:
            let record: GRDBBench.Record = contender == .grdbCodable ? .codable : .handWritten
            let path = directory.file("grdb.sqlite").path
            let writer = try GRDBBench.open(path)
            let importTime = try await PageFaults.time("import, \(contender.rawValue)") { try GRDBBench.insert(rows, chunkSize: chunk, as: record, into: writer) }.0
            try writer.close()
            let reader = try GRDBBench.open(path)
            let (fetchTime, fetched) = try await PageFaults.time("fetch, \(contender.rawValue)") { try GRDBBench.fetchAll(as: record, from: reader) }
            try reader.close()
            let faulter = try GRDBBench.open(path)
            let (faultTime, fired) = try await PageFaults.time("fault, \(contender.rawValue)\(record == .handWritten ? " (IDs)" : "")") {
                try GRDBBench.fetchIDsThenRecords(every: fireStride, as: record, from: faulter)
            }
            try faulter.close()
            var faultRowsTime: Duration?
            if record == .handWritten {
                let rowFaulter = try GRDBBench.open(path)
                let (rowsTime, firedFromRows) = try await PageFaults.time("fault, \(contender.rawValue) (rows)") {
                    try GRDBBench.fetchRecordsThenRead(every: fireStride, from: rowFaulter)
                }
                try rowFaulter.close()
                guard firedFromRows == fired else {
                    throw BenchError("GRDB hand-written read \(firedFromRows) from fetched rows, \(fired) by ID")
                }
                faultRowsTime = rowsTime
            }
            return Repetition(importTime: importTime, fetchTime: fetchTime, faultTime: faultTime, fetched: fetched, fired: fired,
                              faultRowsTime: faultRowsTime)

        #if FLUENT_CONTENDER
        case .fluent:
            let path = directory.file("fluent.sqlite").path
            let writer = try await FluentBench.Connection.open(path)
            let importTime = try await time { try await FluentBench.insert(rows, chunkSize: chunk, into: writer) }.0
            try await writer.close()
            let bulkPath = directory.file("fluent-bulk.sqlite").path
            let bulkWriter = try await FluentBench.Connection.open(bulkPath)
            let bulkImportTime = try await time { try await FluentBench.insertInBulk(rows, chunkSize: chunk, into: bulkWriter) }.0
            let bulkCount = try await FluentBench.count(in: bulkWriter)
            try await bulkWriter.close()
            guard bulkCount == rows.count else { throw BenchError("Fluent bulk create stored \(bulkCount) rows of \(rows.count)") }
            let reader = try await FluentBench.Connection.open(path)
            let (fetchTime, fetched) = try await time { try await FluentBench.fetchAll(from: reader) }
            try await reader.close()
            let faulter = try await FluentBench.Connection.open(path)
            let (faultTime, fired) = try await time { try await FluentBench.fetchIDsThenModels(every: fireStride, from: faulter) }
            try await faulter.close()
            return Repetition(importTime: importTime, fetchTime: fetchTime, faultTime: faultTime, fetched: fetched, fired: fired,
                              bulkImportTime: bulkImportTime, sqliteVersion: faulter.sqliteVersion)
        #endif

        case .dataStack:
            let url = directory.file("DataStack.sqlite")
            // The time to import `rows` into a new stack on `url`, every chunk merged into main.
            func timedImport(into url: URL, options: StoreOptions = .stackDefaults, phase: String) async throws -> Duration {
                let (stack, watcher) = try await DataStackBench.open(url, options: options)
                let (duration, chunks) = try await PageFaults.time(phase) { try await DataStackBench.insert(rows, chunkSize: chunk, into: stack) }
                try await watcher.wait(for: chunks)
                return duration
            }
            let importTime = try await timedImport(into: url, phase: "import, DataStack")
            // The stack's defaults track history (an `ACHANGE` row per object); the like of the others does not.
            var importWithoutHistoryTime: Duration?
            if options.importsWithoutHistory {
                var withoutHistory = StoreOptions.stackDefaults
                withoutHistory.persistentHistoryTracking = false
                withoutHistory.remoteChangeNotifications = false
                importWithoutHistoryTime = try await timedImport(into: directory.file("DataStackWithoutHistory.sqlite"), options: withoutHistory,
                                                                 phase: "import, DataStack (history off)")
            }
            let (reader, _) = try await DataStackBench.open(url)
            let (fetchTime, fetched) = try await PageFaults.time("fetch, DataStack") { try await DataStackBench.fetchAll(in: reader.mainContext) }
            let (faulter, _) = try await DataStackBench.open(url)
            let (faultTime, (fired, cache)) = try await PageFaults.time("fault, DataStack") {
                try await DataStackBench.fetchFaultsThenFire(every: fireStride, in: faulter.mainContext)
            }
            let (idFaulter, _) = try await DataStackBench.open(url)
            let (faultIDsOnlyTime, (firedByID, _)) = try await PageFaults.time("fault, DataStack (includesPropertyValues = false)") {
                try await DataStackBench.fetchIDFaultsThenFire(every: fireStride, in: idFaulter.mainContext)
            }
            guard firedByID.rows == fired.rows else {
                throw BenchError("DataStack fired \(firedByID.rows) faults fetched by ID, \(fired.rows) fetched with their rows")
            }
            return Repetition(importTime: importTime, fetchTime: fetchTime, faultTime: faultTime, fetched: fetched, fired: fired,
                              faultIDsOnlyTime: faultIDsOnlyTime, faultCache: cache, importWithoutHistoryTime: importWithoutHistoryTime)
        }
    }

    // MARK: - Merge

    static func runMerge(_ options: Options) async throws {
        var results: [MergeBenchmark.Result] = []
        for size in options.mergeSizes {
            results.append(try await MergeBenchmark.run(saveSize: size, registered: options.mergeRegistered,
                                                        repetitions: options.repetitions, chunkSize: options.chunkSize))
        }
        // A batch update reaches main as a save does; up to the bulk task's row count (1M by default).
        var batchResults: [MergeBenchmark.Result] = []
        let batchSizes = options.mergeSizes + (options.bulkRows > options.mergeSizes.max() ?? 0 ? [options.bulkRows] : [])
        for size in batchSizes {
            batchResults.append(try await MergeBenchmark.run(saveSize: size, registered: options.mergeRegistered, change: .batchUpdate,
                                                             repetitions: options.repetitions, chunkSize: options.chunkSize))
        }
        report(results)
        report(batchResults)
    }

    private static func report(_ results: [MergeBenchmark.Result]) {
        let change = results.first?.change.rawValue ?? "save"
        print(Report.table(["merge: K changed by one \(change)", "registered in main", "refreshed", "merge (settled)",
                            "StackDidMerge.duration (live)", "first read of the shown objects",
                            "change → notification", "of which the change"],
                           results.map { [String($0.saveSize), String($0.registered), String($0.refreshed),
                                          Report.milliseconds($0.steadyMerge), Report.milliseconds($0.mergeDuration),
                                          Report.milliseconds($0.firstRead), Report.milliseconds($0.wallTime),
                                          Report.milliseconds($0.saveTime)] }))
        if let first = results.first, let last = results.last, results.count > 1 {
            print(String(format: "merge after a %@, K=%d vs K=%d: settled %.2f×, live StackDidMerge.duration %.2f×, change → notification %.2f×\n",
                         change, last.saveSize, first.saveSize,
                         last.steadyMerge.seconds / max(first.steadyMerge.seconds, 1e-9),
                         last.mergeDuration.seconds / max(first.mergeDuration.seconds, 1e-9),
                         last.wallTime.seconds / max(first.wallTime.seconds, 1e-9)))
        }
    }

    // MARK: - Memory

    static func runMemory(_ options: Options) async throws {
        var results: [MemoryBenchmark.Result] = []
        for objects in options.memorySizes {
            results.append(try await MemoryBenchmark.measure(objects: objects, chunkSize: options.chunkSize))
        }
        func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }
        print(Report.table(["memory: N imported (child process)", "RSS after setup", "peak RSS (VmHWM)", "import time"],
                           results.map { [String($0.objects), mib($0.baselineKiB), mib($0.peakKiB), String(format: "%.2f s", $0.seconds)] }))
        if let first = results.first, let last = results.last, results.count > 1 {
            print(String(format: "peak RSS N=%d vs N=%d: %.2f×", last.objects, first.objects,
                         Double(last.peakKiB) / Double(max(first.peakKiB, 1))))
        }
    }
}
