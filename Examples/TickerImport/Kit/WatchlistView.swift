import DataStack
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The watchlist on screen: the main context's companies, drawn after every merge,
/// with the top movers panel beside it, with `--search` the companies matching
/// it below (``SearchPanel``), and the market by sector below that
/// (``SectorSummary``, one grouped fetch per merge).
///
/// It watches symbols, not objects: with `--view-only` another process may
/// create the companies after the screen starts, and a watched symbol shows
/// up with the first merge that brings its company.
///
/// It holds the watched companies strongly, so they stay registered in the
/// main context — those, and the companies on the panels, are the only objects a
/// merge refreshes.
///
/// Each refresh reads the watched companies through throwing calls and draws
/// rows copied from them, never the objects themselves: a read that fails
/// (an I/O error, a damaged page) keeps the last rows that were read, shows
/// the error beside them, and the next refresh that reads cleanly replaces
/// both. An error is never drawn as an empty or shorter watchlist.
// @unchecked Sendable: every property is touched only on the main queue (the main context's queue).
final class WatchlistView: @unchecked Sendable {
    /// One watchlist line, as last read from the store.
    struct Row {
        var symbol: String
        var name: String
        var price: Double
        var previousClose: Double
        var updates: Int64
        var lastUpdate: Date?

        init(_ company: Company) {
            symbol = company.symbol
            name = company.name
            price = company.price
            previousClose = company.previousClose
            updates = company.updateCount
            lastUpdate = company.lastUpdate
        }

        /// Change since the opening price, in percent.
        var change: Double { previousClose > 0 ? (price / previousClose - 1) * 100 : 0 }
    }

    private let json: Bool
    /// Whether the saves shown are other processes' (`--view-only`).
    private let viewOnly: Bool
    /// The watched symbols, in order, each once.
    private var symbols: [String] = []
    /// The main context, where the watched companies are fetched.
    private var context: ManagedObjectContext?
    /// The watched companies the store has, in the order of `symbols`.
    private var companies: [Company] = []
    private var rows: [Row] = []
    /// Which watched companies the merges changed, as Observation reports it.
    private let model = WatchlistModel()
    /// The symbols of the rows the last merges changed, drawn marked.
    private var changedSymbols: Set<String> = []
    private var rowsReadAt = Date()
    /// Why the last refresh could not read the watchlist; nil after a clean read.
    private var readError: String?
    private var movers: TopMoversPanel?
    /// The top movers' rows, read like the watchlist's (kept on a failed read).
    private var moverRows: [Row] = []
    /// The market by sector, read like the watchlist's (kept on a failed read).
    private var sectorRows: [SectorSummary.Row] = []
    /// `--search`: the companies matching it; nil without the flag.
    private var search: SearchPanel?
    /// The search panel's rows and its number of matches, read like the watchlist's (kept on a failed read).
    private var searchRows: [SearchPanel.Row] = []
    private var searchMatches = 0
    private var storePath = ""
    /// Whether the last frame was drawn: nothing is drawn after it.
    private var finished = false
    private let clock = ContinuousClock()
    private let encoder = JSONEncoder()
    private let timeFormatter = DateFormatter()

    /// Why the stack's last read of other processes' saves failed, nil when it did not
    /// (``StackManager/historyMergeError``): asked at every frame.
    private let historyError: @Sendable () -> String?
    /// `--sync`: the engine's line, asked at every frame; nil without the flag.
    private let sync: TickerSync?

    init(json: Bool, viewOnly: Bool, sync: TickerSync? = nil, historyError: @escaping @Sendable () -> String?) {
        self.json = json
        self.viewOnly = viewOnly
        self.sync = sync
        self.historyError = historyError
        encoder.outputFormatting = [.sortedKeys]
        timeFormatter.dateFormat = "HH:mm:ss.SSS"
    }

