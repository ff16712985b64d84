import DataStack
import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Synchronization

/// The readers task (issue #37: "reads/s of three contexts with 1 and with 5
/// connections, and with the standby"): three threads read at the same time for a
/// fixed time, each read a fetch of the 10 companies priced under 0.60 from a
/// table of 1,000, every attribute read and checked.
///
/// - DataStack: three private-queue contexts of one coordinator, its store opened
///   with `maximumReaderCount` 1 and then 5, and then 5 again with the URL's
///   `standby=` naming a hot standby of the server (`pg_basebackup -R`), so every
///   read runs there (checked with `readsFromReplica` afterwards).
/// - Raw libpq: the same `SELECT` (prepared) on the store's `ZCOMPANY`, three
///   threads sharing one connection (under a lock), and three threads with one
///   connection each, on the primary and on the standby.
///
/// Opening connections is not timed: each thread reads a few times first, then all
/// three start together.
enum ReadersBenchmark {
    static let threads = 3
    static let rows = 1_000
    /// Rows 0…9 of ``CompanyValues/rows(_:)`` cost 0.50…0.59.
    static let priceBound = 0.6
    static let rowsPerRead = 10

    static let rawShared = "raw libpq, 1 connection shared by 3 threads"
    static let rawEach = "raw libpq, a connection per thread"
    static let rawStandby = "raw libpq, a connection per thread, on the standby"
    static let oneReader = "DataStack, maximumReaderCount 1"
    static let fiveReaders = "DataStack, maximumReaderCount 5"
    static let standbyReaders = "DataStack, maximumReaderCount 5, standby="

    /// One contender's best run.
    struct Result {
        var contender: String
        var reads: Int
        var seconds: Double
        var readsPerSecond: Double { Double(reads) / seconds }
    }

    /// Fills a database, starts a standby of a private server, and measures each
    /// contender `repetitions` times (interleaved); the most reads/s of each is kept.
    static func run(server: BenchServer, seconds: Double, repetitions: Int) async throws -> [Result] {
        let url = try server.makeDatabase()
        let values = CompanyValues.rows(rows)
        let importer = try DataStackContender(url: url)
        try importer.insert(values, chunkSize: rows)
        try importer.close()
        let expected = values.filter { $0.price < priceBound }.reduce(into: Checksum()) {
            $0.add(symbol: $1.symbol, name: $1.name, employees: $1.employees, founded: $1.founded, price: $1.price)
        }
        guard expected.rows == rowsPerRead else { throw BenchError("readers: \(expected.rows) rows under \(priceBound)") }

        // A standby only of a private server: an existing one (--url) may have none.
        let standby = try server.isPrivate ? server.startStandby() : nil
        defer { standby?.stop() }
        let standbyURL = try standby.map { standby in
            let standbyURL = standby.url(database: String(url.path.dropFirst()))
            try waitUntilReplayed(standby: standbyURL, primary: url)
            return standbyURL
        }

        var contenders: [(String, () throws -> Int)] = [
            (rawShared, { try rawReads(url, sharedConnection: true, seconds: seconds, expected: expected) }),
            (rawEach, { try rawReads(url, sharedConnection: false, seconds: seconds, expected: expected) }),
            (oneReader, { try dataStackReads(url, maximumReaderCount: 1, seconds: seconds, expected: expected) }),
            (fiveReaders, { try dataStackReads(url, maximumReaderCount: 5, seconds: seconds, expected: expected) }),
        ]
        if let standbyURL {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            let encoded = standbyURL.absoluteString.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
            guard let readingURL = URL(string: url.absoluteString + "&standby=\(encoded)") else {
                throw BenchError("readers: cannot name the standby in \(url)")
            }
            contenders += [
                (rawStandby, { try rawReads(standbyURL, sharedConnection: false, seconds: seconds, expected: expected) }),
                (standbyReaders, {
                    try dataStackReads(readingURL, maximumReaderCount: 5, seconds: seconds, expected: expected, onStandby: true)
                }),
            ]
        }
        var best: [String: Int] = [:]
        #if FLUENT_CONTENDER
        let fluentURL = try await FluentReaders.makeDatabase(values, server: server)
        let names = contenders.prefix(2).map(\.0) + [FluentReaders.onePool, FluentReaders.fivePool] + contenders.dropFirst(2).map(\.0)
        #else
        let names = contenders.map(\.0)
        #endif
        for _ in 0..<repetitions {
            for (name, measure) in contenders {
                let reads = try measure()
                best[name] = max(best[name] ?? 0, reads)
            }
            #if FLUENT_CONTENDER
            for (name, pool) in [(FluentReaders.onePool, 1), (FluentReaders.fivePool, 5)] {
                let reads = try await FluentReaders.reads(fluentURL, maximumConnections: pool, seconds: seconds, expected: expected)
                best[name] = max(best[name] ?? 0, reads)
            }
            #endif
        }
        return names.compactMap { name in best[name].map { Result(contender: name, reads: $0, seconds: seconds) } }
    }

