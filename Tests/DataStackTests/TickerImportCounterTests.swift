@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// Two `--import-only` processes on one store both increment each company's
/// `updateCount`: no increment is lost to the other's save, as the PostgreSQL
/// peer tool's counter loses none (Stores/PostgreSQL, `PeerImporter`).
@Suite(.serialized) struct TickerImportCounterTests {
    @Test func twoImportersOnOneStoreLoseNoIncrement() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        // The store exists, empty, so the two race on the companies rather than on creating the file.
        let created = try TickerImportProcess.run(["--view-only", "--json", "--duration", "0.3", "--store", directory.storeURL.path])
        #expect(created.status == 0, "stderr: \(created.stderr)")
        // Ten companies, fifty quotes a save: every save updates each company, so saves of the two meet.
        let arguments = ["--import-only", "--json", "--tickers", "10", "--batch", "50", "--store", directory.storeURL.path]
        let importers = try (0..<2).map {
            try TickerImportChild(arguments: arguments, stderr: directory.url.appendingPathComponent("importer-\($0).txt"))
        }
        // Each save of one meets the other's: fifteen each is hundreds of conflicts. The
        // deadline only bounds a failure (CI's loaded run slowed 40 saves past 30 s).
        for importer in importers {
            #expect(importer.waitForLines(TickerImportProcess.SaveLine.self, count: 15, timeout: .seconds(90)).count >= 15,
                    "stderr: \(importer.stderrText)")
        }
        for importer in importers { importer.send(SIGINT) }
        var reported = 0
        for importer in importers {
            try #require(importer.waitForExit(timeout: .seconds(10)))
            #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
            let last = try #require(importer.lines(TickerImportProcess.SaveLine.self).last)
            #expect(last.final && last.error == nil, "\(String(describing: last.error))")
            reported += last.stockUpdates
        }

        let store = try TickerStoreContents(directory.storeURL)
        #expect(store.integrity == ["ok"])
        #expect(store.stockUpdates == reported, "every stock update reported is stored")
        let connection = try Connection(path: directory.storeURL.path)
        let counted = try connection.prepare("SELECT total(ZUPDATECOUNT) FROM ZCOMPANY")
        _ = try counted.step()
        #expect(Int(counted.double(at: 0)) == store.stockUpdates, "the counters sum to the stored updates")
        #expect(store.companiesWithMismatchedCounters == 0)
    }
}