    /// Starts showing the companies with these symbols, in this order, as
    /// far as the store has them.
    ///
    /// - Throws: the store's error when the first read fails: there is no
    ///   earlier watchlist to fall back on.
    func show(_ symbols: [String], in context: ManagedObjectContext, storePath: String) throws {
        self.storePath = storePath
        self.context = context
        // A symbol given twice (`--watch A,A`) is shown once, where it first stands.
        var seen = Set<String>()
        self.symbols = symbols.filter { seen.insert($0).inserted }
        try fetchWatchedCompanies()
        rows = companies.map(model.row(of:))
        sectorRows = try SectorSummary.read(in: context)
        // Written at once, as the frames are (print would hold it in stdout's buffer until the end).
        if !json { FileHandle.standardOutput.write(Data("\u{1B}[?25l\u{1B}[2J".utf8)) }
    }

    /// Fetches the watched companies the store has now.
    private func fetchWatchedCompanies() throws {
        guard let context else { return }
        var request = FetchRequest<Company>()
        request.predicate = try FetchPredicate(format: "symbol IN %@", argumentArray: [symbols])
        request.returnsObjectsAsFaults = false
        let order = Dictionary(uniqueKeysWithValues: symbols.enumerated().map { ($1, $0) })
        companies = try context.fetch(request).sorted { order[$0.symbol, default: 0] < order[$1.symbol, default: 0] }
    }

    /// The first frame, before any merge: with `--view-only` on a store no
    /// process has imported into yet, it says what it waits for. Nothing with
    /// `--json`, whose lines are one per merge.
    func showFirstFrame(_ counters: TickerApp.Counters) {
        if !json { draw(counters, final: false, failure: nil) }
    }

    func showTopMovers(_ panel: TopMoversPanel) {
        movers = panel
    }

    /// Starts showing the companies that match `--search`.
    ///
    /// - Throws: the store's error when the first read fails, as ``show(_:in:storePath:)`` does.
    func showSearch(_ panel: SearchPanel) throws {
        search = panel
        (searchRows, searchMatches) = try panel.read()
    }

    /// Reads the watched companies, the top movers and the search panel again:
    /// new rows on success; on failure the last rows stay and `readError` says
    /// why, until a read succeeds.
    ///
    /// - Parameter companiesMayHaveArrived: whether the merge inserted companies,
    ///   which may be watched ones another process created.
    private func refresh(companiesMayHaveArrived: Bool) {
        do {
            // After a failed read too: the companies that arrived then are still to be found.
            if (companiesMayHaveArrived || readError != nil) && companies.count < symbols.count { try fetchWatchedCompanies() }
            let watched = try readRows(of: companies, read: model.row(of:))
            let moving = try readRows(of: movers?.companies ?? [], read: Row.init)
            // One query, computed by the store: what the merge brought is in it.
            let sectors = try context.map(SectorSummary.read(in:)) ?? []
            let found = try search?.read() ?? (rows: [], matches: 0)
            // Kept together: a failed read changes none of them.
            (rows, moverRows, sectorRows, searchRows, searchMatches) = (watched, moving, sectors, found.rows, found.matches)
            rowsReadAt = Date()
            readError = nil
        } catch {
            readError = "\(error)"
        }
    }

    /// Rows of these companies as the store has them now.
    private func readRows(of companies: [Company], read: (Company) -> Row) throws -> [Row] {
        var fresh: [Row] = []
        fresh.reserveCapacity(companies.count)
        for company in companies {
            // Throws the store's error and leaves the company a fault, rather
            // than drawing it with empty values. The first call loads every
            // company the last merge turned into a fault, in one query.
            try company.loadValues()
            // Its row is gone: deleted elsewhere, it leaves the list.
            if company.isDeleted { continue }
            fresh.append(read(company))
        }
        return fresh
    }

    func render(_ counters: TickerApp.Counters, companiesInserted: Bool) {
        // A merge the main queue runs while the stack closes comes after the last frame.
        if finished { return }
        changedSymbols = model.takeChangedSymbols()
        refresh(companiesMayHaveArrived: companiesInserted)
        draw(counters, final: false, failure: nil)
    }

