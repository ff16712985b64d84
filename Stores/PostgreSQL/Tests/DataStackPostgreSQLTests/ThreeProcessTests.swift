import Foundation
import Testing

/// Issue #21: two importers and one viewer, each a `datastack-postgresql-peer`
/// process with a stack of its own on one database. Every save an importer
/// reports reaches the viewer through the store's history and
/// `LISTEN`/`NOTIFY`; both importers increment one counter and no increment
/// is lost; a viewer killed mid-run and started again catches up with what
/// was saved while none ran.
@Suite(.serialized) struct ThreeProcessTests {
    /// Saves per importer; each inserts an entry and increments the counter.
    static let saves = 60
    /// The importers' pause between saves, so that the run outlasts a viewer's restart.
    static let intervalMilliseconds = 10
    /// How long the test waits for the processes, all waits together. Alone
    /// it takes a few seconds; a limit, not a measurement.
    static let timeLimit = Duration.seconds(30)

    private func importer(_ name: String, on url: URL) throws -> PeerProcess {
        try PeerProcess(["importer", url.absoluteString, "--name", name, "--count", "\(Self.saves)",
                         "--interval-ms", "\(Self.intervalMilliseconds)"])
    }

    /// The entries the importers reported saving.
    private func reported(_ importers: [PeerProcess]) -> Set<String> {
        Set(importers.flatMap { $0.lines(PeerSaved.self).map(\.saved) })
    }

    /// Merges never go back: the counter and the merged token a viewer shows only grow.
    private func expectMonotonic(_ lines: [PeerSeen], _ viewer: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (earlier, later) in zip(lines, lines.dropFirst()) {
            #expect((earlier.counter ?? 0) <= (later.counter ?? 0), "\(viewer): counter \(String(describing: earlier.counter)) then \(String(describing: later.counter))",
                    sourceLocation: sourceLocation)
            #expect((earlier.token ?? 0) <= (later.token ?? 0), "\(viewer): token \(String(describing: earlier.token)) then \(String(describing: later.token))",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("two importers and a viewer: every reported save reaches the viewer, no increment is lost, a restarted viewer catches up")
    func twoImportersAndAViewer() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: PeerProcess.executable.path),
                     "build datastack-postgresql-peer first (swift build --build-tests)")
        let started = ContinuousClock.now
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let deadline = ContinuousClock.now + Self.timeLimit
        let total = 2 * Self.saves

        // The viewer first (it creates the store's tables), so that it is up
        // before the importers start however slowly processes start.
        let firstViewer = try PeerProcess(["viewer", url.absoluteString])
        let up = firstViewer.wait(for: PeerSeen.self, until: deadline) { !$0.isEmpty }
        try #require(!up.isEmpty, "viewer: \(firstViewer.stderrText)")
        let importers = [try importer("A", on: url), try importer("B", on: url)]

        // The viewer follows the run: it shows entries of both importers.
        let followed = firstViewer.wait(for: PeerSeen.self, until: deadline) { lines in
            guard let entries = lines.last?.entries else { return false }
            return entries.contains { $0.hasPrefix("A-") } && entries.contains { $0.hasPrefix("B-") }
        }
        try #require(followed.last.map { $0.entries.count > 0 } == true, "viewer: \(firstViewer.stderrText)")

        // Killed mid-run; the importers go on saving while no viewer runs.
        firstViewer.kill()
        #expect(firstViewer.wasKilled)
        let reportedAtKill = reported(importers)
        #expect(reportedAtKill.count < total - 10, "killed mid-run")
        for importer in importers {
            let before = importer.lines(PeerSaved.self).count
            importer.wait(for: PeerSaved.self, until: deadline) { $0.count >= before + 5 }
        }
        let savedWithoutViewer = reported(importers).subtracting(reportedAtKill)
        #expect(savedWithoutViewer.count >= 10, "saves while no viewer ran: \(savedWithoutViewer.count)")
        let secondViewer = try PeerProcess(["viewer", url.absoluteString])

        // The importers finish.
        for (name, importer) in zip(["A", "B"], importers) {
            try #require(importer.waitForExit(until: deadline), "importer \(name) did not finish")
            #expect(importer.exitStatus == 0, "importer \(name): \(importer.stderrText)")
        }
        let saves = importers.flatMap { $0.lines(PeerSaved.self) }
        #expect(saves.count == total)
        let saved = Set(saves.map(\.saved))
        #expect(saved.count == total, "each importer's entries have names of their own")

        // No lost update: each save wrote the counter one more than the last
        // committed value, so the values written are 1…2N, each once.
        #expect(saves.map(\.counter).sorted() == Array(1...Int64(total)))
        #expect(Set(saves.map(\.token)).count == total, "each save is a history transaction of its own")

        // The restarted viewer catches up: every reported save, those saved while no viewer ran among them.
        let lastToken = saves.map(\.token).max() ?? 0
        let caughtUp = secondViewer.wait(for: PeerSeen.self, until: deadline) { lines in
            guard let last = lines.last else { return false }
            return saved.isSubset(of: last.entries) && last.counter == Int64(total) && (last.token ?? 0) >= lastToken
        }
        let final = try #require(caughtUp.last, "second viewer: \(secondViewer.stderrText)")
        #expect(saved.subtracting(final.entries).isEmpty, "not visible to the viewer: \(saved.subtracting(final.entries).sorted())")
        #expect(savedWithoutViewer.isSubset(of: final.entries))
        #expect(final.entries.count == total, "the viewer shows only what was saved")
        #expect(final.counter == Int64(total), "the viewer's counter, refreshed by its merges")
        #expect((final.token ?? 0) >= lastToken, "the viewer merged up to \(String(describing: final.token)), the last save is \(lastToken)")

        // What the first viewer showed before its kill was all saved, and never went back.
        let firstLines = firstViewer.lines(PeerSeen.self)
        #expect(Set(firstLines.flatMap(\.entries)).isSubset(of: saved))
        expectMonotonic(firstLines, "first viewer")
        expectMonotonic(caughtUp, "second viewer")

        // A fresh coordinator reads the same. (Waits of their own: a run that
        // failed above used the deadline up, and these say more than a timeout.)
        let reader = try PeerProcess(["read", url.absoluteString])
        try #require(reader.waitForExit(until: .now + .seconds(10)), "read did not finish")
        #expect(reader.exitStatus == 0, "read: \(reader.stderrText)")
        let read = try #require(reader.lines(PeerSeen.self).first, "read: \(reader.stderrText)")
        #expect(read.counter == Int64(total))
        #expect(read.entries == saved.sorted())

        // The viewer stops when its stdin closes.
        secondViewer.closeStdin()
        #expect(secondViewer.waitForExit(until: .now + .seconds(10)), "the viewer did not stop when its stdin closed")
        #expect(secondViewer.exitStatus == 0, "second viewer: \(secondViewer.stderrText)")

        let retries = saves.map { $0.attempts - 1 }.reduce(0, +)
        print("ThreeProcessTests: \(total) saves by two importers (\(retries) retries after merge conflicts on the counter, "
              + "at most \(saves.map(\.attempts).max() ?? 0) tries for one save), "
              + "\(reportedAtKill.count) reported when the first viewer was killed, \(savedWithoutViewer.count) saved while "
              + "no viewer ran; the second viewer caught up in \(caughtUp.count) lines; in \(ContinuousClock.now - started)")
    }
}
