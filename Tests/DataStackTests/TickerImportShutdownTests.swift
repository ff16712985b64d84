import Foundation
import Testing
import DataStack

/// ticker-import closes its stack when it stops — at the end of `--duration`
/// or on Ctrl-C — so that the store's main file holds every save and the
/// write-ahead log is empty.
@Suite(.serialized) struct TickerImportShutdownTests {
    /// The stock updates in the store's main file alone, read from a copy of
    /// that one file: rows still in the `-wal` are not in it.
    private static func stockUpdatesInMainFileAlone(of store: URL) throws -> Int {
        let copy = StackDirectory()
        let alone = copy.url.appendingPathComponent("alone.sqlite")
        try FileManager.default.copyItem(at: store, to: alone)
        let connection = try Connection(path: alone.path)
        let statement = try connection.prepare("SELECT count(*) FROM ZSTOCKUPDATE")
        _ = try statement.step()
        return Int(statement.int64(at: 0))
    }

    private static func logSize(of store: URL) -> Int {
        // No -wal is an empty one.
        ((try? FileManager.default.attributesOfItem(atPath: store.path + "-wal"))?[.size] as? Int) ?? 0
    }

    @Test(arguments: [["--import-only"], []])
    func aRunThatEndsWithItsDurationLeavesEverySaveInTheMainFile(_ mode: [String]) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try TickerImportProcess.run(mode + ["--json", "--duration", "1", "--batch", "100", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let stockUpdates = mode.isEmpty ? try #require(result.lines.last).stockUpdates
            : try #require(TickerImportProcess.lines(in: Data(result.stdout.utf8), as: TickerImportProcess.SaveLine.self).last).stockUpdates
        #expect(stockUpdates > 0)
        #expect(Self.logSize(of: directory.storeURL) == 0)
        #expect(try Self.stockUpdatesInMainFileAlone(of: directory.storeURL) == stockUpdates)
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
        #expect(Self.logSize(of: directory.storeURL) == 0)
        #expect(try Self.stockUpdatesInMainFileAlone(of: directory.storeURL) == last.stockUpdates)
    }
}