    /// A frame (or JSON line) saying that reading other processes' saves
    /// failed: with `--view-only` nothing else would be drawn until a read
    /// succeeds, and the screen would look as if nothing was saved.
    func showHistoryFailure(_ counters: TickerApp.Counters) {
        if finished { return }
        draw(counters, final: false, failure: nil)
    }

    /// The last frame or JSON line; `failure` says why the run stopped, nil when it was asked to.
    func finish(_ counters: TickerApp.Counters, failure: String?) {
        finished = true
        changedSymbols = model.takeChangedSymbols()
        refresh(companiesMayHaveArrived: true)
        draw(counters, final: true, failure: failure)
        if !json {
            let summary = viewOnly ? "stopped: \(grouped(counters.importedObjects)) objects merged from \(counters.saves) saves of other processes."
                : "stopped: \(grouped(counters.importedObjects)) objects imported in \(counters.saves) saves."
            FileHandle.standardOutput.write(Data(("\u{1B}[?25h" + (failure.map { "failed: \($0)" } ?? summary) + "\n").utf8))
        }
    }

    private func draw(_ counters: TickerApp.Counters, final: Bool, failure: String?) {
        // Counted after the refresh, which may have fetched companies that another process created.
        let registeredInMain = context?.registeredObjectCount ?? 0
        if json {
            printJSON(counters, registeredInMain: registeredInMain, final: final, failure: failure)
            return
        }
        let elapsed = max(0.001, Double((clock.now - counters.started).components.seconds)
            + Double((clock.now - counters.started).components.attoseconds) / 1e18)
        var lines = [
            "ticker-import\(viewOnly ? " --view-only" : "") — \(storePath)",
            String(format: "\(viewOnly ? "merged" : "imported") %@ objects in %d saves · %.1f imports/s · last merge %.2f ms · registered in main: %d",
                   grouped(counters.importedObjects), counters.saves, Double(counters.saves) / elapsed,
                   counters.lastMergeMillis, registeredInMain)
                + (counters.trimmedUpdates > 0 ? " · old updates deleted: \(grouped(counters.trimmedUpdates))" : ""),
        ]
        if let sync { lines.append(sync.snapshot.line) }
        if viewOnly {
            lines.append(counters.lastSource.map { "last save merged from \(Self.describe($0))" }
                ?? "waiting for another process to import: ticker-import --import-only --store \(storePath)")
        }
        let width = Self.terminalWidth()
        // Errors are wrapped, not cut at the screen's edge: the message is the point.
        if let failure { lines += wrapped("ERROR: import failed: \(failure)", width) }
        if let readError {
            lines += wrapped("ERROR: read failed; the watchlist shows the rows read at \(timeFormatter.string(from: rowsReadAt)): \(readError)", width)
        }
        if let historyError = historyError() {
            lines += wrapped("ERROR: \(Self.historyFailure): \(historyError)", width)
        }
        lines.append("")
        var table = ["WATCHLIST", pad("SYMBOL", 7) + pad("NAME", 22) + lpad("PRICE", 10) + lpad("CHANGE", 9) + lpad("UPDATES", 9) + "  LAST UPDATE"]
        for row in rows {
            // `*`: the last merge changed it (Observation said so).
            table.append(pad((changedSymbols.contains(row.symbol) ? "*" : "") + row.symbol, 7) + pad(row.name, 22) + lpad(String(format: "%.2f", row.price), 10)
                         + lpad(String(format: "%+.2f%%", row.change), 9) + lpad(String(row.updates), 9)
                         + "  " + (row.lastUpdate.map(timeFormatter.string(from:)) ?? "—"))
        }
        var panel: [String] = []
        if let movers {
            panel = ["TOP MOVERS  last change " + movers.lastChange, pad("SYMBOL", 7) + lpad("PRICE", 10) + lpad("CHANGE", 9) + lpad("UPDATES", 9)]
            for row in moverRows {
                panel.append(pad(row.symbol, 7) + lpad(String(format: "%.2f", row.price), 10)
                             + lpad(String(format: "%+.2f%%", row.change), 9) + lpad(String(row.updates), 9))
            }
        }
        // The panel sits beside the watchlist when the terminal is wide enough, below it otherwise.
        if width >= 76 + 36 {
            for row in 0..<max(table.count, panel.count) {
                lines.append(pad(row < table.count ? table[row] : "", 76) + (row < panel.count ? panel[row] : ""))
            }
        } else {
            lines += table + (panel.isEmpty ? [] : [""] + panel)
        }
        if let search { lines += searchLines(search) }
        if !sectorRows.isEmpty {
            lines += ["", "BY SECTOR", pad("SECTOR", 14) + lpad("COMPANIES", 10) + lpad("UPDATES", 10) + lpad("AVG PRICE", 11)]
            for sector in sectorRows {
                lines.append(pad(sector.sector ?? "—", 14) + lpad(String(sector.companies), 10)
                             + lpad(grouped(Int(sector.updates)), 10) + lpad(String(format: "%.2f", sector.averagePrice), 11))
            }
        }
        if !final { lines += ["", "Ctrl-C stops after the current save."] }
        // Redraw in place: home, each line cleared to its end, then clear below. No full clear, no flicker.
        var frame = "\u{1B}[H"
        for line in lines { frame += String(line.prefix(width)) + "\u{1B}[K\n" }
        frame += "\u{1B}[J"
        FileHandle.standardOutput.write(Data(frame.utf8))
    }

