import Foundation
import Testing

/// `changed` of each line equals the watched companies whose update counts
/// moved since the line before (every quote counts an update), over the
/// companies both lines show; returns how many were reported and how many not.
private func checkChangedAgainstCounts(_ lines: [TickerImportProcess.Line]) -> (reported: Int, unchanged: Int) {
    var reported = 0, unchanged = 0
    for (before, after) in zip(lines, lines.dropFirst()) where before.readError == nil && after.readError == nil {
        let earlier = Dictionary(uniqueKeysWithValues: before.watchlist.map { ($0.symbol, $0.updates) })
        // A company first shown by this line was not observed before it.
        let comparable = after.watchlist.filter { earlier[$0.symbol] != nil }
        let moved = Set(comparable.filter { earlier[$0.symbol] != $0.updates }.map(\.symbol))
        #expect(Set(after.changed) == moved, "merge \(after.saved): observed \(after.changed), counts moved for \(moved.sorted())")
        reported += after.changed.count
        unchanged += comparable.count - after.changed.count
    }
    return (reported, unchanged)
}

/// ticker-import's watchlist learns from the Observation framework which watched
/// companies a merge changed (`WatchlistModel`): exactly those, every time.
@Suite struct TickerImportObservationTests {
    @Test func eachLineNamesExactlyTheWatchedCompaniesItsMergeChanged() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path),
                     "build ticker-import first (swift build)")
        let directory = StackDirectory()
        // 200 companies, 20 quotes a save: a save changes one of the ten watched companies in most merges, not all ten.
        let result = try TickerImportProcess.run(["--json", "--duration", "3", "--tickers", "200", "--batch", "20",
                                                  "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = result.lines.filter { !$0.final }
        try #require(lines.count >= 5, "\(lines.count) merges")
        let (reported, unchanged) = checkChangedAgainstCounts(lines)
        #expect(reported > 0, "no merge changed a watched company")
        #expect(unchanged > 0, "every merge reported every watched company")
    }

    /// The same through another process's saves: a `--view-only` process
    /// merges an `--import-only` one's transactions from the history.
    @Test func anotherProcesssSavesAreObservedAsPrecisely() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path),
                     "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let store = ["--json", "--tickers", "200", "--store", directory.storeURL.path]
        let viewer = try TickerImportChild(arguments: ["--view-only"] + store, stderr: directory.url.appendingPathComponent("viewer.txt"))
        // No event says the file was made: the target's one poll watches for it.
        try #require(await waitUntil("the viewer creating the store", deadline: .seconds(30)) {
            FileManager.default.fileExists(atPath: directory.storeURL.path)
        }, "stderr: \(viewer.stderrText)")
        let importer = try TickerImportChild(arguments: ["--import-only", "--batch", "20"] + store,
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        let saves = importer.waitForLines(TickerImportProcess.SaveLine.self, count: 12, timeout: .seconds(10))
        try #require(saves.count >= 12, "stderr: \(importer.stderrText)")
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(5)))
        let imported = try #require(importer.lines(TickerImportProcess.SaveLine.self).last)
        #expect(viewer.waitForReported(timeout: .seconds(30)) { $0.last?.saved == imported.saved },
                "the viewer reported the importer's last save")
        viewer.send(SIGINT)
        try #require(viewer.waitForExit(timeout: .seconds(5)))
        #expect(viewer.exitStatus == 0, "stderr: \(viewer.stderrText)")
        let lines = viewer.reported.filter { !$0.final }
        #expect(lines.allSatisfy { $0.source == "otherProcess" })
        let (reported, unchanged) = checkChangedAgainstCounts(lines)
        #expect(reported > 0, "no merge changed a watched company")
        #expect(unchanged > 0, "every merge reported every watched company")
    }
}
