import Foundation
import Testing
import DataStack

/// The crash loop: ticker-import, importing into one store run after run, is
/// SIGKILLed at a random moment of each run — while it opens or creates the
/// store, while it saves, between saves. After every kill the store must open,
/// pass `integrity_check`, and hold a prefix of the saves: every save a run
/// reported is there, and no save is there in part.
///
/// `DATASTACK_CRASH_ROUNDS` sets the number of runs (default 12, a few seconds,
/// for CI); `DATASTACK_CRASH_SEED` replays a sequence of kill times (the seed is
/// printed). The long run:
///
///     DATASTACK_CRASH_ROUNDS=300 swift test --filter CrashLoopTests
@Suite(.serialized) struct CrashLoopTests {
    /// Stock updates per save: every save adds exactly this many rows, so a
    /// count that is not a multiple of it is a save that landed in part.
    static let batch = 50
    static let arguments = ["--json", "--tickers", "50", "--batch", "\(batch)", "--seed", "7"]

    struct Tally: CustomStringConvertible {
        var rounds = 0
        var killsBeforeFirstReport = 0
        var killsMidSave = 0
        var killsAfterCommitBeforeReport = 0
        var savesReported = 0
        var integrityFailures = 0
        var lostSaves = 0
        var partialSaves = 0
        var rows = 0

        var description: String {
            "\(rounds) rounds: \(killsMidSave) kills mid-save (uncommitted frames in the WAL), \(killsAfterCommitBeforeReport) between "
                + "a commit and its report, \(killsBeforeFirstReport) before the first "
                + "reported save; \(savesReported) saves reported, \(rows) stock updates on disk; integrity failures \(integrityFailures), "
                + "lost saves \(lostSaves), partial saves \(partialSaves)"
        }
    }

    @Test func killedAtRandomMomentsTheStoreAlwaysOpensIntactWithEveryReportedSave() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let environment = ProcessInfo.processInfo.environment
        let rounds = environment["DATASTACK_CRASH_ROUNDS"].flatMap(Int.init) ?? 12
        let seed = environment["DATASTACK_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("CrashLoopTests: \(rounds) rounds, seed \(seed) (replay with DATASTACK_CRASH_SEED=\(seed))")
        var random = CrashRandom(seed: seed)
        let directory = StackDirectory()
        let started = ContinuousClock.now
        var tally = Tally()

        for round in 1...rounds {
            let context = "seed \(seed), round \(round)"
            let before = tally.rows
            let child = try TickerImportChild(arguments: Self.arguments + ["--store", directory.storeURL.path],
                                              stderr: directory.url.appendingPathComponent("stderr-\(round).txt"))
            // A quarter of the kills land in the first moments (opening, creating
            // the schema, the first save); the rest after a few reported saves,
            // a random moment into the next. (Behaviour under test: the sleeps
            // below place the kill at a random moment.)
            if random.next() % 4 == 0 {
                usleep(UInt32(random.next() % 250_000))
            } else {
                child.waitForLines(TickerImportProcess.Line.self, count: Int(1 + random.next() % 3), timeout: .seconds(60))
                usleep(UInt32(random.next() % 40_000))
            }
            child.kill()
            // Every complete line it wrote before it died; one cut off by the kill was never reported.
            let reported = child.reported
            try #require(child.wasKilled, "\(context): ticker-import exited by itself: \(child.stderrText)")
            if reported.isEmpty { tally.killsBeforeFirstReport += 1 }
            if WriteAheadLog.uncommittedFrames(of: directory.storeURL) > 0 { tally.killsMidSave += 1 }
            let lastReported = reported.last?.stockUpdates ?? 0
            tally.savesReported += reported.last?.saved ?? 0

            // The store opens through the engine, as the next run will open it.
            let companies = try Self.companiesThroughTheEngine(directory.storeURL)
            #expect(companies == 0 || companies == 50, "\(context)")
            if !reported.isEmpty { #expect(companies == 50, "\(context)") }

            let store = try TickerStoreContents(directory.storeURL)
            tally.rounds += 1
            tally.rows = store.stockUpdates
            if store.integrity != ["ok"] { tally.integrityFailures += 1 }
            if store.stockUpdates < before + lastReported { tally.lostSaves += 1 }
            if store.stockUpdates > before + lastReported { tally.killsAfterCommitBeforeReport += 1 }
            if store.stockUpdates % Self.batch != 0 || store.companiesWithMismatchedCounters != 0 { tally.partialSaves += 1 }
            #expect(store.integrity == ["ok"], "\(context)")
            #expect(store.stockUpdates >= before + lastReported, "\(context): \(lastReported) reported after \(before)")
            #expect(store.stockUpdates % Self.batch == 0, "\(context): \(store.stockUpdates) rows")
            #expect(store.companiesWithMismatchedCounters == 0, "\(context)")
        }
        print("CrashLoopTests: \(tally), in \(ContinuousClock.now - started)")
    }

    /// Opens the store with a coordinator of its own and counts its companies.
    static func companiesThroughTheEngine(_ url: URL) throws -> Int {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TickerStoreModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        defer { try? coordinator.remove(store) }   // closing a store that only read cannot lose anything
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
    }
}

/// Reads a write-ahead log's frame headers (https://sqlite.org/fileformat.html#the_write_ahead_log).
enum WriteAheadLog {
    /// Frames of the current log after its last commit frame: a transaction that
    /// was being written when the process died. 0 when there is no log.
    static func uncommittedFrames(of store: URL) -> Int {
        guard let data = FileManager.default.contents(atPath: store.path + "-wal"), data.count >= 32 else { return 0 }
        let bytes = [UInt8](data)
        func word(_ offset: Int) -> UInt32 { bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        let pageSize = Int(word(8))
        let salts = (word(16), word(20))
        guard pageSize >= 512 else { return 0 }
        var offset = 32
        var sinceCommit = 0
        // Frames of the current log carry its salts; older ones, left from before the log restarted, do not.
        while offset + 24 <= bytes.count, (word(offset + 8), word(offset + 12)) == salts {
            let isCommit = word(offset + 4) != 0
            sinceCommit = isCommit ? 0 : sinceCommit + 1
            offset += 24 + pageSize
        }
        return sinceCommit
    }
}

/// SplitMix64: a seed replays the same kill times.
private struct CrashRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The crash loop's mid-save count is only as good as its reading of the log.
@Suite struct WriteAheadLogTests {
    @Test func framesOfATransactionNotYetCommittedAreCountedAndCommittedOnesAreNot() throws {
        let directory = StackDirectory()
        let connection = try Connection(path: directory.storeURL.path)
        try connection.execute("CREATE TABLE rows(body BLOB)")
        try connection.execute("INSERT INTO rows VALUES (zeroblob(100))")
        #expect(WriteAheadLog.uncommittedFrames(of: directory.storeURL) == 0)

        // A cache of a few pages spills the open transaction's pages into the log before its commit.
        try connection.execute("PRAGMA cache_size = 4")
        try connection.execute("BEGIN")
        try connection.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO rows SELECT zeroblob(200) FROM n")
        let copy = directory.url.appendingPathComponent("copy.sqlite")
        try FileManager.default.copyItem(atPath: directory.storeURL.path + "-wal", toPath: copy.path + "-wal")
        #expect(WriteAheadLog.uncommittedFrames(of: copy) > 0)

        try connection.execute("COMMIT")
        #expect(WriteAheadLog.uncommittedFrames(of: directory.storeURL) == 0)
    }
}