    /// The reads of `threads` threads in `seconds`: each calls `makeReader` (untimed),
    /// reads three times (untimed), then all start together and count their reads.
    static func concurrentReads(seconds: Double, expected: Checksum,
                                makeReader: @escaping @Sendable (Int) throws -> @Sendable () throws -> Checksum) throws -> Int {
        let ready = DispatchGroup()
        let done = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        let end = Mutex(ContinuousClock.now)
        let reads = Mutex(0)
        let failure = Mutex<(any Error)?>(nil)
        for index in 0..<threads {
            ready.enter()
            done.enter()
            // A thread each: the readers read at the same time, as a coordinator's contexts do.
            Thread {
                defer { done.leave() }
                var count = 0
                var isReady = false
                do {
                    let read = try makeReader(index)
                    for _ in 0..<3 { _ = try read() }
                    isReady = true
                    ready.leave()
                    go.wait()
                    let deadline = end.withLock { $0 }
                    while ContinuousClock.now < deadline {
                        let checksum = try read()
                        guard checksum.matches(expected) else { throw BenchError("readers: a read saw \(checksum), expected \(expected)") }
                        count += 1
                    }
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                    if !isReady { ready.leave() }
                }
                reads.withLock { $0 += count }
            }.start()
        }
        ready.wait()
        end.withLock { $0 = ContinuousClock.now + .milliseconds(Int(seconds * 1000)) }
        for _ in 0..<threads { go.signal() }
        done.wait()
        if let error = failure.withLock({ $0 }) { throw error }
        return reads.withLock { $0 }
    }

    /// Raw libpq: a prepared `SELECT` on `ZCOMPANY`, one connection shared (under a lock) or one per thread.
    static func rawReads(_ url: URL, sharedConnection: Bool, seconds: Double, expected: Checksum) throws -> Int {
        let shared = sharedConnection ? try RawPostgreSQL(url: url) : nil
        let connections = Mutex<[RawPostgreSQL]>(shared.map { [$0] } ?? [])
        defer { connections.withLock { opened in opened.forEach { $0.close() } } }
        let lock = Mutex(())
        return try concurrentReads(seconds: seconds, expected: expected) { _ in
            let raw = try shared ?? RawPostgreSQL(url: url)
            if shared == nil { connections.withLock { $0.append(raw) } }
            return {
                if shared != nil { return try lock.withLock { _ in try raw.fetchCompanies(pricedUnder: priceBound) } }
                return try raw.fetchCompanies(pricedUnder: priceBound)
            }
        }
    }

    /// DataStack: a context per thread on one coordinator; each read a filled fetch.
    static func dataStackReads(_ url: URL, maximumReaderCount: Int, seconds: Double, expected: Checksum,
                               onStandby: Bool = false) throws -> Int {
        var options = StoreOptions.stackDefaults
        options.maximumReaderCount = maximumReaderCount
        // Nothing is saved while the readers read; no listener session is needed.
        options.remoteChangeNotifications = false
        let coordinator = PersistentStoreCoordinator(managedObjectModel: CompanyModel.make())
        try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url, options: options)
        defer {
            // The store goes with the coordinator; a failed removal changes no measurement.
            for store in coordinator.persistentStores { try? coordinator.remove(store) }
        }
        let predicate = try FetchPredicate(format: "price < \(priceBound)")
        let reads = try concurrentReads(seconds: seconds, expected: expected) { _ in
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            return {
                try context.performAndWait {
                    var request = FetchRequest<ManagedObject>(entityName: CompanyModel.entityName, predicate: predicate)
                    request.returnsObjectsAsFaults = false
                    var checksum = Checksum()
                    for company in try context.fetch(request) { try DataStackContender.read(company, into: &checksum) }
                    return checksum
                }
            }
        }
        if onStandby {
            let store = coordinator.persistentStores.first as? PostgreSQLStore
            guard store?.readsFromReplica == true else { throw BenchError("readers: the standby contender's reads ran on the primary") }
        }
        return reads
    }

    /// Waits (10 s at most) until the standby has the database and has replayed all the primary wrote.
    static func waitUntilReplayed(standby: URL, primary: URL) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        let writer = try PostgreSQLConnection(url: primary)
        defer { writer.close() }
        guard let target = try writer.execute("SELECT pg_current_wal_lsn()").string(row: 0, column: 0) else {
            throw BenchError("readers: the primary has no WAL position")
        }
        while ContinuousClock.now < deadline {
            // The standby has the database only once it has replayed its creation.
            if let reader = try? PostgreSQLConnection(url: standby) {
                defer { reader.close() }
                if try reader.execute("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", [.text(target)]).string(row: 0, column: 0) == "t" {
                    return
                }
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw BenchError("readers: the standby did not replay \(target) within 10 s")
    }
}
