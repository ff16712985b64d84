import DataStack
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue #39's proof: replicas that work offline converge. Each replica is a
/// `datastack-sync-peer` process on its own SQLite file, syncing through one
/// PostgreSQL hub, its link a relay the test cuts and restores while the peer
/// keeps editing. After the last heal every replica syncs until quiet; then
/// every dump is identical, equal to a fresh replica's that only pulled (the
/// hub's state), and equal to what the hub's log says under the model's
/// declared policies (``SyncConvergenceOracle``); every edit a peer logged is
/// in the hub's log unless that peer overwrote or deleted it before it synced.
/// A peer killed with SIGKILL right after a push returned, or right after a
/// pull returned, loses nothing once it runs again.
///
/// Seeds: `DATASTACK_CONVERGENCE_SEED` (else random; every failure names it);
/// edits per peer: `DATASTACK_CONVERGENCE_EDITS` (default 60).
@Suite(.serialized) struct SyncConvergenceTests {
    static let editsPerPeer = ProcessInfo.processInfo.environment["DATASTACK_CONVERGENCE_EDITS"].flatMap(Int.init) ?? 60
    static let baseSeed = ProcessInfo.processInfo.environment["DATASTACK_CONVERGENCE_SEED"].flatMap(UInt64.init)
        ?? UInt64.random(in: 1...1_000_000)
    /// How long one test waits for its processes, all waits together: a limit, not a measurement.
    static let timeLimit = Duration.seconds(60)

    static var executable: URL {
        PeerProcess.executable.deletingLastPathComponent().appendingPathComponent("datastack-sync-peer")
    }

    @Test("three replicas editing with links cut and restored converge to the hub's state; no logged edit is lost")
    func threeReplicasConverge() async throws {
        let run = try SyncConvergenceRun(seed: Self.baseSeed)
        let names = ["A", "B", "C"]
        let relays = try names.map { _ in try run.relay() }
        var editors: [String: PeerProcess] = [:]
        for (index, name) in names.enumerated() {
            editors[name] = try run.edit(name, seed: run.seed + UInt64(index), count: Self.editsPerPeer, through: relays[index])
        }
        // Cut a random link; once its peer has found itself offline and made
        // three more edits, restore it; again until every peer is done.
        var random = TestSplitMix64(seed: run.seed)
        var cuts = 0
        let deadline = ContinuousClock.now + Self.timeLimit
        while editors.values.contains(where: \.isRunning) && ContinuousClock.now < deadline {
            let index = Int.random(in: 0..<names.count, using: &random)
            let editor = try #require(editors[names[index]])
            let offlineBefore = editor.offlineSyncs
            relays[index].cut()
            cuts += 1
            editor.wait(for: SyncPeerSynced.self, until: deadline) { _ in editor.offlineSyncs > offlineBefore }
            let editsWhenOffline = editor.lines(SyncPeerEdit.self).count
            editor.wait(for: SyncPeerEdit.self, until: deadline) { $0.count >= editsWhenOffline + 3 }
            try relays[index].restore()
        }
        for (name, editor) in editors {
            #expect(editor.waitForExit(until: deadline), "\(name) did not finish its edits in time; \(run)")
            #expect(editor.exitStatus == 0, "\(name): \(editor.stderrText); \(run)")
            #expect(editor.errorSyncs.isEmpty, "\(name): \(editor.errorSyncs); \(run)")
        }
        #expect(cuts > 0)
        #expect(editors.values.reduce(0) { $0 + $1.offlineSyncs } > 0, "no peer ever synced while cut; \(run)")
        try run.converge(names, through: Dictionary(uniqueKeysWithValues: zip(names, relays)), editors: editors)
    }