    /// The search panel: the query, how many companies match, the last change,
    /// then the most relevant ones, matched words in `[brackets]`.
    private func searchLines(_ panel: SearchPanel) -> [String] {
        let shown = searchRows.count < searchMatches ? ", the \(searchRows.count) most relevant" : ""
        var lines = ["", "SEARCH \"\(panel.query.text)\"  \(searchMatches) \(searchMatches == 1 ? "company matches" : "companies match")\(shown)"
                     + "  last change " + panel.lastChange]
        if searchRows.isEmpty {
            lines.append("no company's name matches yet: the import renames one now and then")
            return lines
        }
        lines.append(pad("SYMBOL", 7) + pad("NAME", 34) + lpad("PRICE", 10) + lpad("CHANGE", 9))
        for row in searchRows {
            lines.append(pad(row.symbol, 7) + pad(row.highlightedName, 34) + lpad(String(format: "%.2f", row.price), 10)
                         + lpad(String(format: "%+.2f%%", row.change), 9))
        }
        return lines
    }

    private struct Line: Encodable {
        struct Entry: Encodable {
            var symbol: String
            var price: Double
            var change: Double
            var updates: Int64
        }
        var imported: Int
        var stockUpdates: Int
        var saved: Int
        var mergeMillis: Double
        var registeredInMain: Int
        /// Where the last merged save came from: "importer" (this process),
        /// "otherProcess", or "expiredHistory" (another process's saves whose
        /// history was purged before they were read: everything was refreshed).
        var source: String?
        /// The transaction author of the other process's save, which names its pid.
        var author: String?
        var watchlist: [Entry]
        /// The watched companies this merge changed, as Observation reported
        /// them (``WatchlistModel``), sorted.
        var changed: [String]
        var topMovers: [Entry]
        /// The market by sector after this merge (``SectorSummary``).
        var sectors: [SectorSummary.Row]
        /// With `--search`: the companies on its panel, most relevant first; absent without it.
        var search: [SearchEntry]?
        /// With `--search`: how many companies match it in all.
        var searchMatches: Int?
        /// Stock updates deleted by `--keep-updates` so far, as merged.
        var trimmed: Int
        /// With `--sync`: the engine's status, changes pushed and pulled, the
        /// last hub sequence applied (``TickerSync/Snapshot``); absent without it.
        var sync: TickerSync.Snapshot?
        var final: Bool
        /// Why the run stopped, on the final line of a failed run.
        var error: String?
        /// Why this refresh could not read the watchlist, which then holds the
        /// last rows read, and why other processes' saves could not be read.
        var readError: String?
    }

