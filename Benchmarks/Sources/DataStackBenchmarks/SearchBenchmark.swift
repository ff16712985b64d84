import DataStack
import Foundation
import GRDBSQLite

/// Task `search`: full-text search on a store of N companies whose `name` is
/// indexed for search (`isIndexedBySpotlight`, an FTS5 index kept by triggers).
///
/// Each query runs three ways on the same file, best of R:
///
/// - **raw FTS5**, the floor: `SELECT rowid FROM <index> WHERE <index> MATCH ?`
///   on the store's own FTS5 table (the index DataStack built), through
///   SQLite's C API;
/// - **DataStack search**: a fetch of object IDs with `name MATCHES[search] %@`;
/// - **DataStack scan**: the same fetch with `name CONTAINS[cd] %@`, the scan a
///   search replaces, which reads every name.
///
/// The names are made so that the scan finds exactly what the search finds
/// (no query word is part of another word), and the task checks that every
/// way returns the same number of rows. A relevance-sorted search, limit 20,
/// runs against FTS5's own `ORDER BY rank`. Last, the index's cost on an
/// import: the N rows imported through the stack (`performImport`, as the
/// `import` task does) into the entity with `name` indexed and not.
enum SearchBenchmark {
    /// One query, as a search and as the scan that finds the same rows.
    struct Query: Sendable {
        var label: String
        /// The `SearchQuery` text, which FTS5 reads the same way here.
        var search: String
        /// The `CONTAINS[cd]` argument.
        var contains: String
    }

    struct QueryResult: Sendable {
        var query: Query
        var matches: Int
        var raw: Duration
        var search: Duration
        var scan: Duration
    }

    struct Result: Sendable {
        var rows: Int
        /// The untimed build of the store (rows and index), for the record.
        var build: Duration
        var queries: [QueryResult]
        /// The relevance-sorted search: its query, limit, FTS5's `ORDER BY rank`, DataStack's relevance sort.
        var ranked: (query: String, limit: Int, raw: Duration, dataStack: Duration)
        /// Importing the N rows through the stack, `name` not indexed and indexed; nil when not measured.
        var imports: (plain: Duration, indexed: Duration)?
    }

    static let entityName = "BenchCompany"

