import Foundation
import Testing

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
        var reported = 0, unchanged = 0
        for (before, after) in zip(lines, lines.dropFirst()) where before.readError == nil && after.readError == nil {
            let earlier = Dictionary(uniqueKeysWithValues: before.watchlist.map { ($0.symbol, $0.updates) })
            // Every quote counts an update: a company the merge changed has a new count.
            let moved = Set(after.watchlist.filter { earlier[$0.symbol] != $0.updates }.map(\.symbol))
            #expect(Set(after.changed) == moved, "merge \(after.saved): observed \(after.changed), counts moved for \(moved.sorted())")
            reported += after.changed.count
            unchanged += after.watchlist.count - after.changed.count
        }
        #expect(reported > 0, "no merge changed a watched company")
        #expect(unchanged > 0, "every merge reported every watched company")
    }
}