    /// One company of the search panel in a `--json` line.
    private struct SearchEntry: Encodable {
        var symbol: String
        var name: String
        /// The name with each match in `[brackets]`.
        var highlighted: String
    }

    private func printJSON(_ counters: TickerApp.Counters, registeredInMain: Int, final: Bool, failure: String?) {
        func rounded(_ change: Double) -> Double { (change * 100).rounded() / 100 }
        let line = Line(imported: counters.importedObjects, stockUpdates: counters.stockUpdates, saved: counters.saves, mergeMillis: counters.lastMergeMillis,
                        registeredInMain: registeredInMain,
                        source: counters.lastSource.map(Self.kind), author: counters.lastSource.flatMap(Self.author),
                        watchlist: rows.map { .init(symbol: $0.symbol, price: $0.price, change: rounded($0.change), updates: $0.updates) },
                        changed: changedSymbols.sorted(),
                        topMovers: moverRows.map {
                            .init(symbol: $0.symbol, price: $0.price, change: rounded($0.change), updates: $0.updates)
                        },
                        sectors: sectorRows,
                        search: search.map { _ in searchRows.map { .init(symbol: $0.symbol, name: $0.name, highlighted: $0.highlightedName) } },
                        searchMatches: search.map { _ in searchMatches }, trimmed: counters.trimmedUpdates,
                        sync: sync?.snapshot, final: final, error: failure, readError: readErrors())
        // Encoding fails only on a non-finite number, which no price or change here can be.
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// What the screen says before the stack's history error.
    private static let historyFailure = "reading other processes' saves failed; nothing is merged until a read succeeds"

    /// The `readError` of a `--json` line: the watchlist's read, the history's, or both.
    private func readErrors() -> String? {
        let errors = [readError, historyError().map { "\(Self.historyFailure): \($0)" }].compactMap { $0 }
        return errors.isEmpty ? nil : errors.joined(separator: "; ")
    }

    /// The source's name in `--json` lines.
    private static func kind(_ source: StackDidMerge.Source) -> String {
        switch source {
        case .importer: "importer"
        case .otherProcess: "otherProcess"
        case .expiredHistory: "expiredHistory"
        }
    }

    private static func author(_ source: StackDidMerge.Source) -> String? {
        if case .otherProcess(let author, _) = source { author } else { nil }
    }

    /// The source on the screen: another process by its transaction author, which names its pid.
    private static func describe(_ source: StackDidMerge.Source) -> String {
        switch source {
        case .importer: "this process's importer"
        case .otherProcess(let author, let processID): author ?? processID
        case .expiredHistory: "other processes, whose history was purged first: everything shown was reloaded"
        }
    }

    private func grouped(_ number: Int) -> String {
        let digits = String(number)
        var result = ""
        for (offset, character) in digits.enumerated() {
            if offset > 0 && (digits.count - offset) % 3 == 0 { result += "," }
            result.append(character)
        }
        return result
    }

    /// `text` in lines of at most `width` characters.
    private func wrapped(_ text: String, _ width: Int) -> [String] {
        var lines: [String] = []
        var rest = Substring(text)
        repeat {
            lines.append(String(rest.prefix(width)))
            rest = rest.dropFirst(width)
        } while !rest.isEmpty
        return lines
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? String(text.prefix(width - 1)) + " " : text + String(repeating: " ", count: width - text.count)
    }

    private func lpad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    private static func terminalWidth() -> Int {
        #if canImport(Glibc)
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        #endif
        return 100
    }
}