    /// The company model; with `indexed`, `name` is indexed for search.
    static func model(indexed: Bool) -> ManagedObjectModel {
        let name = AttributeDescription(name: "name", type: .string, isOptional: false)
        name.isIndexedBySpotlight = indexed
        return ManagedObjectModel(entities: [
            EntityDescription(name: entityName, managedObjectClass: BenchCompany.self, properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                name,
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            ]),
        ])
    }

    /// - Parameter imports: whether to measure the import with and without the index too.
    static func run(rows count: Int, chunkSize: Int, repetitions: Int, imports: Bool = true) async throws -> Result {
        let rows = CompanyValues.rows(count)
        let directory = ScratchDirectory("search")
        let url = directory.file("Search.sqlite")
        let build = try makeStore(at: url, rows: rows)
        let queries = try self.queries(rows)

        let raw = try RawConnection(url.path)
        let index = try raw.searchIndexName()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model(indexed: true))
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        func best(_ body: () throws -> (Duration, Int)) throws -> (Duration, Int) {
            var best = Duration.seconds(1_000_000), found = -1
            _ = try body()   // untimed, so that no way pays for a cold page cache
            for _ in 0..<repetitions {
                let (time, count) = try body()
                guard found < 0 || count == found else { throw BenchError("search: one way found \(found) rows, then \(count)") }
                best = min(best, time)
                found = count
            }
            return (best, found)
        }

        var results: [QueryResult] = []
        for query in queries {
            let (rawTime, rawFound) = try best { try rawSearch(query.search, index: index, on: raw) }
            let (searchTime, searchFound) = try best { try searchFetch(query.search, in: context) }
            let (scanTime, scanFound) = try best { try scanFetch(query.contains, in: context) }
            guard rawFound == searchFound, searchFound == scanFound, rawFound > 0 else {
                throw BenchError("search: \(query.label) found \(rawFound) rows in raw FTS5, \(searchFound) with MATCHES[search], \(scanFound) with CONTAINS[cd]")
            }
            results.append(QueryResult(query: query, matches: rawFound, raw: rawTime, search: searchTime, scan: scanTime))
        }

        // Relevance: the common word's matches, most relevant first, the first 20.
        let common = queries[1].search, limit = 20
        let (rawRanked, rawRankedFound) = try best { try rawRankedSearch(common, limit: limit, index: index, on: raw) }
        let (rankedTime, rankedFound) = try best { try rankedFetch(common, limit: limit, in: context) }
        guard rawRankedFound == rankedFound, rankedFound == min(limit, results[1].matches) else {
            throw BenchError("search: the ranked search found \(rawRankedFound) rows in raw FTS5, \(rankedFound) in DataStack")
        }

        var importTimes: (plain: Duration, indexed: Duration)?
        if imports {
            let times = try await runImports(rows, chunkSize: chunkSize, repetitions: repetitions, plain: true, indexed: true)
            if let plain = times.plain, let indexed = times.indexed { importTimes = (plain, indexed) }
        }
        return Result(rows: count, build: build, queries: results, ranked: (common, limit, rawRanked, rankedTime), imports: importTimes)
    }

    /// The import's cost with the index: the companies imported through the stack into the entity
    /// with `name` not indexed (`plain`) and indexed, the best of `repetitions` each (nil: not run).
    static func runImports(rows count: Int, chunkSize: Int, repetitions: Int, plain: Bool, indexed: Bool) async throws
        -> (plain: Duration?, indexed: Duration?) {
        try await runImports(CompanyValues.rows(count), chunkSize: chunkSize, repetitions: repetitions, plain: plain, indexed: indexed)
    }

    private static func runImports(_ rows: [CompanyValues], chunkSize: Int, repetitions: Int, plain: Bool, indexed: Bool) async throws
        -> (plain: Duration?, indexed: Duration?) {
        var plainTime: Duration?, indexedTime: Duration?
        for _ in 0..<repetitions {
            // A folder per repetition, removed with its stores before the next.
            let folder = ScratchDirectory("search-import")
            if plain {
                let time = try await timedImport(rows, indexed: false, into: folder.file("Plain.sqlite"), chunkSize: chunkSize)
                plainTime = min(plainTime ?? time, time)
            }
            if indexed {
                let time = try await timedImport(rows, indexed: true, into: folder.file("Indexed.sqlite"), chunkSize: chunkSize)
                indexedTime = min(indexedTime ?? time, time)
            }
        }
        return (plainTime, indexedTime)
    }

    // MARK: - The store and the queries

    /// A store of the indexed model holding `rows`: the schema made by
    /// DataStack without the index, the rows written with raw SQLite in one
    /// transaction, then the store opened with `name` indexed, which builds the
    /// index from the rows (one FTS5 'rebuild': a row at a time through the
    /// triggers would flush FTS5's pending terms at every statement). Returns how long it took.
    static func makeStore(at url: URL, rows: [CompanyValues]) throws -> Duration {
        let start = ContinuousClock.now
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model(indexed: false))
        try coordinator.remove(try coordinator.addPersistentStore(type: .sqlite, at: url))
        let db = try RawConnection(url.path)
        let entity = try db.integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = '\(entityName)'")
        try db.execute("BEGIN")
        let insert = try db.prepare("""
            INSERT INTO ZBENCHCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZPRICE) VALUES (?, \(entity), 1, ?, ?, ?)
            """)
        defer { sqlite3_finalize(insert) }
        for (offset, values) in rows.enumerated() {
            sqlite3_bind_int64(insert, 1, Int64(offset + 1))
            sqlite3_bind_text(insert, 2, values.symbol, -1, RawConnection.transient)
            sqlite3_bind_text(insert, 3, values.name, -1, RawConnection.transient)
            sqlite3_bind_double(insert, 4, values.price)
            guard sqlite3_step(insert) == SQLITE_DONE else { throw db.error("inserting company \(offset)") }
            sqlite3_reset(insert)
        }
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = \(rows.count) WHERE Z_NAME = '\(entityName)'")
        try db.execute("COMMIT")
        let indexing = PersistentStoreCoordinator(managedObjectModel: model(indexed: true))
        try indexing.remove(try indexing.addPersistentStore(type: .sqlite, at: url))
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return ContinuousClock.now - start
    }

    /// The queries: a rare word (a brand of about 20 companies), a common one
    /// (a suffix of one company in 12), a phrase, and a prefix.
    static func queries(_ rows: [CompanyValues]) throws -> [Query] {
        // A brand from the middle of the rows that no other word contains, so that
        // CONTAINS[cd] finds the companies the search finds and no others.
        let fixed = (CompanyValues.descriptors + CompanyValues.suffixes).map { $0.lowercased() }
        guard let rare = stride(from: rows.count / 2, to: rows.count, by: 1).lazy
            .map({ String(rows[$0].name.prefix { $0 != " " }).lowercased() })
            .first(where: { brand in !fixed.contains { $0.contains(brand) } }) else {
            throw BenchError("search: no brand to search for")
        }
        return [
            Query(label: "rare word", search: rare, contains: rare),
            Query(label: "common word", search: "holdings", contains: "holdings"),
            Query(label: "phrase", search: "\"golden holdings\"", contains: "golden holdings"),
            // Only Northern, Northstar and Northwest hold "north", each at a word's start.
            Query(label: "prefix", search: "north*", contains: "north"),
        ]
    }

    // MARK: - The contenders

    // Each way is a function of its own, never inlined, so that a profiler can
    // count one alone (Scripts/instruction-counts.sh --search).

    /// Raw FTS5: every matching rowid. Returns the time and the rows read.
    @inline(never)
    static func rawSearch(_ query: String, index: String, on db: RawConnection) throws -> (Duration, Int) {
        try rawRowIDs("SELECT rowid FROM \(index) WHERE \(index) MATCH ?", query, on: db)
    }

    /// Raw FTS5: the `limit` best matches by FTS5's own rank (bm25).
    @inline(never)
    static func rawRankedSearch(_ query: String, limit: Int, index: String, on db: RawConnection) throws -> (Duration, Int) {
        try rawRowIDs("SELECT rowid FROM \(index) WHERE \(index) MATCH ? ORDER BY rank LIMIT \(limit)", query, on: db)
    }

    /// Runs `sql` with `query` bound, reading every rowid; returns the time and the rows read.
    private static func rawRowIDs(_ sql: String, _ query: String, on db: RawConnection) throws -> (Duration, Int) {
        let start = ContinuousClock.now
        let statement = try db.prepare(sql)
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, query, -1, RawConnection.transient)
        var rowids: [Int64] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw db.error("searching `\(sql)` for \(query)") }
            rowids.append(sqlite3_column_int64(statement, 0))
        }
        return (ContinuousClock.now - start, rowids.count)
    }

    /// DataStack's search: the IDs of `name MATCHES[search] query`.
    @inline(never)
    static func searchFetch(_ query: String, in context: ManagedObjectContext) throws -> (Duration, Int) {
        let predicate = try FetchPredicate(format: "name MATCHES[search] %@", query)
        return try context.performAndWait { try fetchIDs(predicate, in: context) }
    }

    /// The scan a search replaces: the IDs of `name CONTAINS[cd] word`.
    @inline(never)
    static func scanFetch(_ word: String, in context: ManagedObjectContext) throws -> (Duration, Int) {
        let predicate = try FetchPredicate(format: "name CONTAINS[cd] %@", word)
        return try context.performAndWait { try fetchIDs(predicate, in: context) }
    }

    /// DataStack's relevance-sorted search: the `limit` most relevant IDs, ties by name.
    @inline(never)
    static func rankedFetch(_ query: String, limit: Int, in context: ManagedObjectContext) throws -> (Duration, Int) {
        let predicate = try FetchPredicate(format: "name MATCHES[search] %@", query)
        let sorts = [FetchSort(key: "name", relevanceTo: try SearchQuery(query)), FetchSort(key: "name")]
        return try context.performAndWait { try fetchIDs(predicate, sorts: sorts, limit: limit, in: context) }
    }

    /// The object IDs a predicate matches, optionally sorted and limited, on
    /// the context's queue. Returns the time and the IDs read.
    private static func fetchIDs(_ predicate: FetchPredicate, sorts: [FetchSort] = [], limit: Int = 0,
                                 in context: ManagedObjectContext) throws -> (Duration, Int) {
        var request = FetchRequest<ObjectID>(entityName: entityName)
        request.resultType = .managedObjectID
        request.predicate = predicate
        request.sortDescriptors = sorts
        request.fetchLimit = limit
        let start = ContinuousClock.now
        let ids = try context.fetch(request)
        return (ContinuousClock.now - start, ids.count)
    }

    /// The time to import `rows` into a new stack on `url`, every chunk merged into main.
    private static func timedImport(_ rows: [CompanyValues], indexed: Bool, into url: URL, chunkSize: Int) async throws -> Duration {
        let (stack, watcher) = try await DataStackBench.open(url, model: model(indexed: indexed))
        let start = ContinuousClock.now
        let progress = try await stack.performImport(rows, chunkSize: chunkSize) { values, context in
            BenchCompany(context: context).assign(values)
        }
        let duration = ContinuousClock.now - start
        try await watcher.wait(for: progress.savedChunks)
        let importer = stack.importerContext()
        let stored = try await importer.perform { try importer.count(for: FetchRequest<ObjectID>(entityName: entityName)) }
        guard stored == rows.count else { throw BenchError("search: the import stored \(stored) companies of \(rows.count)") }
        // Closed before the folder is removed: a connection left open would create its -wal or -shm there again.
        for coordinator in [stack.writerCoordinator, stack.mainCoordinator] {
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        return duration
    }
}

