@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// `ticker-import --keep-updates N`: after each save the importer deletes the
/// oldest price updates beyond the newest N with one batch delete.
///
/// The bound checked is the one the README states for one importer: once a
/// save's trim has run the store holds exactly `min(N, updates imported)`,
/// the newest by time; between a save and its trim, at most N + `--batch`.
@Suite(.serialized) struct TickerImportKeepUpdatesTests {
    typealias SaveLine = TickerImportProcess.SaveLine

    /// Stock updates per save.
    static let batch = 50
    /// `--keep-updates`.
    static let kept = 120

    private static func integer(_ connection: Connection, _ sql: String) throws -> Int {
        let statement = try connection.prepare(sql)
        _ = try statement.step()
        return Int(statement.int64(at: 0))
    }

    private static func double(_ connection: Connection, _ sql: String) throws -> Double {
        let statement = try connection.prepare(sql)
        _ = try statement.step()
        return statement.double(at: 0)
    }

    /// A store grown without the option, then a long run with it: the first
    /// trim catches up, each later one deletes one save's worth, the count
    /// sampled while the run goes never exceeds N + batch, and what remains
    /// is exactly the newest N — every update deleted (logged by a trigger
    /// the test adds to the store) is older than every update kept.
    @Test func aLongRunKeepsExactlyTheNewestUpdatesAndNeverMoreThanOneSaveBeyond() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let store = ["--import-only", "--json", "--tickers", "30", "--batch", "\(Self.batch)", "--store", directory.storeURL.path]
        let grown = try TickerImportProcess.run(store + ["--duration", "1"])
        #expect(grown.status == 0, "stderr: \(grown.stderr)")
        let connection = try Connection(path: directory.storeURL.path)
        let before = try Self.integer(connection, "SELECT count(*) FROM ZSTOCKUPDATE")
        try #require(before > Self.kept + Self.batch, "the first run imported only \(before) updates")
        // Beside the app's tables, where the engine does not look: every row a trim deletes.
        try connection.execute("""
            CREATE TABLE test_deleted_update(pk INTEGER, time REAL);
            CREATE TRIGGER test_log_deleted_update AFTER DELETE ON ZSTOCKUPDATE
            BEGIN INSERT INTO test_deleted_update VALUES (old.Z_PK, old.ZTIME); END
            """)

