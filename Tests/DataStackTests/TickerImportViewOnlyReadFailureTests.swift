@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// `--view-only` while reading other processes' saves fails: the screen and
/// the `--json` lines say so, as the default mode says a failed read of the
/// watchlist, instead of showing the last merge as if nothing was saved since.
@Suite(.serialized) struct TickerImportViewOnlyReadFailureTests {
    /// Overwrites the page of the history's interned names (`ATRANSACTIONSTRING`,
    /// one page in a small store) with garbage in the main file — a damaged
    /// page: every read of the history's transactions fails with
    /// SQLITE_CORRUPT — then commits a transaction of history that names no new
    /// string (a copy of the last one, under the next number), which another
    /// process's save would be: the viewer sees a commit it cannot read.
    private static func damageHistoryAndCommit(_ store: URL) throws {
        let connection = try Connection(path: store.path)
        try connection.checkpoint(mode: .truncate)   // every page in the main file, the log empty
        func integer(_ sql: String) throws -> Int {
            let statement = try connection.prepare(sql)
            _ = try statement.step()
            return Int(statement.int64(at: 0))
        }
        let root = try integer("SELECT rootpage FROM sqlite_master WHERE name = 'ATRANSACTIONSTRING'")
        let pageSize = try integer("PRAGMA page_size")
        let columns = try connection.columns(in: "ATRANSACTION").map(\.name).filter { $0 != "Z_PK" }
        let file = try FileHandle(forWritingTo: store)
        try file.seek(toOffset: UInt64((root - 1) * pageSize))
        try file.write(contentsOf: Data(repeating: 0xFF, count: pageSize))
        try file.close()
        let list = columns.joined(separator: ", ")
        try connection.execute("""
            BEGIN IMMEDIATE;
            INSERT INTO ATRANSACTION (Z_PK, \(list)) SELECT Z_PK + 1, \(list) FROM ATRANSACTION ORDER BY Z_PK DESC LIMIT 1;
            UPDATE Z_PRIMARYKEY SET Z_MAX = (SELECT max(Z_PK) FROM ATRANSACTION) WHERE Z_NAME = 'TRANSACTION';
            COMMIT
            """)
    }

    @Test(arguments: [true, false])
    func aViewerThatCannotReadOtherProcessesSavesSaysSo(json: Bool) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let store = ["--tickers", "20", "--store", directory.storeURL.path]
        let imported = try TickerImportProcess.run(["--import-only", "--duration", "0.5"] + store)
        #expect(imported.status == 0, "stderr: \(imported.stderr)")

        let viewer = try TickerImportChild(arguments: ["--view-only"] + (json ? ["--json"] : []) + store,
                                           stderr: directory.url.appendingPathComponent("viewer.txt"))
        // The viewer is up once it merged a save of another process.
        let importer = try TickerImportChild(arguments: ["--import-only", "--batch", "20"] + store,
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        func viewerMerged() -> Bool { json ? !viewer.reported.isEmpty : viewer.outputText.contains("last save merged from") }
        _ = viewer.waitForOutput(timeout: .seconds(20)) { _ in viewerMerged() }
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(10)), "stderr: \(importer.stderrText)")
        try #require(viewerMerged(), "the viewer merged nothing; stderr: \(viewer.stderrText)")
        let frames = viewer.outputText.count, lines = viewer.reported.count
        #expect(!viewer.outputText.contains("ERROR"))

        try Self.damageHistoryAndCommit(directory.storeURL)
        func viewerSaysSo() -> Bool {
            json ? viewer.reported.dropFirst(lines).contains { $0.readError != nil }
                : viewer.outputText.dropFirst(frames).contains("reading other processes' saves failed")
        }
        _ = viewer.waitForOutput(timeout: .seconds(20)) { _ in viewerSaysSo() }
        #expect(viewerSaysSo(), "the viewer said nothing of the failed read: \(viewer.outputText.suffix(2_000))")

        viewer.send(SIGINT)
        try #require(viewer.waitForExit(timeout: .seconds(10)))
        #expect(viewer.exitStatus == 0, "a failed read does not stop the viewer; stderr: \(viewer.stderrText)")
        if json {
            let last = try #require(viewer.reported.last)
            #expect(last.final)
            let error = try #require(last.readError, "the last line says reads are still failing")
            #expect(error.contains("malformed") || error.contains("corrupt"), "\(error)")
        }
    }
}
