import Foundation
import Testing
import DataStack

/// ticker-import closes its stack when it stops — at the end of `--duration`
/// or on Ctrl-C — so that the store's main file holds every save and the
/// write-ahead log is empty.
@Suite(.serialized) struct TickerImportShutdownTests {
    @Test(arguments: [["--import-only"], []])
    func aRunThatEndsWithItsDurationLeavesEverySaveInTheMainFile(_ mode: [String]) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try TickerImportProcess.run(mode + ["--json", "--duration", "1", "--batch", "100", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let stockUpdates = mode.isEmpty ? try #require(result.lines.last).stockUpdates
            : try #require(TickerImportProcess.lines(in: Data(result.stdout.utf8), as: TickerImportProcess.SaveLine.self).last).stockUpdates
        #expect(stockUpdates > 0)
        #expect(StoreFileChecks.logSize(of: directory.storeURL) == 0)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZSTOCKUPDATE") == stockUpdates)
    }

    @Test func ctrlCLeavesEverySaveInTheMainFile() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let importer = try TickerImportChild(arguments: ["--import-only", "--json", "--batch", "100", "--store", directory.storeURL.path],
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        let saves = importer.waitForLines(TickerImportProcess.SaveLine.self, count: 5, timeout: .seconds(10))
        try #require(saves.count >= 5, "stderr: \(importer.stderrText)")
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(10)))
        #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
        let last = try #require(importer.lines(TickerImportProcess.SaveLine.self).last)
        #expect(last.final)
        #expect(StoreFileChecks.logSize(of: directory.storeURL) == 0)
        #expect(try StoreFileChecks.rowsInMainFileAlone(of: directory.storeURL, table: "ZSTOCKUPDATE") == last.stockUpdates)
    }
}
