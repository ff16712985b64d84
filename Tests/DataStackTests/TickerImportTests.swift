@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// Runs the ticker-import executable the build produced, as a user would.
@Suite(.serialized) struct TickerImportTests {
    typealias Line = TickerImportProcess.Line

    static var executable: URL { TickerImportProcess.executable }

    private func run(_ arguments: [String], environment: [String: String] = [:], fileSizeLimit: Int? = nil) throws -> TickerImportProcess.Result {
        try TickerImportProcess.run(arguments, environment: environment, fileSizeLimit: fileSizeLimit)
    }

    private func integrityAndCount(_ url: URL) throws -> (integrity: [String], stockUpdates: Int) {
        let contents = try TickerStoreContents(url)
        return (contents.integrity, contents.stockUpdates)
    }

    @Test func jsonRunImportsRefreshesTheWatchlistAndLeavesAHealthyStore() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try run(["--json", "--duration", "3", "--store", directory.storeURL.path, "--batch", "200"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = result.lines
        try #require(lines.count >= 3)
        let first = lines[0], last = lines[lines.count - 1]
        #expect(last.final)
        #expect(last.error == nil)
        #expect(lines.allSatisfy { $0.readError == nil })
        #expect(last.imported > first.imported)
        #expect(last.saved > first.saved)
        #expect(zip(lines, lines.dropFirst()).allSatisfy { $0.imported <= $1.imported && $0.saved <= $1.saved })
        #expect(first.watchlist.map(\.price) != last.watchlist.map(\.price))
        #expect(last.watchlist.count == 10)
        // The watchlist (10) and the top-movers panel (10, partly the same companies).
        #expect(lines.allSatisfy { $0.registeredInMain >= 10 && $0.registeredInMain <= 20 })
        let store = try integrityAndCount(directory.storeURL)
        #expect(store.integrity == ["ok"])
        #expect(store.stockUpdates == last.stockUpdates)

        // A second run continues with the existing store.
        let again = try run(["--json", "--duration", "1", "--store", directory.storeURL.path, "--batch", "200"])
        #expect(again.status == 0)
        let resumed = try #require(again.lines.last)
        let before = Dictionary(uniqueKeysWithValues: last.watchlist.map { ($0.symbol, $0.updates) })
        #expect(resumed.watchlist.allSatisfy { $0.updates >= before[$0.symbol] ?? 0 })
        #expect(try integrityAndCount(directory.storeURL).stockUpdates == last.stockUpdates + resumed.stockUpdates)
    }

    @Test func killedMidRunTheStoreOpensAndHoldsEverySaveReported() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = ["--json", "--store", directory.storeURL.path, "--batch", "100"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var buffer = Data()
        var reported: [Line] = []
        let deadline = Date().addingTimeInterval(30)
        while reported.count < 5 && Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            reported = String(decoding: buffer, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true).dropLast().compactMap {
                try? JSONDecoder().decode(Line.self, from: Data($0.utf8))
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        let last = try #require(reported.last)

        let store = try integrityAndCount(directory.storeURL)
        #expect(store.integrity == ["ok"])
        #expect(store.stockUpdates >= last.stockUpdates)
        // The store still opens through the engine, and its companies read back.
        let stack = StackManager()
        let ready = Semaphore()
        stack.setup(model: try TickerStoreModel.make(), storeURL: directory.storeURL) { error in
            #expect(error == nil)
            ready.signal()
        }
        ready.wait()
        let importer = stack.importerContext()
        let companies = try importer.performAndWait { try importer.count(for: FetchRequest<ManagedObject>(entityName: "Company")) }
        #expect(companies == 300)
    }

    @Test func mainQueueServicedByRunLoopMainWorksToo() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try run(["--json", "--run-loop", "--duration", "1.5", "--tickers", "50", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.lines.count >= 2)
        #expect(result.lines.last?.final == true)
        #expect((result.lines.last?.saved ?? 0) > 1)
    }

    @Test func badFlagsPrintUsageAndExitNonZero() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        for arguments in [["--bogus"], ["--duration", "abc"], ["--tickers", "0"], ["--batch"], ["--watch", ","],
                          ["--import-only", "--view-only"], ["--view-only", "--json", "--import-only"],
                          ["--import-only", "--watch", "ABC"], ["--view-only", "--batch", "10"],
                          ["--keep-updates", "0"], ["--view-only", "--keep-updates", "10"]] {
            let result = try run(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains("usage: ticker-import"), "\(arguments)")
        }
    }

    @Test func aStoreURLOfAnotherDatabaseNamesTheExecutableThatOpensIt() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let result = try run(["--store", "postgresql://app@/db", "--duration", "1"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("ticker-import-postgresql"), "\(result.stderr)")
        let malformed = try run(["--store", "post gres://", "--duration", "1"])
        #expect(malformed.status == 2)
        #expect(malformed.stderr.contains("is not a URL"), "\(malformed.stderr)")
    }

    /// Two processes on one store, as the README runs them in two terminals:
    /// `--view-only` on a store that does not exist yet creates it empty and
    /// waits; then it shows what an `--import-only` process saves there, every
    /// save merged from the store's history, and ends with the importer's totals.
    @Test func aViewOnlyProcessShowsWhatAnImportOnlyProcessSaves() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let store = ["--json", "--tickers", "30", "--store", directory.storeURL.path]
        let viewer = try TickerImportChild(arguments: ["--view-only"] + store, stderr: directory.url.appendingPathComponent("viewer.txt"))
        // No event says the file was made: the target's one poll watches for it. The viewer
        // created the store, so it merges every save made there, even one made while it sets up.
        try #require(await waitUntil("the viewer creating the store", deadline: .seconds(30)) {
            FileManager.default.fileExists(atPath: directory.storeURL.path)
        }, "stderr: \(viewer.stderrText)")

        let importer = try TickerImportChild(arguments: ["--import-only", "--batch", "50"] + store,
                                             stderr: directory.url.appendingPathComponent("importer.txt"))
        let saves = importer.waitForLines(TickerImportProcess.SaveLine.self, count: 6, timeout: .seconds(5))
        try #require(saves.count >= 6, "stderr: \(importer.stderrText)")
        importer.send(SIGINT)
        try #require(importer.waitForExit(timeout: .seconds(5)))
        #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
        let imported = try #require(importer.lines(TickerImportProcess.SaveLine.self).last)
        #expect(imported.final)
        #expect(imported.stockUpdates == (imported.saved - 1) * 50, "the companies' save, then saves of 50 stock updates")

        // The viewer merged every save: its counters reach the importer's totals.
        let caughtUp = viewer.waitForReported(timeout: .seconds(30)) { $0.last?.saved == imported.saved }
        // What the viewer last said, and its stderr: a viewer stuck on an earlier save says why here.
        #expect(caughtUp, """
            the viewer reported the importer's last save (\(imported.saved)); its last lines: \
            \(viewer.reported.suffix(3).map { "saved \($0.saved), source \($0.source ?? "-"), read error \($0.readError ?? "-")" }); \
            stderr: \(viewer.stderrText)
            """)
        viewer.send(SIGINT)
        try #require(viewer.waitForExit(timeout: .seconds(5)))
        #expect(viewer.exitStatus == 0, "stderr: \(viewer.stderrText)")
        let lines = viewer.reported
        let last = try #require(lines.last)
        #expect(last.final)
        #expect((last.saved, last.imported, last.stockUpdates) == (imported.saved, imported.imported, imported.stockUpdates))
        #expect(lines.allSatisfy { $0.source == "otherProcess" && $0.author?.hasPrefix("DataStack/ticker-import/\(importer.processIdentifier)/") == true })
        // The first ten companies of the market, as the importer has them in the store.
        #expect(last.watchlist.count == 10)
        #expect(lines.allSatisfy { $0.registeredInMain <= 20 })
        let connection = try Connection(path: directory.storeURL.path)
        for entry in last.watchlist {
            let row = try connection.prepare("SELECT ZPRICE, ZUPDATECOUNT FROM ZCOMPANY WHERE ZSYMBOL = '\(entry.symbol)'")
            #expect(try row.step())
            #expect((row.double(at: 0), row.int64(at: 1)) == (entry.price, entry.updates), "\(entry.symbol)")
        }
    }

    @Test func importOnlyPrintsALinePerSaveAndAFinalOne() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try run(["--import-only", "--duration", "0.5", "--tickers", "20", "--batch", "50", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.first == "save 1 on disk: 20 inserted, 0 updated · 20 objects, 0 stock updates so far")
        let saves = lines.filter { $0.hasPrefix("save ") }.count
        #expect(saves >= 1)
        #expect(lines.last?.hasPrefix("stopped: ") == true)
        #expect(lines.last?.contains("in \(saves) saves (\((saves - 1) * 50) stock updates)") == true, "\(lines.last ?? "")")
        #expect(!result.stdout.contains("WATCHLIST"))
    }

    @Test func defaultStoreLocationIsUnderTheDataHome() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try run(["--json", "--duration", "0.5", "--tickers", "20"], environment: ["XDG_DATA_HOME": directory.url.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let expected = directory.url.appendingPathComponent("ticker-import/ticker-import.sqlite")
        #expect(FileManager.default.fileExists(atPath: expected.path))
    }

    /// A store made by the model's first version (no `sector`) is migrated by
    /// the stack's default options when ticker-import starts — with its progress
    /// as `{"migration": …}` lines — keeps its companies and updates, and gets
    /// the new attribute filled in and its index.
    @Test(arguments: [false, true])
    func aStoreOfTheFirstModelVersionIsMigratedOnStart(modelFile: Bool) throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let copy = directory.storeURL
        // A store of the first version, as users of the first release have it.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TickerStoreModel.version("TickerModel"))
        let store = try coordinator.addPersistentStore(type: .sqlite, at: copy)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let model = try #require(context.persistentStoreCoordinator?.managedObjectModel)
            for symbol in ["OLDA", "OLDB"] {
                let company = ManagedObject(entity: try #require(model.entitiesByName["Company"]), insertInto: context)
                try company.setValue(symbol, forKey: "symbol")
                try company.setValue(Int64(3), forKey: "updateCount")
                for price in [1.0, 2.0, 3.0] {
                    let update = ManagedObject(entity: try #require(model.entitiesByName["StockUpdate"]), insertInto: context)
                    try update.setValue(price, forKey: "price")
                    try update.setValue(company, forKey: "company")
                }
            }
            try context.save()
        }
        try coordinator.remove(store)
        let updatesBefore = try integrityAndCount(copy).stockUpdates

        let result = try run(["--json", "--duration", "1", "--tickers", "40", "--store", copy.path] + (modelFile ? ["--model-file"] : []))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.contains("{\"migration\":1"), "progress reaches the screen")
        let after = try integrityAndCount(copy)
        #expect(after.integrity == ["ok"])
        #expect(after.stockUpdates > updatesBefore, "the old updates are kept and new ones imported")
        let connection = try Connection(path: copy.path)
        let withSector = try connection.prepare("SELECT count(*) FROM ZCOMPANY WHERE ZSECTOR IS NOT NULL")
        _ = try withSector.step()
        #expect(withSector.int64(at: 0) == 40, "the app fills in the new attribute of the market's companies")
        let old = try connection.prepare("SELECT count(*) FROM ZCOMPANY WHERE ZSYMBOL LIKE 'OLD_'")
        _ = try old.step()
        #expect(old.int64(at: 0) == 2, "the first version's companies are kept")
        let index = try connection.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND sql LIKE '%ZSECTOR%'")
        _ = try index.step()
        #expect(index.int64(at: 0) == 1, "the new index exists")
    }

    /// The market is upserted by symbol: a second run on the store finds every
    /// company (its first save is one of stock updates only) and adds none.
    @Test func twoRunsOnOneStoreLeaveOneCompanyPerSymbol() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let arguments = ["--import-only", "--json", "--duration", "0.5", "--tickers", "40", "--batch", "50", "--store", directory.storeURL.path]
        let first = try run(arguments)
        let second = try run(arguments)
        #expect((first.status, second.status) == (0, 0), "stderr: \(first.stderr) \(second.stderr)")
        let firstSaves = TickerImportProcess.lines(in: Data(first.stdout.utf8), as: TickerImportProcess.SaveLine.self)
        let secondSaves = TickerImportProcess.lines(in: Data(second.stdout.utf8), as: TickerImportProcess.SaveLine.self)
        #expect(firstSaves.first?.inserted == 40, "the market, in one save")
        #expect(secondSaves.first?.inserted == 50, "the second run's first save inserts stock updates only")
        #expect(secondSaves.first?.updated ?? 0 > 0)
        let connection = try Connection(path: directory.storeURL.path)
        let companies = try connection.prepare("SELECT count(*), count(DISTINCT ZSYMBOL) FROM ZCOMPANY")
        _ = try companies.step()
        #expect((companies.int64(at: 0), companies.int64(at: 1)) == (40, 40))
        #expect(try TickerStoreContents(directory.storeURL).companiesWithMismatchedCounters == 0)
    }

    /// Two importers that start together on one store both upsert the market:
    /// the one that saves second finds the first one's companies — or, when
    /// the two saves cross, the symbol's uniqueness constraint settles it at
    /// save — and both go on importing into the same forty companies.
    ///
    /// Measured here, the second finds the first's companies: opening the
    /// store serializes the two. The crossing itself, which a process test
    /// cannot time, is `UpsertImportTests.racingImportersEndWithOneRowPerKey`.
    @Test func twoImportersStartingAtOnceLeaveOneCompanyPerSymbol() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        // The store exists, empty, so the two race on the companies rather than on creating the file.
        let created = try run(["--view-only", "--json", "--duration", "0.3", "--store", directory.storeURL.path])
        #expect(created.status == 0, "stderr: \(created.stderr)")
        let arguments = ["--import-only", "--json", "--tickers", "40", "--batch", "50", "--store", directory.storeURL.path]
        let importers = try (0..<2).map {
            try TickerImportChild(arguments: arguments, stderr: directory.url.appendingPathComponent("importer-\($0).txt"))
        }
        // The bound is for a hung importer, not a speed: under the whole suite's
        // load a run once took over 10 s for its fifth save (alone: 0.7–3.4 s).
        for importer in importers {
            #expect(importer.waitForLines(TickerImportProcess.SaveLine.self, count: 5, timeout: .seconds(60)).count >= 5,
                    "stderr: \(importer.stderrText)")
        }
        for importer in importers { importer.send(SIGINT) }
        for importer in importers {
            try #require(importer.waitForExit(timeout: .seconds(10)))
            #expect(importer.exitStatus == 0, "stderr: \(importer.stderrText)")
            #expect(importer.lines(TickerImportProcess.SaveLine.self).last?.error == nil)
        }
        let connection = try Connection(path: directory.storeURL.path)
        let companies = try connection.prepare("SELECT count(*), count(DISTINCT ZSYMBOL), count(ZSECTOR) FROM ZCOMPANY")
        _ = try companies.step()
        #expect((companies.int64(at: 0), companies.int64(at: 1), companies.int64(at: 2)) == (40, 40, 40))
        #expect(try connection.integrityCheck() == ["ok"])
    }

    /// The sector lines of each merge come from one grouped fetch after the
    /// merge: they add up to the market and to at least the updates merged so
    /// far, and the last one equals the store's rows summed here, in Swift.
    @Test func theSectorLinesEqualTheStoresCompaniesSummedIndependently() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let result = try run(["--json", "--duration", "1.5", "--tickers", "40", "--batch", "100", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = result.lines
        let last = try #require(lines.last)
        try #require(last.final && last.saved > 1)
        let totals = lines.map { line in line.sectors.reduce(0) { $0 + $1.updates } }
        #expect(lines.allSatisfy { $0.sectors.reduce(0) { $0 + $1.companies } == 40 })
        #expect(zip(lines, totals).allSatisfy { $1 >= Int64($0.stockUpdates) }, "a line left out updates merged before it")
        #expect(zip(totals, totals.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(totals.last == Int64(last.stockUpdates), "a fresh store: each update counts once, in its company")

        // The same numbers from the rows themselves, added up here rather than by SQL.
        let connection = try Connection(path: directory.storeURL.path)
        let rows = try connection.prepare("SELECT ZSECTOR, ZUPDATECOUNT, ZPRICE FROM ZCOMPANY")
        var bySector: [String: (companies: Int, updates: Int64, prices: Double)] = [:]
        while try rows.step() {
            let sector = rows.string(at: 0) ?? "—"
            bySector[sector, default: (0, 0, 0)].companies += 1
            bySector[sector, default: (0, 0, 0)].updates += rows.int64(at: 1)
            bySector[sector, default: (0, 0, 0)].prices += rows.double(at: 2)
        }
        #expect(last.sectors.map { $0.sector ?? "—" } == bySector.keys.sorted())
        for line in last.sectors {
            let expected = try #require(bySector[line.sector ?? "—"])
            #expect((line.companies, line.updates) == (expected.companies, expected.updates), "\(line.sector ?? "—")")
            let average = expected.prices / Double(expected.companies)
            #expect(abs(line.averagePrice - average) <= 1e-9 * average, "\(line.sector ?? "—"): \(line.averagePrice) ≠ \(average)")
        }
    }

    @Test func aSymbolWatchedTwiceIsShownOnce() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let first = try run(["--json", "--duration", "0.5", "--tickers", "20", "--store", directory.storeURL.path])
        let symbol = try #require(first.lines.last?.watchlist.first?.symbol)
        let result = try run(["--json", "--duration", "0.5", "--tickers", "20", "--store", directory.storeURL.path,
                              "--watch", "\(symbol),\(symbol)"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.lines.last?.watchlist.map(\.symbol) == [symbol])
    }
}
