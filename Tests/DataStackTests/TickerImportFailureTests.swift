import Foundation
import Testing
import DataStack

/// ticker-import when its store fails: it exits 1, and says why on stderr and
/// in its last `--json` line. The tests run as root here, which ignores
/// permission bits, so each failure is made by means root cannot override.
@Suite(.serialized) struct TickerImportFailureTests {
    /// What the last `--json` line of every mode has: a merge line, or `--import-only`'s save line.
    private struct LastLine: Decodable {
        var final: Bool
        var error: String?
    }

    /// Checks a failed run: exit status 1, a final line whose error names the store, the error on stderr.
    private func expectFailed(_ result: TickerImportProcess.Result, store: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(result.status == 1, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
        let lines = TickerImportProcess.lines(in: Data(result.stdout.utf8), as: LastLine.self)
        let last = try #require(lines.last, "no --json line; stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(last.final, sourceLocation: sourceLocation)
        let error = try #require(last.error, "the final line has no error", sourceLocation: sourceLocation)
        #expect(error.contains(store.path), "\(error)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(error), sourceLocation: sourceLocation)
    }

    private static var unwritableLocations: [String] {
        var paths = [
            // A folder that is a regular file: creating the store fails with ENOTDIR.
            "<directory>/not-a-folder/ticker.sqlite",
        ]
        // sysfs refuses new regular files, to root too.
        if FileManager.default.fileExists(atPath: "/sys/kernel") { paths.append("/sys/ticker-import-test.sqlite") }
        return paths
    }

    /// Each mode: both halves, and each on its own (`--view-only` creates a store that does not exist, too).
    private static let modes: [[String]] = [[], ["--import-only"], ["--view-only"]]

    @Test(arguments: unwritableLocations, modes)
    func anUnwritableLocationExitsOneWithTheErrorInTheLastLine(_ template: String, mode: [String]) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        try Data("a file, not a folder".utf8).write(to: directory.url.appendingPathComponent("not-a-folder"))
        let store = URL(fileURLWithPath: template.replacingOccurrences(of: "<directory>", with: directory.url.path))
        let result = try TickerImportProcess.run(mode + ["--json", "--duration", "1", "--store", store.path])
        try expectFailed(result, store: store)
        #expect(!FileManager.default.fileExists(atPath: store.path))
    }

    @Test(arguments: ["garbage", "foreign SQLite"])
    func aFileThatIsNotATickerStoreExitsOneWithTheErrorInTheLastLine(_ kind: String) throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        if kind == "garbage" {
            var random = SystemRandomNumberGenerator()
            try Data((0..<16_384).map { _ in UInt8.random(in: 0...255, using: &random) }).write(to: directory.storeURL)
        } else {
            let connection = try Connection(path: directory.storeURL.path)
            try connection.execute("CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('not a Core Data store')")
        }
        let result = try TickerImportProcess.run(["--json", "--duration", "1", "--store", directory.storeURL.path])
        try expectFailed(result, store: directory.storeURL)
    }

    @Test func aDiskThatFillsMidRunExitsOneAndKeepsEverySaveReported() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        // 1 MB per file: the store is created and a few saves go through, then
        // the write-ahead log outgrows the limit and the next save fails.
        let result = try TickerImportProcess.run(["--json", "--duration", "120", "--batch", "200", "--store", directory.storeURL.path],
                                                 fileSizeLimit: 1 << 20)
        try expectFailed(result, store: directory.storeURL)
        let reported = try #require(result.lines.dropLast().last, "no save was reported before the disk filled")
        #expect(reported.saved > 0)

        let store = try TickerStoreContents(directory.storeURL)
        #expect(store.integrity == ["ok"])
        #expect(store.stockUpdates >= reported.stockUpdates)
        #expect(store.companiesWithMismatchedCounters == 0)
    }
}