        let importer = try TickerImportChild(arguments: store + ["--keep-updates", "\(Self.kept)"],
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        // A line is written once its save's trim ran: from the first line on, the bound holds.
        importer.waitForLines(SaveLine.self, count: 1, timeout: .seconds(10))
        var samples: [Int] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while importer.lines(SaveLine.self).count < 30 && importer.exitStatus == nil && ContinuousClock.now < deadline {
            samples.append(try Self.integer(connection, "SELECT count(*) FROM ZSTOCKUPDATE"))
            usleep(500)   // behaviour under test: samples at arbitrary moments of the import; this paces them
        }
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(10)), "ticker-import did not stop on SIGINT")
        #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
        let lines = importer.lines(SaveLine.self)
        let saves = lines.filter { !$0.final }
        try #require(saves.count >= 30, "stderr: \(importer.stderrText)")
        #expect(lines.last?.final == true)

        #expect(!samples.isEmpty)
        #expect(samples.allSatisfy { $0 <= Self.kept + Self.batch }, "largest count seen: \(samples.max() ?? 0)")
        // The store has the market: every save is one of stock updates, and each trim reports what it deleted.
        #expect(saves.allSatisfy { $0.inserted == Self.batch })
        #expect(saves.first?.trimmed == before + Self.batch - Self.kept, "the first trim catches up with the grown store")
        #expect(saves.dropFirst().allSatisfy { $0.trimmed == Self.batch }, "\(saves.map(\.trimmed))")

        let kept = try Self.integer(connection, "SELECT count(*) FROM ZSTOCKUPDATE")
        let deleted = try Self.integer(connection, "SELECT count(*) FROM test_deleted_update")
        #expect(kept == Self.kept)
        #expect(deleted == before + saves.count * Self.batch - Self.kept)
        #expect(deleted == saves.reduce(0) { $0 + ($1.trimmed ?? 0) })
        let newestDeleted = try Self.double(connection, "SELECT max(time) FROM test_deleted_update")
        let oldestKept = try Self.double(connection, "SELECT min(ZTIME) FROM ZSTOCKUPDATE")
        #expect(newestDeleted < oldestKept, "a deleted update is newer than a kept one")
        // Every update ever imported is kept or was deleted: the companies' counters, which trims leave alone, add up.
        #expect(try Self.integer(connection, "SELECT total(ZUPDATECOUNT) FROM ZCOMPANY") == kept + deleted)
        #expect(try connection.integrityCheck() == ["ok"])
    }

    /// The smallest N, on the live screen's process: the trims reach the main
    /// context as merges (counted apart from the import's saves), and the one
    /// update left is the newest.
    @Test func keepingOneUpdateLeavesTheNewestAndTheMergeLinesCountTheDeletes() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try TickerImportProcess.run(["--json", "--duration", "1", "--tickers", "30", "--batch", "\(Self.batch)",
                                                  "--keep-updates", "1", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let last = try #require(result.lines.last)
        #expect(last.final)
        try #require(last.saved > 2)
        // Each merge line counts import saves only: a save of `batch` updates each.
        #expect(last.stockUpdates == last.saved * Self.batch)
        #expect(last.trimmed == last.stockUpdates - 1)
        #expect(zip(result.lines, result.lines.dropFirst()).allSatisfy { $0.trimmed <= $1.trimmed })
        #expect(result.lines.allSatisfy { $0.registeredInMain <= 20 })
        let connection = try Connection(path: directory.storeURL.path)
        #expect(try Self.integer(connection, "SELECT count(*) FROM ZSTOCKUPDATE") == 1)
        // The last update of the run set its company's lastUpdate to its own time, the latest of all.
        let keptTime = try Self.double(connection, "SELECT ZTIME FROM ZSTOCKUPDATE")
        #expect(keptTime == (try Self.double(connection, "SELECT max(ZLASTUPDATE) FROM ZCOMPANY")))
    }

    /// A `--view-only` process merges the other process's trims from the
    /// store's history, one merge per transaction as it merges saves, and
    /// ends with the importer's totals: saves, stock updates, and deletes.
    @Test func aViewOnlyProcessMergesTheOtherProcesssTrims() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let store = ["--json", "--tickers", "30", "--store", directory.storeURL.path]
        let viewer = try TickerImportChild(arguments: ["--view-only"] + store, stderr: directory.url.appendingPathComponent("viewer.txt"))
        // No event says the file was made: the target's one poll watches for it.
        try #require(await waitUntil("the viewer creating the store", deadline: .seconds(30)) {
            FileManager.default.fileExists(atPath: directory.storeURL.path)
        }, "stderr: \(viewer.stderrText)")

        let importer = try TickerImportChild(arguments: ["--import-only", "--batch", "\(Self.batch)", "--keep-updates", "\(Self.kept)"] + store,
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        try #require(importer.waitForLines(SaveLine.self, count: 10, timeout: .seconds(10)).count >= 10, "stderr: \(importer.stderrText)")
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(10)))
        #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
        let saves = importer.lines(SaveLine.self)
        let imported = try #require(saves.last)
        let trimmed = saves.reduce(0) { $0 + ($1.trimmed ?? 0) }
        #expect(trimmed == imported.stockUpdates - Self.kept)

        #expect(viewer.waitForReported(timeout: .seconds(30)) { ($0.last?.saved, $0.last?.trimmed) == (imported.saved, trimmed) },
                "the viewer reported the importer's last save and trims")
        viewer.send(SIGINT)
        try #require(viewer.waitForExit(timeout: .seconds(10)))
        #expect(viewer.exitStatus == 0, "stderr: \(viewer.stderrText)")
        let last = try #require(viewer.reported.last)
        #expect(last.final)
        #expect((last.saved, last.stockUpdates, last.trimmed) == (imported.saved, imported.stockUpdates, trimmed))
        #expect(viewer.reported.allSatisfy { $0.registeredInMain <= 20 })
    }

    @Test(arguments: [["--keep-updates", "0"], ["--keep-updates", "-5"], ["--keep-updates", "ten"], ["--keep-updates", "2.5"],
                      ["--keep-updates", "99999999999999999999"], ["--keep-updates"], ["--view-only", "--keep-updates", "10"]])
    func aBadKeepUpdatesValueExitsTwoSayingWhy(_ arguments: [String]) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let result = try TickerImportProcess.run(arguments)
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("ticker-import: --keep-updates "), "\(result.stderr)")
        #expect(result.stderr.contains("usage: ticker-import"))
    }

    @Test func theHelpDescribesKeepUpdates() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let result = try TickerImportProcess.run(["--help"])
        #expect(result.status == 0)
        #expect(result.stderr.contains("--keep-updates N"))
    }
}
