import DataStackPostgreSQL
import Foundation
import Testing

/// Issue #37, item 4: the stack across hosts. The server runs in a network
/// namespace of its own, listening on its address on a bridge; an importer
/// and a viewer (`datastack-postgresql-peer` processes) run in two others,
/// each joined to the bridge by a veth pair (``TestHosts``). The tests cut and
/// slow those links and restart the server, and check that every save a
/// process reports reaches the viewer once, that nothing is half-committed,
/// and how long merges and catch-ups take. Root only: `ip netns` needs it.
@Suite("PostgreSQL across hosts", .serialized, .enabled(if: TestHosts.unavailableReason == nil, Comment(rawValue: TestHosts.unavailableReason ?? "")))
struct HostTests {
    /// libpq parameters of the peers' URLs: a link that goes silent is given
    /// up on after 3 s, by both ends.
    static let linkParameters = "keepalives_idle=1&keepalives_interval=1&keepalives_count=2&tcp_user_timeout=3000"
    /// The peers' connect timeout: short, as on a LAN.
    static let connectTimeoutMilliseconds = 300

    /// A server on its own namespace and hosts for the importer and the viewer; removed at the end, also on failure.
    final class Network {
        let hosts: TestHosts
        let server: PostgreSQLTestServer

        init() throws {
            hosts = try TestHosts(hosts: ["importer", "viewer"])
            do {
                server = try PostgreSQLTestServer.start(network: .init(namespace: hosts.server.namespace, address: hosts.server.address,
                                                                       trustedRange: hosts.range))
            } catch {
                hosts.remove()
                throw error
            }
        }

        deinit {
            server.stop()
            hosts.remove()
        }

        /// A new database, with its URL over the network (the tests use the Unix socket URL themselves).
        func makeDatabase() throws -> (network: URL, local: URL) {
            let local = try server.makeDatabase()
            let name = String(local.path.dropFirst())
            guard let network = server.networkURL(database: name, parameters: HostTests.linkParameters) else {
                throw TestHostsError(description: "the server has no network address")
            }
            return (network, local)
        }

        /// A peer on `host`'s namespace.
        func peer(_ mode: String, on host: String, _ url: URL, _ arguments: [String] = []) throws -> PeerProcess {
            try PeerProcess([mode, url.absoluteString, "--connect-timeout-ms", "\(HostTests.connectTimeoutMilliseconds)"] + arguments,
                            namespace: try hosts.host(host).namespace)
        }

        /// A viewer on its namespace, once it has reported what it shows:
        /// from then on it has merged nothing yet and misses nothing.
        func readyViewer(_ url: URL, until deadline: ContinuousClock.Instant) throws -> PeerProcess {
            let viewer = try peer("viewer", on: "viewer", url)
            guard !viewer.wait(for: PeerSeen.self, until: deadline, { !$0.isEmpty }).isEmpty else {
                viewer.closeStdin()
                throw TestHostsError(description: "the viewer reported nothing: \(viewer.stderrText)")
            }
            return viewer
        }
    }

    // MARK: - Steady state

    @Test("steady: every save the importer reports is merged once by the viewer on another host; latency without and with 5 ms of delay")
    func steadyState() throws {
        let network = try Network()
        defer { withExtendedLifetime(network) {} }   // the server and namespaces outlive every peer
        let plain = try runSteady(network, saves: 150, label: "no added delay")
        // Targets: median ≤ 5 ms, p99 ≤ 25 ms without delay. Checked loosely (a shared CI machine
        // is noisy); the printed numbers are what the README reports.
        #expect(plain.median < 0.050, "median \(plain.median * 1000) ms")
        let delayed: Latency
        do {
            try network.hosts.delay("importer", milliseconds: 5)
            delayed = try runSteady(network, saves: 100, label: "netem delay 5ms on the importer's link")
        } catch let error as TestHostsError where error.description.contains("qdisc kind is unknown") {
            // A kernel without sch_netem (CONFIG_NET_SCH_NETEM, as in some VMs): the same 5 ms on the
            // importer's sends, by a relay in the server's namespace that holds each byte 5 ms.
            print("HostTests steady: this kernel has no netem qdisc; the importer's 5 ms go through a delaying relay instead")
            let relay = try PeerProcess(["relay", "\(network.hosts.server.address):6543", "--to", "\(network.hosts.server.address):5432",
                                         "--delay-ms", "5"], namespace: network.hosts.server.namespace)
            defer { relay.kill() }
            try #require(!relay.wait(for: RelayListening.self, until: .now + .seconds(10)) { !$0.isEmpty }.isEmpty, "relay: \(relay.stderrText)")
            delayed = try runSteady(network, saves: 100, label: "5 ms relay on the importer's link", importerPort: 6543)
        }
        #expect(delayed.median >= 0.005, "the 5 ms delay shows: median \(delayed.median * 1000) ms")
    }