    @Test("a replica killed right after a push returned, before it recorded it, syncs the same state once restarted")
    func killedMidPush() async throws {
        let run = try SyncConvergenceRun(seed: Self.baseSeed &+ 100)
        let count = max(10, Self.editsPerPeer / 2)
        let a = try run.edit("A", seed: run.seed, count: count, syncEvery: 3,
                             environment: ["DATASTACK_SYNC_PEER_KILL_AFTER_PUSH": "2"])
        let b = try run.edit("B", seed: run.seed + 1, count: count, syncEvery: 3)
        let deadline = ContinuousClock.now + Self.timeLimit
        #expect(a.waitForExit(until: deadline) && b.waitForExit(until: deadline), "\(run)")
        #expect(a.wasKilled, "A was not killed: \(a.stderrText); \(run)")
        #expect(a.lines(SyncPeerSynced.self).contains { $0.sync == "killing after push" }, "\(run)")
        #expect(b.exitStatus == 0, "B: \(b.stderrText); \(run)")
        try run.converge(["A", "B"], through: [:], editors: ["A": a, "B": b])
    }

    @Test("a replica killed right after a pull returned, before it applied it, syncs the same state once restarted")
    func killedMidPull() async throws {
        let run = try SyncConvergenceRun(seed: Self.baseSeed &+ 200)
        let count = max(10, Self.editsPerPeer / 2)
        let deadline = ContinuousClock.now + Self.timeLimit
        // A's edits are on the hub first, so that B's first sync pulls something.
        let a = try run.edit("A", seed: run.seed, count: count, syncEvery: 3)
        #expect(a.waitForExit(until: deadline) && a.exitStatus == 0, "A: \(a.stderrText); \(run)")
        let b = try run.edit("B", seed: run.seed + 1, count: count, syncEvery: 3,
                             environment: ["DATASTACK_SYNC_PEER_KILL_AFTER_PULL": "1"])
        #expect(b.waitForExit(until: deadline), "\(run)")
        #expect(b.wasKilled, "B was not killed: \(b.stderrText); \(run)")
        #expect(b.lines(SyncPeerSynced.self).contains { $0.sync == "killing after pull" }, "\(run)")
        try run.converge(["A", "B"], through: [:], editors: ["A": a, "B": b])
    }

    @Test("three replicas on hosts of their own (network namespaces), links taken down and up, converge to the hub's state",
          .enabled(if: TestHosts.unavailableReason == nil, Comment(rawValue: TestHosts.unavailableReason ?? "")))
    func threeReplicasConvergeAcrossHosts() async throws {
        let names = ["A", "B", "C"]
        let hosts = try TestHosts(hosts: names)
        defer { hosts.remove() }
        let server = try PostgreSQLTestServer.start(network: .init(namespace: hosts.server.namespace, address: hosts.server.address,
                                                                   trustedRange: hosts.range))
        defer { server.stop() }
        let run = try SyncConvergenceRun(seed: Self.baseSeed &+ 400, server: server)
        let url = try #require(server.networkURL(database: String(run.database.path.dropFirst()), parameters: HostTests.linkParameters))
        var editors: [String: PeerProcess] = [:]
        for (index, name) in names.enumerated() {
            // A partition drops packets: a call in flight fails after the keepalives (2 s), a connect after 300 ms.
            editors[name] = try run.edit(name, seed: run.seed + UInt64(index), count: Self.editsPerPeer, hubURL: url,
                                         namespace: try hosts.host(name).namespace,
                                         extra: ["--connect-timeout-ms", "300", "--keepalive-s", "2"])
        }
        // Fewer cuts than over the relay: each may cost a peer a dead call's timeout.
        var random = TestSplitMix64(seed: run.seed)
        var cuts = 0
        let deadline = ContinuousClock.now + Self.timeLimit
        while cuts < 4 && editors.values.contains(where: \.isRunning) && ContinuousClock.now < deadline {
            let name = try #require(names.randomElement(using: &random))
            let editor = try #require(editors[name])
            let offlineBefore = editor.offlineSyncs
            try hosts.setLink(of: name, up: false)
            cuts += 1
            editor.wait(for: SyncPeerSynced.self, until: deadline) { _ in editor.offlineSyncs > offlineBefore }
            let editsWhenOffline = editor.lines(SyncPeerEdit.self).count
            editor.wait(for: SyncPeerEdit.self, until: deadline) { $0.count >= editsWhenOffline + 3 }
            try hosts.setLink(of: name, up: true)
        }
        for (name, editor) in editors {
            #expect(editor.waitForExit(until: deadline), "\(name) did not finish its edits in time; \(run)")
            #expect(editor.exitStatus == 0, "\(name): \(editor.stderrText); \(run)")
            #expect(editor.errorSyncs.isEmpty, "\(name): \(editor.errorSyncs); \(run)")
        }
        #expect(editors.values.reduce(0) { $0 + $1.offlineSyncs } > 0, "no peer ever synced while cut off; \(run)")
        // Healed: the rest goes over the server's Unix socket.
        try run.converge(names, through: [:], editors: editors)
    }

