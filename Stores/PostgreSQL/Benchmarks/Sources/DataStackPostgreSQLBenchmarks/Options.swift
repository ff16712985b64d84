import Foundation

/// The command line: `datastack-postgresql-benchmarks [--n N] [--repetitions R] [--quick] [--url URL] [--tasks LIST] [--saves S]`.
struct Options: Sendable {
    /// Rows per import, fetch and fault task.
    var n = 100_000
    /// Repetitions of each measurement; the best one is reported.
    var repetitions = 3
    /// An existing server to use instead of starting a private one.
    var url: URL?
    /// Run only these tasks (all when empty).
    var tasks: Set<String> = []
    /// Saves of the merge task.
    var saves = 200
    /// Offline edits on each of the two replicas of the sync-converge task.
    var syncEdits = 10_000
    /// Saves of the sync-latency task with the hub's wake-up (a fifth of them, at least 5, without).
    var syncSaves = 200
    /// Objects of each kind of save of the sync-bytes task.
    var syncObjects = 1_000
    /// How long each contender of the readers task reads.
    var readersSeconds = 2.0
    /// Rows per save (DataStack) or transaction (raw prepared INSERT) of the import task.
    let chunkSize = 1_000
    /// Every how many-th fault (or row by key) the fault task fires: 1 %.
    let fireStride = 100

    static let allTasks = ["import", "fetch", "fault", "update", "batch-update", "readers", "merge",
                           "sync-converge", "sync-latency", "sync-bytes"]

    static let usage = """
        usage: datastack-postgresql-benchmarks [--n N] [--repetitions R] [--quick] [--url postgresql://…] [--tasks import,fetch,fault,update,batch-update,readers,merge,sync-converge,sync-latency,sync-bytes] [--saves S] [--readers-seconds S] [--sync-converge N] [--sync-latency K] [--sync-bytes M]
          --n N            rows per import/fetch/fault/update/batch-update task (default 100000)
          --repetitions R  repetitions; the best time is reported (default 3)
          --quick          N = 2000, 1 repetition, 50 saves (a smoke run)
          --url URL        use this server (its user needs CREATEDB) instead of starting one with initdb/pg_ctl
          --tasks LIST     report only these tasks (fetch, fault and update always import first)
          --saves S        saves of the merge task (default 200, 20 ms apart)
          --readers-seconds S  how long each contender of the readers task reads (default 2; 0.5 with --quick)
          --sync-converge N  runs sync-converge: 2 replicas × N offline edits, time to converge (default 10000; 200 with --quick)
          --sync-latency K   runs sync-latency: K saves with the hub's wake-up, K/5 (at least 5) with a 1 s pull interval
                             alone (default 200; 10 with --quick)
          --sync-bytes M     runs sync-bytes: bytes pushed per change, M objects per kind (default 1000; 100 with --quick)
        The sync-… flags add their task to --tasks (alone: only the sync tasks named run).
        A build with DATASTACK_BENCH_FLUENT=1 (see Package.swift) adds Fluent to the import, fetch and fault tasks.
        """

    func runs(_ task: String) -> Bool { tasks.isEmpty || tasks.contains(task) }

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var explicitN: Int?, explicitRepetitions: Int?, explicitSaves: Int?, explicitReadersSeconds: Double?
        var explicitSync: [String: Int] = [:]
        var iterator = arguments.makeIterator()
        func value(for flag: String) throws -> String {
            guard let value = iterator.next() else { throw UsageError("\(flag) needs a value") }
            return value
        }
        func positive(_ flag: String) throws -> Int {
            let text = try value(for: flag)
            guard let number = Int(text), number > 0 else { throw UsageError("\(flag) needs a positive integer, not \(text)") }
            return number
        }
        var pending: String?
        while let argument = pending ?? iterator.next() {
            pending = nil
            switch argument {
            case "--n": explicitN = try positive(argument)
            case "--repetitions": explicitRepetitions = try positive(argument)
            case "--saves": explicitSaves = try positive(argument)
            case "--sync-converge", "--sync-latency", "--sync-bytes":
                // The value is optional: `--sync-converge` alone keeps the default.
                let task = String(argument.dropFirst(2))
                explicitSync[task] = explicitSync[task] ?? 0
                if let next = iterator.next() {
                    if let number = Int(next.replacingOccurrences(of: "_", with: "")) {
                        guard number > 0 else { throw UsageError("\(argument) needs a positive integer, not \(next)") }
                        explicitSync[task] = number
                    } else {
                        pending = next
                    }
                }
            case "--readers-seconds":
                let text = try value(for: argument)
                guard let seconds = Double(text), seconds > 0, seconds <= 600 else {
                    throw UsageError("--readers-seconds needs a number of seconds above 0 and at most 600, not \(text)")
                }
                explicitReadersSeconds = seconds
            case "--quick":
                options.n = 2_000
                options.repetitions = 1
                options.saves = 50
                options.readersSeconds = 0.5
                options.syncEdits = 200
                options.syncSaves = 10
                options.syncObjects = 100
            case "--url":
                let text = try value(for: argument)
                guard let url = URL(string: text), ["postgresql", "postgres"].contains(url.scheme ?? "") else {
                    throw UsageError("--url needs a postgresql:// URL")
                }
                options.url = url
            case "--tasks":
                options.tasks = Set(try value(for: argument).split(separator: ",").map(String.init))
                if let unknown = options.tasks.first(where: { !allTasks.contains($0) }) { throw UsageError("unknown task \(unknown)") }
            case "--help", "-h": throw UsageError("")
            default: throw UsageError("unknown argument \(argument)")
            }
        }
        options.n = explicitN ?? options.n
        options.repetitions = explicitRepetitions ?? options.repetitions
        options.saves = explicitSaves ?? options.saves
        options.readersSeconds = explicitReadersSeconds ?? options.readersSeconds
        for (task, number) in explicitSync {
            options.tasks.insert(task)
            guard number > 0 else { continue }
            switch task {
            case "sync-converge": options.syncEdits = number
            case "sync-latency": options.syncSaves = number
            default: options.syncObjects = number
            }
        }
        return options
    }
}

/// A bad command line; an empty message asks for the usage alone.
struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
