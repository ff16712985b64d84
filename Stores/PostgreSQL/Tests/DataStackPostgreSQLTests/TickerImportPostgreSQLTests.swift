import Foundation
import Testing

/// ticker-import on PostgreSQL (`ticker-import-postgresql --store postgresql://…`):
/// an importer process and a viewer process on one database, as on two machines.
@Suite(.serialized) struct TickerImportPostgreSQLTests {
    /// The executable `swift build --build-tests` builds beside the test bundle.
    private static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ticker-import-postgresql")
    }

    /// Starts ticker-import-postgresql; its stdout is read once it ended.
    private func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, output)
    }

    /// The JSON objects a finished process printed, one per line.
    private func lines(_ pipe: Pipe) throws -> [[String: Any]] {
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    @Test("an importer's saves all reach a viewer in another process, which registers only what it shows")
    func importerAndViewer() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase().absoluteString
        let (viewer, viewerOutput) = try start(["--store", url, "--view-only", "--json", "--duration", "6"])
        defer { if viewer.isRunning { viewer.terminate() } }
        Thread.sleep(forTimeInterval: 1.5)   // the viewer creates the store and listens
        let (importer, importerOutput) = try start(["--store", url, "--import-only", "--json", "--duration", "2", "--batch", "100"])
        defer { if importer.isRunning { importer.terminate() } }
        let imported = try lines(importerOutput)
        importer.waitUntilExit()
        let viewed = try lines(viewerOutput)
        viewer.waitUntilExit()

        #expect(importer.terminationStatus == 0)
        #expect(viewer.terminationStatus == 0)
        let saves = imported.filter { $0["final"] as? Bool == false }.count
        #expect(saves > 0)
        let last = try #require(viewed.last)
        #expect(last["final"] as? Bool == true)
        #expect(last["saved"] as? Int == saves, "the viewer merged every save the importer reported")
        #expect(last["error"] == nil, "\(last)")
        // What it shows: a watchlist of 10 and the top movers' 10, as ticker-import's own tests bound it on SQLite.
        #expect(viewed.allSatisfy { ($0["registeredInMain"] as? Int ?? .max) <= 20 }, "the viewer holds what it shows, not what was imported")
    }
}