    @Test("unique-key collisions across replicas: after convergence no two companies share a symbol")
    func uniqueKeyCollisions() async throws {
        let run = try SyncConvergenceRun(seed: Self.baseSeed &+ 300, unique: true)
        let names = ["A", "B", "C"]
        var editors: [String: PeerProcess] = [:]
        for (index, name) in names.enumerated() {
            editors[name] = try run.edit(name, seed: run.seed + UInt64(index), count: Self.editsPerPeer / 2, syncEvery: 4)
        }
        let deadline = ContinuousClock.now + Self.timeLimit
        for (name, editor) in editors {
            #expect(editor.waitForExit(until: deadline) && editor.exitStatus == 0, "\(name): \(editor.stderrText); \(run)")
        }
        let dump = try run.converge(names, through: [:], editors: editors, checkOracle: false)
        let symbols = dump.filter { $0.entity == "Company" }.compactMap { $0.values["symbol"] }
        #expect(Set(symbols).count == symbols.count, "companies share a symbol: \(symbols.sorted()); \(run)")
        // What the run exercised: companies moved to another symbol (an update, not an insert's), edits the store refused.
        let edits = editors.values.flatMap { $0.lines(SyncPeerEdit.self) }
        let inserted = Set(edits.filter { $0.op == "insert" }.map { "\($0.edit) \($0.object)" })
        let moves = edits.filter { $0.op == "set" && $0.field == "symbol" && !inserted.contains("\($0.edit) \($0.object)") }.count
        let refused = editors.values.flatMap { $0.lines(SyncPeerSynced.self) }.filter { $0.sync.hasPrefix("edit ") }.count
        print("SyncConvergence uniqueKeyCollisions \(run): \(symbols.count) companies at the end, \(moves) symbol moves, "
              + "\(refused) edits the store refused")
    }
}

// MARK: - A run

/// One test's hub database, replica files and peers.
final class SyncConvergenceRun: CustomStringConvertible {
    let seed: UInt64
    let database: URL
    let folder: URL
    let unique: Bool
    private let socket: String

    /// A run on a new database of `server` (by default the shared test server).
    init(seed: UInt64, unique: Bool = false, server: PostgreSQLTestServer? = nil) throws {
        try #require(FileManager.default.isExecutableFile(atPath: SyncConvergenceTests.executable.path),
                     "build datastack-sync-peer first (swift build --build-tests)")
        let server = try server ?? PostgreSQLTestServer.shared.get()
        self.seed = seed
        self.unique = unique
        database = try server.makeDatabase()
        socket = server.socketDirectory + "/.s.PGSQL.5432"
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ds-converge-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    deinit {
        // A leftover folder in the temporary folder is harmless.
        try? FileManager.default.removeItem(at: folder)
    }

    var description: String { "seed \(seed) (DATASTACK_CONVERGENCE_SEED=\(seed))" }

    func relay() throws -> SyncLinkRelay { try SyncLinkRelay(unixSocket: socket) }

    func hubURL(through relay: SyncLinkRelay?) -> String {
        guard let relay else { return database.absoluteString }
        return "postgresql://datastack@127.0.0.1:\(relay.port)\(database.path)"
    }

    func store(_ name: String) -> String { folder.appendingPathComponent("\(name).sqlite").path }

    private var modelArguments: [String] { unique ? ["--unique"] : [] }

    /// An `edit` peer; its hub is `hubURL`, else the database through `relay`, else the database.
    /// With `namespace`, it runs on that host of a test network.
    func edit(_ name: String, seed: UInt64, count: Int, syncEvery: Int = 4, through relay: SyncLinkRelay? = nil,
              hubURL url: URL? = nil, namespace: String? = nil, extra: [String] = [],
              environment: [String: String] = [:]) throws -> PeerProcess {
        try PeerProcess(["edit", store(name), "--hub", url?.absoluteString ?? hubURL(through: relay), "--name", name, "--seed", "\(seed)",
                         "--count", "\(count)", "--sync-every", "\(syncEvery)", "--interval-ms", "2"] + extra + modelArguments,
                        namespace: namespace, executable: SyncConvergenceTests.executable, environment: environment)
    }