    /// The relay's first line.
    private struct RelayListening: Decodable {
        var listening: Int
    }

    private struct Latency {
        var median: Double
        var p99: Double
    }

    /// An importer saves `saves` times, 20 ms apart; the viewer shows each. Returns the merge latency.
    private func runSteady(_ network: Network, saves: Int, label: String, importerPort: Int = 5432) throws -> Latency {
        let (url, local) = try network.makeDatabase()
        let deadline = ContinuousClock.now + .seconds(60)
        let viewer = try network.readyViewer(url, until: deadline)
        defer { viewer.closeStdin() }
        let importerURL = try #require(network.server.networkURL(database: String(local.path.dropFirst()), port: importerPort,
                                                                 parameters: HostTests.linkParameters))
        let importer = try network.peer("importer", on: "importer", importerURL, ["--name", "A", "--count", "\(saves)", "--interval-ms", "20"])
        try #require(importer.waitForExit(until: deadline), "the importer did not finish: \(importer.stderrText)")
        #expect(importer.exitStatus == 0, "importer: \(importer.stderrText)")
        let saved = importer.lines(PeerSaved.self)
        #expect(saved.count == saves)
        let names = Set(saved.map(\.saved))
        let lastToken = saved.map(\.token).max() ?? 0
        let lines = viewer.wait(for: PeerSeen.self, until: deadline) { ($0.last?.token ?? 0) >= lastToken && names.isSubset(of: $0.last?.entries ?? []) }
        let final = try #require(lines.last)
        #expect(names.subtracting(final.entries).isEmpty, "not merged: \(names.subtracting(final.entries).sorted())")
        #expect(final.entries.count == saves && Set(final.entries).count == saves, "each save once, nothing else")
        #expect(final.counter == Int64(saves), "the counter, refreshed by the merges")
        expectMonotonic(lines)
        try expectStored(names, counter: Int64(saves), at: local)

        // Latency: the first viewer line showing an entry, minus when its save was called (one clock: one machine).
        var firstSeen: [String: Double] = [:]
        for line in lines {
            guard let at = line.at else { continue }
            for entry in line.entries where firstSeen[entry] == nil { firstSeen[entry] = at }
        }
        let latencies = saved.compactMap { save -> Double? in
            guard let at = save.at, let seen = firstSeen[save.saved] else { return nil }
            return seen - at
        }.sorted()
        try #require(!latencies.isEmpty)
        let latency = Latency(median: latencies[latencies.count / 2], p99: latencies[min(latencies.count - 1, latencies.count * 99 / 100)])
        print(String(format: "HostTests steady (%@): %d saves merged across namespaces, latency median %.2f ms, p99 %.2f ms, max %.2f ms",
                     label, saves, latency.median * 1000, latency.p99 * 1000, (latencies.last ?? 0) * 1000))
        return latency
    }

    // MARK: - The reader pool over a slow link

    @Test("three contexts behind a 5 ms link read at least twice as fast with five reader sessions as with one")
    func readerPoolOverASlowLink() throws {
        let network = try Network()
        defer { withExtendedLifetime(network) {} }
        let (_, local) = try network.makeDatabase()
        let name = String(local.path.dropFirst())
        let delayedURL: URL
        var relay: PeerProcess?
        defer { relay?.kill() }
        do {
            try network.hosts.delay("importer", milliseconds: 5)
            delayedURL = try #require(network.server.networkURL(database: name, parameters: Self.linkParameters))
        } catch let error as TestHostsError where error.description.contains("qdisc kind is unknown") {
            // No netem in this kernel: the same 5 ms by the relay (see steadyState).
            let started = try PeerProcess(["relay", "\(network.hosts.server.address):6543", "--to", "\(network.hosts.server.address):5432",
                                           "--delay-ms", "5"], namespace: network.hosts.server.namespace)
            relay = started
            try #require(!started.wait(for: RelayListening.self, until: .now + .seconds(10)) { !$0.isEmpty }.isEmpty, "relay: \(started.stderrText)")
            delayedURL = try #require(network.server.networkURL(database: name, port: 6543, parameters: Self.linkParameters))
        }
        func readsPerSecond(_ readers: Int) throws -> Double {
            let peer = try network.peer("readers", on: "importer", delayedURL, ["--contexts", "3", "--seconds", "2", "--max-readers", "\(readers)"])
            try #require(peer.waitForExit(until: .now + .seconds(60)), "readers did not finish: \(peer.stderrText)")
            #expect(peer.exitStatus == 0, "readers: \(peer.stderrText)")
            let result = try #require(peer.lines(ReadersResult.self).first, "readers: \(peer.stderrText)")
            return Double(result.reads) / result.seconds
        }
        let one = try readsPerSecond(1)
        let five = try readsPerSecond(5)
        print(String(format: "HostTests readers over a 5 ms link: three contexts, %.0f reads/s with one session, %.0f with five (%.2fx)",
                     one, five, five / one))
        #expect(five >= 2 * one, "the pool lets the three contexts read at once: \(one) then \(five) reads/s")
    }

    /// The `readers` mode's line.
    private struct ReadersResult: Decodable {
        var reads: Int
        var seconds: Double
    }

    // MARK: - Partitions

    @Test("partition: the viewer's link down 5 s while the importer saves; once up, it catches up from history, nothing lost or merged twice")
    func viewerPartition() throws {
        let network = try Network()
        defer { withExtendedLifetime(network) {} }   // the server and namespaces outlive every peer
        let (url, local) = try network.makeDatabase()
        let deadline = ContinuousClock.now + .seconds(90)
        let viewer = try network.readyViewer(url, until: deadline)
        defer { viewer.closeStdin() }
        let importer = try network.peer("importer", on: "importer", url, ["--name", "A", "--count", "200", "--interval-ms", "40"])
        try #require(viewer.wait(for: PeerSeen.self, until: deadline) { ($0.last?.entries.count ?? 0) >= 5 }.last.map { $0.entries.count >= 5 } == true,
                     "the viewer never followed: \(viewer.stderrText)")

        try network.hosts.setLink(of: "viewer", up: false)
        let linesAtCut = viewer.lines(PeerSeen.self).count
        let savedAtCut = importer.lines(PeerSaved.self).count
        // The partition lasts 5 s: a duration the scenario sets, not a wait for an event.
        Thread.sleep(forTimeInterval: 5)
        let savedDuring = Set(importer.lines(PeerSaved.self).map(\.saved))
        #expect(savedDuring.count >= savedAtCut + 50, "the importer went on saving: \(savedDuring.count - savedAtCut) saves")
        let seenDuring = viewer.lines(PeerSeen.self)
        #expect(seenDuring.count <= linesAtCut + 1, "the viewer merged nothing while cut off (a line in flight at most)")

        // From just before the command: the viewer may catch up before `ip` has exited.
        let up = Date().timeIntervalSince1970
        try network.hosts.setLink(of: "viewer", up: true)
        let caughtUp = viewer.wait(for: PeerSeen.self, until: deadline) { savedDuring.isSubset(of: $0.last?.entries ?? []) }
        let catchUpLine = try #require(caughtUp.first { savedDuring.isSubset(of: $0.entries) }, "never caught up: \(viewer.stderrText)")
        let catchUp = (catchUpLine.at ?? up) - up

        try #require(importer.waitForExit(until: deadline), "the importer did not finish")
        #expect(importer.exitStatus == 0, "importer: \(importer.stderrText)")
        let saved = importer.lines(PeerSaved.self)
        let names = Set(saved.map(\.saved))
        let lastToken = saved.map(\.token).max() ?? 0
        let lines = viewer.wait(for: PeerSeen.self, until: deadline) { ($0.last?.token ?? 0) >= lastToken && names.isSubset(of: $0.last?.entries ?? []) }
        let final = try #require(lines.last)
        #expect(names.subtracting(final.entries).isEmpty, "lost: \(names.subtracting(final.entries).sorted())")
        #expect(final.entries.count == names.count && Set(final.entries).count == final.entries.count, "nothing twice, nothing else")
        #expect(final.counter == Int64(names.count))
        expectMonotonic(lines)
        try expectStored(names, counter: Int64(names.count), at: local)
        print(String(format: "HostTests partition: %d saves while the viewer was cut off for 5 s; caught up %.0f ms after the link returned",
                     savedDuring.count - savedAtCut, catchUp * 1000))
        #expect(catchUp < 3, "caught up \(catchUp) s after the link returned (target ≤ 1 s)")
    }

    @Test("the importer's link down mid-save: the save throws ioFailure, nothing of it is committed, the next save succeeds")
    func importerLinkDownMidSave() throws {
        let network = try Network()
        defer { withExtendedLifetime(network) {} }   // the server and namespaces outlive every peer
        let (url, local) = try network.makeDatabase()
        let deadline = ContinuousClock.now + .seconds(60)
        let viewer = try network.readyViewer(url, until: deadline)
        defer { viewer.closeStdin() }

        // The save's key for its Entry comes from Z_PRIMARYKEY's row, held here: the save waits
        // there, inside its transaction, until the link is down.
        let blocker = try PostgreSQLConnection(url: local)
        defer { blocker.close() }
        _ = try blocker.execute("BEGIN")
        _ = try blocker.execute("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Entry' FOR UPDATE")
        // A second between saves: the link is up again before the next one.
        let importer = try network.peer("importer", on: "importer", url, ["--name", "A", "--count", "3", "--interval-ms", "1000", "--keep-going"])
        try #require(try blocker.waitUntilSessionsWaitForALock(1, within: 30), "the save never reached the key counter: \(importer.stderrText)")
        try network.hosts.setLink(of: "importer", up: false)
        let cut = ContinuousClock.now
        _ = try blocker.execute("ROLLBACK")   // the save goes on on the server; its answers are lost

        let failed = importer.wait(for: PeerFailed.self, until: deadline) { !$0.isEmpty }
        let failure = try #require(failed.first, "the save did not throw: \(importer.stderrText)")
        let took = ContinuousClock.now - cut
        #expect(failure.failed == "A-1")
        #expect(failure.code == "ioFailure", "\(failure.code): \(failure.error)")
        #expect(failure.error.contains("PostgreSQL server at 10.77.0.1:5432"), "names the server: \(failure.error)")
        try network.hosts.setLink(of: "importer", up: true)

        try #require(importer.waitForExit(until: deadline), "the importer did not finish: \(importer.stderrText)")
        #expect(importer.exitStatus == 0, "importer: \(importer.stderrText)")
        let saved = Set(importer.lines(PeerSaved.self).map(\.saved))
        #expect(saved == ["A-2", "A-3"], "the next saves succeed: \(saved.sorted())")
        try expectStored(saved, counter: 2, at: local)
        let lines = viewer.wait(for: PeerSeen.self, until: deadline) { saved.isSubset(of: $0.last?.entries ?? []) }
        #expect(lines.last.map { Set($0.entries) } == saved, "the viewer shows the saves that committed, only")
        print("HostTests importer link down mid-save: the save threw \(took) after the cut (keepalives 3 s): \(failure.error.prefix(160))")
    }

    @Test("pg_ctl restart -m fast mid-import: saves in flight throw ioFailure, none is half-committed, the saves after it succeed and reach the viewer")
    func serverRestartMidImport() throws {
        let network = try Network()
        defer { withExtendedLifetime(network) {} }   // the server and namespaces outlive every peer
        let (url, local) = try network.makeDatabase()
        let deadline = ContinuousClock.now + .seconds(90)
        let viewer = try network.readyViewer(url, until: deadline)
        defer { viewer.closeStdin() }
        let importer = try network.peer("importer", on: "importer", url, ["--name", "A", "--count", "120", "--interval-ms", "20", "--keep-going"])
        try #require(importer.wait(for: PeerSaved.self, until: deadline) { $0.count >= 20 }.count >= 20, "importer: \(importer.stderrText)")

        try network.server.restartFast()
        let savedAtRestart = importer.lines(PeerSaved.self).count

        try #require(importer.waitForExit(until: deadline), "the importer did not finish: \(importer.stderrText)")
        #expect(importer.exitStatus == 0, "importer: \(importer.stderrText)")
        let saved = Set(importer.lines(PeerSaved.self).map(\.saved))
        let failed = importer.lines(PeerFailed.self)
        #expect(saved.count + failed.count == 120)
        #expect(saved.count > savedAtRestart, "saves after the restart succeed")
        for failure in failed { #expect(failure.code == "ioFailure", "\(failure.failed): \(failure.code) \(failure.error)") }
        // Nothing half-committed: an entry is there exactly when its save reported success, and the
        // counter counts them (each save inserts its entry and increments the counter, or does neither).
        try expectStored(saved, counter: Int64(saved.count), at: local)

        let lastToken = importer.lines(PeerSaved.self).map(\.token).max() ?? 0
        // Its own 30 s from here: under load the import may have used most of the test's deadline.
        let lines = viewer.wait(for: PeerSeen.self, until: .now + .seconds(30)) {
            ($0.last?.token ?? 0) >= lastToken && saved.isSubset(of: $0.last?.entries ?? [])
        }
        let final = try #require(lines.last)
        #expect(Set(final.entries) == saved && final.entries.count == saved.count, "the viewer merged every save once, nothing else")
        #expect(final.counter == Int64(saved.count))
        expectMonotonic(lines)
        print("HostTests restart mid-import: \(saved.count) saves committed, \(failed.count) threw ioFailure during the restart "
              + "(\(failed.map(\.failed).joined(separator: ", ")))")
    }

    // MARK: - A standby

    @Test("a standby on a fourth host: the viewer reads from it and never shows older data than the last save it merged; the standby stopped, it keeps merging")
    func viewerReadsFromAStandby() throws {
        let hosts = try TestHosts(hosts: ["importer", "viewer", "standby"])
        defer { hosts.remove() }
        let primary = try PostgreSQLTestServer.start(network: .init(namespace: hosts.server.namespace, address: hosts.server.address,
                                                                    trustedRange: hosts.range))
        defer { primary.stop() }
        let standbyHost = try hosts.host("standby")
        let standby = try primary.startStandby(network: .init(namespace: standbyHost.namespace, address: standbyHost.address,
                                                              trustedRange: hosts.range))
        defer { standby.stop() }
        let local = try primary.makeDatabase()
        let name = String(local.path.dropFirst())
        let primaryURL = try #require(primary.networkURL(database: name, parameters: Self.linkParameters))
        let standbyURL = try #require(standby.networkURL(database: name, parameters: Self.linkParameters))
        let encoded = try #require(standbyURL.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let viewerURL = try #require(URL(string: primaryURL.absoluteString + "&standby=\(encoded)"))
        let deadline = ContinuousClock.now + .seconds(90)
        // The standby has the database once it replayed its creation.
        let standbyControl = try connect(to: standby.url(database: name), until: deadline)
        defer { standbyControl.close() }

        let viewer = try PeerProcess(["viewer", viewerURL.absoluteString, "--connect-timeout-ms", "\(Self.connectTimeoutMilliseconds)"],
                                     namespace: try hosts.host("viewer").namespace)
        defer { viewer.closeStdin() }
        try #require(!viewer.wait(for: PeerSeen.self, until: deadline) { !$0.isEmpty }.isEmpty, "viewer: \(viewer.stderrText)")
        let importer = try PeerProcess(["importer", primaryURL.absoluteString, "--name", "A", "--count", "120", "--interval-ms", "20",
                                        "--connect-timeout-ms", "\(Self.connectTimeoutMilliseconds)"],
                                       namespace: try hosts.host("importer").namespace)
        try #require(viewer.wait(for: PeerSeen.self, until: deadline) { ($0.last?.entries.count ?? 0) >= 30 }.last.map { $0.entries.count >= 30 } == true,
                     "the viewer never followed: \(viewer.stderrText)")
        // The viewer's reads run on the standby: its sessions there come from the viewer's address.
        let viewerSessions = try standbyControl.execute("SELECT count(*) FROM pg_stat_activity WHERE client_addr = $1::inet",
                                                        [.text(try hosts.host("viewer").address)]).int64(row: 0, column: 0) ?? 0
        #expect(viewerSessions > 0, "the viewer reads from the standby")

        standbyControl.close()
        try standby.stopKeepingData()
        let savedAtStop = importer.lines(PeerSaved.self).count

        try #require(importer.waitForExit(until: deadline), "the importer did not finish: \(importer.stderrText)")
        #expect(importer.exitStatus == 0, "importer: \(importer.stderrText)")
        let saved = importer.lines(PeerSaved.self)
        let names = Set(saved.map(\.saved))
        #expect(saved.count == 120)
        #expect(saved.count > savedAtStop, "saves after the standby stopped")
        let lastToken = saved.map(\.token).max() ?? 0
        let lines = viewer.wait(for: PeerSeen.self, until: deadline) { ($0.last?.token ?? 0) >= lastToken && names.isSubset(of: $0.last?.entries ?? []) }
        let final = try #require(lines.last)
        #expect(Set(final.entries) == names && final.entries.count == names.count, "every save once, after the standby stopped too")
        #expect(final.counter == 120)
        expectMonotonic(lines)
        // Never older than the last merged save: a line that merged up to a save's token shows
        // at least the counter that save wrote (the counter object is refreshed by the merges).
        let counterByToken = Dictionary(saved.map { ($0.token, $0.counter) }, uniquingKeysWith: max)
        for line in lines {
            guard let token = line.token, let written = counterByToken.filter({ $0.key <= token }).values.max() else { continue }
            #expect((line.counter ?? 0) >= written, "merged up to \(token) but shows counter \(String(describing: line.counter)) < \(written)")
        }
        try expectStored(names, counter: 120, at: local)
        print("HostTests standby: the viewer read from the standby (\(viewerSessions) sessions), \(saved.count - savedAtStop) saves merged "
              + "after it stopped, in \(lines.count) viewer lines")
    }

    /// A connection to `url`, retried while it fails to connect (a standby replaying a new database).
    private func connect(to url: URL, until deadline: ContinuousClock.Instant) throws -> PostgreSQLConnection {
        while true {
            do {
                return try PostgreSQLConnection(url: url)
            } catch let error as PostgreSQLError where error.kind == .connectionFailed && ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
    }

    // MARK: - Helpers

    /// What the store holds, read over the Unix socket: exactly these entries, and the counter at `counter`.
    private func expectStored(_ entries: Set<String>, counter: Int64, at url: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let check = try PostgreSQLConnection(url: url)
        defer { check.close() }
        let rows = try check.execute("SELECT ZNAME FROM ZENTRY")
        let stored = (0..<rows.rowCount).compactMap { rows.string(row: $0, column: 0) }
        #expect(Set(stored) == entries && stored.count == entries.count, "stored: \(stored.sorted())", sourceLocation: sourceLocation)
        // No row is a failed expectation, not a read past the result (a programmer error that traps).
        let counters = try check.execute("SELECT ZVALUE FROM ZCOUNTER")
        try #require(counters.rowCount == 1, "ZCOUNTER holds \(counters.rowCount) rows", sourceLocation: sourceLocation)
        let value = try counters.int64(row: 0, column: 0)
        #expect(value == counter, "the counter holds \(String(describing: value))", sourceLocation: sourceLocation)
    }

    /// Merges never go back: the counter and the merged token only grow.
    private func expectMonotonic(_ lines: [PeerSeen], sourceLocation: SourceLocation = #_sourceLocation) {
        for (earlier, later) in zip(lines, lines.dropFirst()) {
            #expect((earlier.counter ?? 0) <= (later.counter ?? 0) && (earlier.token ?? 0) <= (later.token ?? 0),
                    "went back: \(String(describing: earlier.token)) then \(String(describing: later.token))", sourceLocation: sourceLocation)
        }
    }
}
