/// The command line: `datastack-benchmarks [--n N] [--repetitions R] [--quick]`.
struct Options: Sendable {
    /// Objects per import, fetch and fault task.
    var n = 100_000
    /// Repetitions of each measurement; the best one is reported.
    var repetitions = 3
    /// Save sizes of the merge task.
    var mergeSizes = [10, 1_000, 100_000]
    /// Objects the main context has registered during the merge task.
    var mergeRegistered = 10
    /// Import sizes of the memory task (each in a child process).
    var memorySizes = [100_000, 1_000_000]
    /// Objects per saved chunk in the import and memory tasks.
    var chunkSize = 10_000
    /// Rows of the store the migration task migrates (its memory check also runs a tenth of it).
    var migrationRows = 1_000_000
    /// Rows of the store the aggregate and batch tasks work on.
    var bulkRows = 1_000_000
    /// Rows the upsert task imports (half of them stored before).
    var upsertRows = 100_000
    /// Rows the insert task writes with one batch insert.
    var insertRows = 100_000
    /// Which ways the insert task runs (all when empty): for counting one alone (Scripts/instruction-counts.sh --batch).
    var insertForms: Set<String> = []
    /// To-many sizes of the tomany-build task (each built through the inverse in one context).
    var toManyBuildSizes = [10_000, 20_000, 40_000]
    /// Saves the other process makes in the history task's latency measurement.
    var historySaves = 200
    /// Seconds the history task watches an idle store.
    var idleSeconds = 5.0
    /// Rows the importer writes while the readers task's contexts fetch.
    var readersImportRows = 100_000
    /// Wall time of each of the readers task's measurements.
    var readersWindow = Duration.seconds(2)
    /// Companies in the search task's store, and imported by its index-cost measurement.
    var searchRows = 1_000_000
    /// Also measure the search task's import with and without the index; off
    /// for the instruction-count script, which counts the queries alone.
    var searchImports = true
    /// Run only the search task's imports, the plain one, the indexed one or both (nil: the whole task):
    /// for counting each alone (Scripts/instruction-counts.sh --search-import).
    var searchImportOnly: Set<String>?
    /// Run only these tasks (all when empty).
    var tasks: Set<String> = []
    /// Run only these contenders in the import, fetch and fault tasks (all when empty);
    /// for profiling one of them.
    var contenders: Set<String> = []
    /// Also import with persistent history off (DataStack); off for the
    /// instruction-count script, which counts the default import alone.
    var importsWithoutHistory = true

    /// The quick settings CI uses: small sizes, one repetition.
    static let quick = Options(n: 2_000, repetitions: 1, mergeSizes: [10, 1_000], mergeRegistered: 10,
                               memorySizes: [2_000, 20_000], chunkSize: 10_000, migrationRows: 20_000,
                               bulkRows: 20_000, upsertRows: 4_000, insertRows: 10_000, toManyBuildSizes: [1_000, 2_000, 4_000], historySaves: 20, idleSeconds: 1,
                               readersImportRows: 10_000, readersWindow: .milliseconds(300), searchRows: 20_000, tasks: [], contenders: [])

    static let usage = """
        usage: datastack-benchmarks [--n N] [--repetitions R] [--quick] [--tasks import,fetch,fault,merge,memory,migration,history,bulk,upsert,insert,pending,tomany,tomany-build,window,readers,search,sync-import]
          --n N            objects per import/fetch/fault task (default 100000)
          --repetitions R  repetitions; the best time is reported (default 3)
          --quick          N = 2000, merge K ≤ 1000, memory N ≤ 20000, 20 history saves, 1 repetition (for CI)
          --tasks LIST     run only the named tasks
          --contenders LIST  only raw, raw-history (raw SQLite also writing Core Data's history; import only), grdb-codable, grdb-hand-written, fluent (a build with DATASTACK_BENCH_FLUENT=1) and/or datastack
          --merge-k LIST     save sizes of the merge task (default 10,1000,100000)
          --migration-rows N rows of the store the migration task migrates (default 1000000)
          --history-saves N  saves by the other process in the history task (default 200)
          --bulk-rows N      rows of the store the bulk task (aggregate, batch update, batch delete) uses (default 1000000)
          --upsert-rows N    rows the upsert task imports, half of them stored before (default 100000)
          --insert-rows N    rows the insert task writes with one batch insert (default 100000; --quick: 10000)
          --insert-forms LIST  only these of the insert task's ways: raw, handler, objects, tracked
          --readers-import-rows N  rows imported while the readers task fetches (default 100000; --quick: 10000);
                             its 3 contexts fetch for 2 s (--quick: 0.3 s) over N stored rows
          --tomany-build LIST  to-many sizes of the tomany-build task (default 10000,20000,40000; --quick: 1000,2000,4000)
          --search-rows N    companies in the search task's store, also imported with and without the index
                             (default 1000000; --quick: 20000)
          --no-history-off-import  skip DataStack's second import, with persistent history off
          --history-off-import     run it (the default; after --no-history-off-import, to override it)
          --no-search-import  skip the search task's imports with and without the index
          --search-import-only LIST  run only the search task's imports: plain, indexed (no store, no queries)
        """