    /// Runs `sync` on a replica until it is quiet; fails the test if it does not.
    func syncUntilQuiet(_ name: String, through relay: SyncLinkRelay?) throws {
        let peer = try PeerProcess(["sync", store(name), "--hub", hubURL(through: relay), "--timeout-s", "20"] + modelArguments,
                                   executable: SyncConvergenceTests.executable)
        try #require(peer.waitForExit(until: .now + .seconds(30)) && peer.exitStatus == 0,
                     "sync \(name): \(peer.stderrText) \(peer.lines(SyncPeerSynced.self)); \(self)")
    }

    func dump(_ name: String) throws -> [SyncPeerObject] {
        let peer = try PeerProcess(["dump", store(name)] + modelArguments, executable: SyncConvergenceTests.executable)
        try #require(peer.waitForExit(until: .now + .seconds(30)) && peer.exitStatus == 0, "dump \(name): \(peer.stderrText); \(self)")
        return peer.lines(SyncPeerObject.self)
    }

    /// The hub's whole log, in one pull: the peers' chunks name entities and
    /// properties by the model's indexes, and objects by the numbers of their
    /// inserts, which one pull from the start learns as it reads.
    func hubLog() throws -> [SequencedChange] {
        let hub = try PostgreSQLSyncHub(url: database)
        return try hub.pull(after: 0, limit: .max, decodedBy: SyncCodec(model: Self.peerModel))
    }

    /// The entity and property names of the peers' model (`SyncPeerModel`, in
    /// the peer's executable), all a codec reads.
    static let peerModel = ManagedObjectModel(entities: [
        EntityDescription(name: "Company", properties: [
            AttributeDescription(name: "key", type: .string), AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "employees", type: .integer64), AttributeDescription(name: "symbol", type: .string),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
            RelationshipDescription(name: "staff", destination: "Person", inverse: "employer", isToMany: true),
        ]),
        EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "key", type: .string), AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
        ]),
        EntityDescription(name: "Person", properties: [
            AttributeDescription(name: "key", type: .string), AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "employer", destination: "Company", inverse: "staff"),
        ]),
    ])

    /// Heals every link, syncs every replica until quiet (twice round, so each
    /// pulls what the others pushed), then a fresh replica that only pulls;
    /// checks the dumps against each other, the fresh one and the hub's log,
    /// and every peer's logged edits. Returns the fresh replica's dump.
    @discardableResult
    func converge(_ names: [String], through relays: [String: SyncLinkRelay], editors: [String: PeerProcess],
                  checkOracle: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) throws -> [SyncPeerObject] {
        for relay in relays.values { try relay.restore() }
        for _ in 0..<2 {
            for name in names { try syncUntilQuiet(name, through: relays[name]) }
        }
        try syncUntilQuiet("fresh", through: nil)
        let hubState = try dump("fresh")
        #expect(!hubState.isEmpty, "the fresh replica pulled nothing; \(self)", sourceLocation: sourceLocation)
        for name in names {
            let replica = try dump(name)
            // Built only for a replica that differs: the message reads the hub's whole log.
            guard replica != hubState else { continue }
            Issue.record(Comment(rawValue: """
                \(name) differs from the hub's state: \(Self.difference(replica, hubState)); \(self)
                the hub's log of those objects and of those sharing their unique keys: \(try hubHistory(differing: replica, hubState))
                """), sourceLocation: sourceLocation)
        }
        // And as a user checks it: `datastack dump --json --global-ids` of every file is the same text.
        let toolDumps = try (names + ["fresh"]).map { try DataStackTool.run(["dump", store($0), "--json", "--global-ids"]) }
        #expect(toolDumps.last?.isEmpty == false, "the fresh replica's dump is empty; \(self)", sourceLocation: sourceLocation)
        for (name, text) in zip(names, toolDumps) where text != toolDumps.last {
            Issue.record("datastack dump --json --global-ids of \(name) differs from the fresh replica's; \(self)", sourceLocation: sourceLocation)
        }
        guard checkOracle else { return hubState }
        let oracle = SyncConvergenceOracle(log: try hubLog())
        // A chunk pushed again (a kill or a cut after the hub committed it) is kept once.
        let pushes = oracle.log.map { "\($0.change.replica) \($0.change.localSequence)" }
        #expect(Set(pushes).count == pushes.count, "the hub holds a change twice; \(self)", sourceLocation: sourceLocation)
        let expected = oracle.expectedObjects()
        let differing = Set(hubState).symmetricDifference(expected).map(\.key).sorted().prefix(3)
        let message = Comment(rawValue: """
            the replicas differ from what the hub's log says: \(Self.difference(hubState, expected)); \(self)
            the hub's log of those objects: \(differing.flatMap { oracle.history(of: $0) }.joined(separator: "\n"))
            """)
        #expect(hubState == expected, message, sourceLocation: sourceLocation)
        var editCount = 0
        for name in names {
            let edits = try #require(editors[name]).lines(SyncPeerEdit.self)
            editCount += edits.count
            let replica = try SyncReplicaSummary.read(storeAt: URL(fileURLWithPath: store(name)))?.replica
            let problems = oracle.unaccounted(edits, replica: replica, peer: name)
            #expect(problems.isEmpty, "\(problems.count) of \(edits.count) logged edits lost: \(problems.prefix(5)); \(self)",
                    sourceLocation: sourceLocation)
            // The check can fail: an edit the hub never saw is reported.
            if let last = edits.last(where: { $0.op == "set" && $0.field == "name" }) {
                var lost = last
                lost.value = "never-pushed"
                #expect(oracle.unaccounted(edits + [lost], replica: replica, peer: name).count == problems.count + 1,
                        sourceLocation: sourceLocation)
            }
        }
        let offline = editors.values.reduce(0) { $0 + $1.offlineSyncs }
        print("SyncConvergence \(self): \(names.count) replicas, \(editCount) logged edit lines, \(offline) syncs offline, "
              + "\(oracle.log.count) changes on the hub, \(hubState.count) objects at the end")
        return hubState
    }

    /// The hub's log of the objects where two dumps differ, and of every
    /// object whose changes set a symbol one of them has (its unique-key twins).
    func hubHistory(differing actual: [SyncPeerObject], _ expected: [SyncPeerObject]) throws -> String {
        let oracle = SyncConvergenceOracle(log: try hubLog())
        let differing = Set(actual).symmetricDifference(expected)
        var keys = Set(differing.map(\.key))
        let symbols = Set(differing.compactMap { $0.values["symbol"] })
        for sequenced in oracle.log {
            guard case .string(let symbol)? = sequenced.change.values["symbol"], symbols.contains(symbol),
                  let key = oracle.keys[sequenced.change.objectID]?.key else { continue }
            keys.insert(key)
        }
        return keys.sorted().prefix(6).flatMap { oracle.history(of: $0) }.joined(separator: "\n")
    }

    /// The first lines where two dumps differ.
    static func difference(_ actual: [SyncPeerObject], _ expected: [SyncPeerObject]) -> String {
        let extra = Set(actual).subtracting(expected).sorted { $0.key < $1.key }.prefix(3)
        let missing = Set(expected).subtracting(actual).sorted { $0.key < $1.key }.prefix(3)
        return "has \(extra.map(\.description)), lacks \(missing.map(\.description)) (\(actual.count) vs \(expected.count) objects)"
    }
}

extension PeerProcess {
    /// The syncs a sync peer found offline so far.
    var offlineSyncs: Int { lines(SyncPeerSynced.self).filter { $0.sync == "offline" }.count }
    /// The syncs that failed for another reason than being offline.
    var errorSyncs: [String] { lines(SyncPeerSynced.self).filter { $0.sync == "error" }.map { $0.error ?? "" } }
}

/// SplitMix64, for the test's own choices (which link to cut), from the run's seed.
struct TestSplitMix64: RandomNumberGenerator {
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
