@_spi(DataStackInternal) import DataStackSQLite
import Foundation
import Testing
import DataStack

/// ticker-import's `--search TEXT`, run as a user would: the panel lists the
/// companies whose name matches, most relevant first, as the store has them,
/// while the import adds and renames companies; a bad query is a usage error;
/// a store made before `Company.name` was indexed gets its index when opened.
@Suite(.serialized) struct TickerImportSearchTests {
    /// The `--search` part of a `--json` line.
    struct Line: Decodable {
        struct Entry: Decodable, Equatable {
            var symbol: String
            var name: String
            var highlighted: String
        }
        var search: [Entry]?
        var searchMatches: Int?
        var registeredInMain: Int
        var saved: Int
        var final: Bool
        var readError: String?
    }

    private func run(_ arguments: [String]) throws -> (result: TickerImportProcess.Result, lines: [Line]) {
        let result = try TickerImportProcess.run(arguments)
        return (result, TickerImportProcess.lines(in: Data(result.stdout.utf8), as: Line.self))
    }

    /// Every company's symbol and name, read with plain SQL.
    private func names(in url: URL) throws -> [(symbol: String, name: String)] {
        let connection = try Connection(path: url.path)
        let rows = try connection.prepare("SELECT ZSYMBOL, ZNAME FROM ZCOMPANY")
        var names: [(symbol: String, name: String)] = []
        while try rows.step() { names.append((rows.string(at: 0) ?? "", rows.string(at: 1) ?? "")) }
        return names
    }

    /// What the panel must show for the store's names: the matches, most
    /// relevant first, then by name, computed here in Swift rather than by the index.
    private func expectedPanel(_ query: SearchQuery, in url: URL, limit: Int = 10) throws -> (symbols: [String], matches: Int) {
        let matching = try names(in: url).filter { query.matches([$0.name]) }
        let ranked = matching.sorted { a, b in
            let (ra, rb) = (query.relevance(of: [a.name]), query.relevance(of: [b.name]))
            return ra != rb ? ra > rb : Array(a.name.utf8).lexicographicallyPrecedes(b.name.utf8)
        }
        return (ranked.prefix(limit).map(\.symbol), matching.count)
    }

    @Test func theSearchPanelShowsTheStoresMatchesMostRelevantFirstAsCompaniesAreRenamed() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let text = "acme OR glob* OR labs"
        let (result, lines) = try run(["--json", "--duration", "3", "--tickers", "40", "--batch", "100",
                                       "--search", text, "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let last = try #require(lines.last)
        try #require(last.final && last.saved > 2, "too few saves to see a rename: \(last.saved)")
        #expect(lines.allSatisfy { $0.readError == nil })
        let panels = lines.compactMap(\.search)
        #expect(panels.count == lines.count, "every line has the panel")
        #expect(panels.allSatisfy { $0.count <= 10 && $0.allSatisfy { $0.highlighted.contains("[") } })
        #expect(zip(panels, lines).allSatisfy { $0.count <= $1.searchMatches ?? -1 })
        // The watchlist (10), the top movers (10) and the panel (10), partly the same companies.
        #expect(lines.allSatisfy { $0.registeredInMain <= 30 })

        // The feed renamed companies (a brand in front of the listed name), and the panel followed.
        let renamed = try names(in: directory.storeURL).filter { $0.name.split(separator: " ").count > 2 }
        #expect(!renamed.isEmpty)
        #expect(Set(panels.map { $0.map(\.symbol) }).count > 1, "the panel never changed in \(last.saved) saves")

        // The last line equals the store's names, matched and ranked independently.
        let expected = try expectedPanel(try SearchQuery(text), in: directory.storeURL)
        #expect(last.search?.map(\.symbol) == expected.symbols)
        #expect(last.searchMatches == expected.matches)
        // The matched words, and only they, are in brackets.
        for entry in last.search ?? [] {
            #expect(entry.highlighted.replacingOccurrences(of: "[", with: "").replacingOccurrences(of: "]", with: "") == entry.name)
            let marked = entry.highlighted.split(separator: "[", omittingEmptySubsequences: false).dropFirst().compactMap { $0.split(separator: "]").first?.lowercased() }
            #expect(!marked.isEmpty && marked.allSatisfy { $0 == "acme" || $0.hasPrefix("glob") || $0 == "labs" }, "\(entry.highlighted)")
        }
    }

    @Test func aBadSearchPrintsWhereAndWhyAndExitsWithStatus2() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        for (arguments, message) in [(["--search", "\"unclosed"], "bad search query at offset 0 in '\"unclosed'"),
                                     (["--search", "a OR"], "bad search query at offset 2"),
                                     (["--search", "+++"], "no words"),
                                     (["--search"], "--search needs a value"),
                                     (["--import-only", "--search", "acme"], "--import-only shows none")] {
            let result = try TickerImportProcess.run(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("usage: ticker-import"), "\(arguments)")
            #expect(!result.stderr.contains("Fatal error") && !result.stderr.contains("crashed"), "\(arguments)")
        }
    }

    /// A store of the example from before `Company.name` was indexed (the same
    /// schema, no FTS5 table): it opens with no migration, gets its index in
    /// its first writable open, and searches find what its rows hold.
    @Test func aStoreMadeBeforeTheNameWasIndexedGetsItsIndexWhenOpened() throws {
        try #require(FileManager.default.isExecutableFile(atPath: TickerImportProcess.executable.path), "build ticker-import first (swift build)")
        let directory = StackDirectory()
        let first = try TickerImportProcess.run(["--import-only", "--duration", "0.5", "--tickers", "40", "--store", directory.storeURL.path])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        do {
            let connection = try Connection(path: directory.storeURL.path)
            for name in ["DS_SEARCH_ZCOMPANY_INSERT", "DS_SEARCH_ZCOMPANY_DELETE", "DS_SEARCH_ZCOMPANY_UPDATE"] {
                try connection.execute("DROP TRIGGER \(name)")
            }
            try connection.execute("DROP TABLE DS_SEARCH_ZCOMPANY")
            #expect(try connection.tableExists("DS_SEARCH_ZCOMPANY") == false)
        }

        let (result, lines) = try run(["--json", "--view-only", "--duration", "0.5", "--search", "labs", "--store", directory.storeURL.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(!result.stdout.contains("\"migration\""), "no migration: the flag is outside the version hash")
        let last = try #require(lines.last)
        let expected = try expectedPanel(try SearchQuery("labs"), in: directory.storeURL)
        #expect(expected.matches > 0)
        #expect(last.searchMatches == expected.matches)
        #expect(last.search?.map(\.symbol) == expected.symbols)
        let connection = try Connection(path: directory.storeURL.path)
        #expect(try connection.tableExists("DS_SEARCH_ZCOMPANY"))
        // FTS5's own check that the index holds exactly what the rows say.
        try connection.execute("INSERT INTO DS_SEARCH_ZCOMPANY (DS_SEARCH_ZCOMPANY, rank) VALUES ('integrity-check', 1)")
        #expect(try connection.integrityCheck() == ["ok"])
    }
}