/// One company of the search task: a name of two or three words, the same
/// for every contender.
///
/// `<Brand> [<Descriptor>] <Suffix>`, for example "Kabemo Golden Holdings":
/// the brand is one of N / 20 made-up words (so each is rare: about 20
/// companies), half of the names have one of 40 descriptors (each 1 in 80),
/// and every name ends with one of 12 suffixes (each 1 in 12: common).
/// Brands are three syllables of a consonant and a vowel (no c, j, q, w, x
/// or y): no brand holds a suffix, "north" or another brand, and the rare
/// word searched for is a brand that no descriptor holds either.
struct CompanyValues: Sendable {
    var symbol: String
    var name: String
    var price: Double

    static let descriptors = [
        "Pacific", "Atlantic", "Northern", "Northwest", "Northstar", "Southern", "Eastern", "Western",
        "Central", "Digital", "Green", "Blue", "Silver", "Golden", "Royal", "United",
        "National", "American", "European", "Asian", "Advanced", "Applied", "General", "Integrated",
        "Strategic", "Premier", "Summit", "Pioneer", "Frontier", "Heritage", "Liberty", "Horizon",
        "Meridian", "Keystone", "Harbor", "River", "Mountain", "Coastal", "Urban", "Rural",
    ]
    static let suffixes = [
        "Holdings", "Group", "Corp", "Inc", "Systems", "Labs", "Energy", "Foods", "Capital", "Partners", "Industries", "Technologies",
    ]
    private static let consonants = Array("bdfghklmnprstvz")
    private static let vowels = Array("aeiou")

