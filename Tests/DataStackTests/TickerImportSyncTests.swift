import DataStack
import DataStackSync
import Foundation
import Testing
@testable import TickerImportKit

/// ticker-import's `--sync URL` (and `--rate N`, which paces a synced import):
/// what the command line refuses, as the executable says it, and the engine
/// it runs on a stack, through a hub registered for a scheme of the test's own
/// (the main package registers none: its hub, InMemorySyncHub, lives in a process).
@Suite(.serialized) struct TickerImportSyncTests {
    private func run(_ arguments: [String]) throws -> TickerImportProcess.Result {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        return try TickerImportProcess.run(arguments)
    }

    private static func temporaryStore() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("TickerImportSyncTests-\(UUID().uuidString).sqlite")
    }

    @Test func badSyncAndRateValuesPrintUsageAndExitTwo() throws {
        for (arguments, says) in [(["--sync"], "--sync needs a value"),
                                  (["--sync", "hub.example"], "is not a hub URL"),
                                  (["--sync", "post gres://h/db"], "is not a hub URL"),
                                  (["--sync", "postgresql://"], "is not a hub URL"),
                                  (["--rate", "0"], "--rate takes a positive whole number"),
                                  (["--view-only", "--rate", "10"], "--view-only imports nothing")] {
            let result = try run(arguments + ["--duration", "1"])
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(says), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("usage: ticker-import"), "\(arguments)")
        }
    }

    @Test func rateHoldsTheFeedToThatManyQuotesASecond() throws {
        // Unpaced, two seconds import thousands of quotes; at 40 a second, at most 80 are due, and the save in progress.
        let store = Self.temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let result = try TickerImportProcess.run(["--import-only", "--json", "--rate", "40", "--batch", "10", "--tickers", "20",
                                                  "--duration", "2", "--store", store.path])
        #expect(result.status == 0, "\(result.stderr)")
        let last = try #require(TickerImportProcess.lines(in: Data(result.stdout.utf8), as: TickerImportProcess.SaveLine.self).last)
        #expect(last.final)
        #expect(last.stockUpdates >= 10, "the paced feed still imports")
        #expect(last.stockUpdates <= 40 * 2 + 10, "no more than --rate allows: \(last.stockUpdates)")
    }

    @Test func aPostgreSQLHubNamesTheExecutableThatHasItAndOpensNothing() throws {
        let store = Self.temporaryStore()
        let result = try run(["--sync", "postgresql://app@localhost/hub", "--store", store.path, "--duration", "1"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("ticker-import-postgresql"), "\(result.stderr)")
        #expect(!result.stderr.contains("s3cret"))
        #expect(!FileManager.default.fileExists(atPath: store.path), "a refused command line creates no store")
    }

    @Test func aHubSchemeNobodyRegisteredIsNamedWithTheRegisteredOnes() throws {
        let result = try run(["--sync", "nosuchhub://h/db", "--store", Self.temporaryStore().path, "--duration", "1"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("nosuchhub://"), "\(result.stderr)")
        #expect(result.stderr.contains("none is registered"), "\(result.stderr)")
    }

    @Test func syncRefusesAStoreThatIsADatabaseServer() throws {
        // A hub and a store type for schemes of this test's own: the options are parsed as ticker-import-postgresql's are.
        let hubScheme = "tickerhub-\(UUID().uuidString.prefix(8).lowercased())"
        let storeScheme = "tickerdb-\(UUID().uuidString.prefix(8).lowercased())"
        SyncHubs.register(scheme: hubScheme) { _ in InMemorySyncHub() }
        struct NotOpened: Error {}
        StoreType.register(StoreType(rawValue: storeScheme, isShared: true) { _ in throw NotOpened() }, forURLScheme: storeScheme)

        #expect {
            try Options.parse(["--sync", "\(hubScheme)://h/hub", "--store", "\(storeScheme)://h/db"])
        } throws: { error in
            "\(error)".contains("--sync keeps a local SQLite store") && "\(error)".contains("a file of its own")
        }
        let options = try Options.parse(["--store", "a.sqlite", "--sync", "\(hubScheme)://h/hub", "--rate", "200", "--seed", "2"])
        #expect(options.sync == URL(string: "\(hubScheme)://h/hub"))
        #expect(options.rate == 200)
        #expect(try Options.parse([]).sync == nil, "the default run syncs nothing")
    }

    @Test func twoStacksSyncingThroughOneHubEachShowTheOthersCompaniesAndCountWhatMoved() async throws {
        let hub = InMemorySyncHub()
        let scheme = "tickermem-\(UUID().uuidString.prefix(8).lowercased())"
        SyncHubs.register(scheme: scheme) { _ in hub }
        let hubURL = try #require(URL(string: "\(scheme)://user:s3cret@h/hub"))
        let first = try await Replica(hubURL: hubURL)
        let second = try await Replica(hubURL: hubURL)
        #expect(first.sync.snapshot.hub == "\(scheme)://user@h/hub", "the screen never shows the password")

        try await first.save(["AAA", "AAB"])
        try await second.save(["BBB"])
        // Each engine is woken by its own save and by its next pull interval (1 s); the deadline is generous for two loaded cores.
        // Own saves and synced ones both merge into the main context: each stack ends with three companies inserted.
        await first.merges.wait(until: "the second stack's company, synced") { Self.companiesInserted($0) >= 3 }
        await second.merges.wait(until: "the first stack's companies, synced") { Self.companiesInserted($0) >= 3 }
        #expect(first.symbolsNow() == ["AAA", "AAB", "BBB"])
        #expect(second.symbolsNow() == ["AAA", "AAB", "BBB"])

        await first.sync.stop()
        await second.sync.stop()
        // Stopped, each line holds every event its engine sent: it agrees with the store's sync tables.
        let pushed = first.sync.snapshot
        #expect(pushed.status == "stopped")
        #expect(pushed.pushed == 2, "AAA and AAB: \(pushed)")
        let pulled = second.sync.snapshot
        #expect(pulled.status == "stopped")
        #expect(pulled.pulled >= 2 && pulled.pulledThrough >= 2, "\(pulled)")
        #expect(pulled.error == nil)
        #expect(try SyncReplicaSummary.read(storeAt: second.directory.storeURL)?.pulledSequence == pulled.pulledThrough)
    }

    @Test func theDeferredHubForwardsSnapshotsToTheHubItMakes() throws {
        let hub = InMemorySyncHub()
        let scheme = "tickersnap-\(UUID().uuidString.prefix(8).lowercased())"
        SyncHubs.register(scheme: scheme) { _ in hub }
        let deferred = DeferredSyncHub(url: try #require(URL(string: "\(scheme)://h/hub")))
        let publisher = UUID()
        _ = try deferred.register(replica: publisher, modelVersion: "v1")
        let sequences = try deferred.push([SyncChange(objectID: UUID(), entity: "Company", kind: .insert, values: ["symbol": .string("AAA")],
                                                      timestamp: HybridTimestamp(milliseconds: 1, counter: 0, replica: publisher),
                                                      localSequence: 1, baseSequence: 0)])
        let object = SyncSnapshotObject(objectID: UUID(), entity: "Company", state: nil, numbers: sequences)
        // Without forwarding, the protocol's defaults answered "this hub keeps no snapshots".
        try deferred.putSnapshotPage([object], through: sequences[0], publisher: publisher)
        #expect(try deferred.commitSnapshot(through: sequences[0], publisher: publisher))
        #expect(try deferred.snapshotPage(after: nil, limit: 10) == SyncSnapshotPage(sequence: sequences[0], objects: [object]))
        #expect(try hub.snapshotPage(after: nil, limit: 10)?.objects == [object], "the snapshot is the inner hub's")
    }

    @Test func aStackStartedWhileItsHubCannotBeMadeSyncsOnceItCan() async throws {
        let hub = InMemorySyncHub()
        let reachable = Signal()
        let scheme = "tickerlate-\(UUID().uuidString.prefix(8).lowercased())"
        SyncHubs.register(scheme: scheme) { _ in
            guard reachable.hasFired else { throw SyncError(.offline, message: "the test's hub is down") }
            return hub
        }
        let hubURL = try #require(URL(string: "\(scheme)://h/hub"))
        let late = try await Replica(hubURL: hubURL)
        try await late.save(["LATE"])
        // Offline: the engine's first cycle could not make the hub, and says so; the save is the store's.
        try #require(await waitUntil("the sync line saying offline", deadline: .seconds(30)) { late.sync.snapshot.status == "offline" })
        #expect(late.sync.snapshot.error == "the test's hub is down")
        #expect(late.symbolsNow() == ["LATE"])

        reachable.fire()
        let other = try await Replica(hubURL: hubURL)
        // The engine retries at its next wake-up (a pull interval, 1 s): the other stack gets the company saved offline.
        await other.merges.wait(until: "the company saved offline, synced") { Self.companiesInserted($0) >= 1 }
        #expect(other.symbolsNow() == ["LATE"])
        await late.sync.stop()
        await other.sync.stop()
        #expect(late.sync.snapshot.error == nil, "back online: \(late.sync.snapshot)")
        #expect(late.sync.snapshot.pushed == 1)
    }

    private static func companiesInserted(_ arrivals: [MergeRecorder.Arrival]) -> Int {
        arrivals.reduce(0) { $0 + $1.merge.save.insertedObjectIDs.filter { $0.entityName == "Company" }.count }
    }

    /// A stack on the ticker model with `--sync`'s engine, as ticker-import runs it.
    private final class Replica: Sendable {
        let directory = StackDirectory()
        let stack = StackManager()
        let sync: TickerSync
        let merges: MergeRecorder

        init(hubURL: URL) async throws {
            StackDirectory.keepUntilExit(directory)
            try await stack.setup(classes: TickerModel.classes, storeURL: directory.storeURL)
            merges = MergeRecorder(stack)
            sync = TickerSync(hubURL: hubURL)
            try sync.start(stack: stack)
        }

        func save(_ symbols: [String]) async throws {
            let context = stack.importerContext()
            try await context.perform {
                for symbol in symbols {
                    let company = Company(context: context)
                    company.symbol = symbol
                    company.name = symbol
                }
                try context.save()
            }
        }

        /// The symbols of the companies the store holds now (a failed read records an issue and reads as none).
        func symbolsNow() -> Set<String> {
            let context = stack.importerContext()
            do {
                return try context.performAndWait {
                    Set(try context.fetch(FetchRequest<Company>(entityName: "Company")).map(\.symbol))
                }
            } catch {
                Issue.record("reading the companies failed: \(error)")
                return []
            }
        }
    }
}