    /// Parses the arguments; `--quick` first sets the quick defaults, later flags override them.
    static func parse(_ arguments: [String]) throws(UsageError) -> Options {
        var options = arguments.contains("--quick") ? Options.quick : Options()
        var rest = arguments[...]
        func number(after flag: String) throws(UsageError) -> Int {
            guard let text = rest.popFirst(), let value = Int(text.replacingOccurrences(of: "_", with: "")), value > 0 else {
                throw UsageError(message: "\(flag) needs a positive whole number")
            }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick": continue
            case "--n": options.n = try number(after: argument)
            case "--repetitions": options.repetitions = try number(after: argument)
            case "--tasks":
                guard let list = rest.popFirst() else { throw UsageError(message: "--tasks needs a list") }
                options.tasks = Set(list.split(separator: ",").map(String.init))
                let unknown = options.tasks.subtracting(["import", "fetch", "fault", "merge", "memory", "migration", "history", "bulk", "upsert", "insert", "pending", "tomany", "tomany-build", "window", "readers", "search", "sync-import"])
                if !unknown.isEmpty { throw UsageError(message: "unknown task \(unknown.sorted().joined(separator: ", "))") }
            case "--contenders":
                guard let list = rest.popFirst() else { throw UsageError(message: "--contenders needs a list") }
                options.contenders = Set(list.split(separator: ",").map(String.init))
                let unknown = options.contenders.subtracting(Benchmarks.Contender.allCases.map(\.flag))
                if unknown == ["fluent"] {
                    throw UsageError(message: "Fluent is a contender only in a build with DATASTACK_BENCH_FLUENT=1 (see Benchmarks/README.md)")
                }
                if !unknown.isEmpty { throw UsageError(message: "unknown contender \(unknown.sorted().joined(separator: ", "))") }
            case "--merge-k":
                guard let list = rest.popFirst() else { throw UsageError(message: "--merge-k needs a list") }
                let sizes = list.split(separator: ",").compactMap { Int($0.replacingOccurrences(of: "_", with: "")) }
                guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }) else { throw UsageError(message: "--merge-k needs positive whole numbers") }
                options.mergeSizes = sizes
            case "--tomany-build":
                guard let list = rest.popFirst() else { throw UsageError(message: "--tomany-build needs a list") }
                let sizes = list.split(separator: ",").compactMap { Int($0.replacingOccurrences(of: "_", with: "")) }
                guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }) else { throw UsageError(message: "--tomany-build needs positive whole numbers") }
                options.toManyBuildSizes = sizes
            case "--migration-rows": options.migrationRows = try number(after: argument)
            case "--history-saves": options.historySaves = try number(after: argument)
            case "--bulk-rows": options.bulkRows = try number(after: argument)
            case "--upsert-rows": options.upsertRows = try number(after: argument)
            case "--insert-rows": options.insertRows = try number(after: argument)
            case "--insert-forms":
                guard let list = rest.popFirst() else { throw UsageError(message: "--insert-forms needs a list") }
                options.insertForms = Set(list.split(separator: ",").map(String.init))
                let unknown = options.insertForms.subtracting(BatchInsertBenchmark.forms)
                if !unknown.isEmpty { throw UsageError(message: "unknown insert form \(unknown.sorted().joined(separator: ", "))") }
            case "--readers-import-rows": options.readersImportRows = try number(after: argument)
            case "--search-rows": options.searchRows = try number(after: argument)
            case "--no-search-import": options.searchImports = false
            case "--search-import-only":
                guard let list = rest.popFirst() else { throw UsageError(message: "--search-import-only needs a list") }
                let only = Set(list.split(separator: ",").map(String.init))
                let unknown = only.subtracting(["plain", "indexed"])
                if !unknown.isEmpty || only.isEmpty { throw UsageError(message: "unknown search import \(unknown.sorted().joined(separator: ", "))") }
                options.searchImportOnly = only
            case "--no-history-off-import": options.importsWithoutHistory = false
            case "--history-off-import": options.importsWithoutHistory = true
            case "--help", "-h": throw UsageError(message: "")
            default: throw UsageError(message: "unknown argument \(argument)")
            }
        }
        return options
    }

    func runs(_ task: String) -> Bool { tasks.isEmpty || tasks.contains(task) }

    func runs(contender flag: String) -> Bool { contenders.isEmpty || contenders.contains(flag) }
}

/// A bad command line; the message says what is wrong.
struct UsageError: Error {
    var message: String
}