    /// The company numbered `index` among `count` (deterministic).
    init(index: Int, count: Int) {
        var random = index.mixed
        func next(_ bound: Int) -> Int {
            defer { random = random.mixed }
            return Int(random % UInt64(bound))
        }
        var brand = next(max(100, count / 20))
        var letters: [Character] = []
        for _ in 0..<3 {
            let syllable = brand % (Self.consonants.count * Self.vowels.count)
            brand /= Self.consonants.count * Self.vowels.count
            letters += [Self.consonants[syllable / Self.vowels.count], Self.vowels[syllable % Self.vowels.count]]
        }
        var words = [String(letters).capitalized]
        if next(2) == 0 { words.append(Self.descriptors[next(Self.descriptors.count)]) }
        words.append(Self.suffixes[next(Self.suffixes.count)])
        symbol = "C\(index)"
        name = words.joined(separator: " ")
        price = Double(index % 10_000) / 4 + 1
    }

    /// Companies `0..<count`.
    static func rows(_ count: Int) -> [CompanyValues] {
        (0..<count).map { CompanyValues(index: $0, count: count) }
    }
}

/// The DataStack subclass for the search task's companies.
final class BenchCompany: ManagedObject {
    @Managed var symbol: String
    @Managed var name: String
    @Managed var price: Double

    func assign(_ values: CompanyValues) {
        symbol = values.symbol
        name = values.name
        price = values.price
    }
}

extension RawConnection {
    /// The store's FTS5 table (DataStack names it `DS_SEARCH_<TABLE>`; found, not assumed).
    func searchIndexName() throws -> String {
        let statement = try prepare("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let name = sqlite3_column_text(statement, 0) else {
            throw BenchError("search: the store has no FTS5 table")
        }
        return String(cString: name)
    }
}

private extension BinaryInteger {
    /// SplitMix64's finalizer: a well-spread 64-bit value from this one.
    var mixed: UInt64 {
        var z = UInt64(truncatingIfNeeded: self) &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
