import DataStack
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The watchlist on screen: the main context's companies, drawn after every merge,
/// with the top movers panel beside it.
///
/// It holds the watched companies strongly, so they stay registered in the
/// main context — those, and the movers on the panel, are the only objects a
/// merge refreshes.
// @unchecked Sendable: every property is touched only on the main queue (the main context's queue).
final class WatchlistView: @unchecked Sendable {
    private let json: Bool
    private var companies: [Company] = []
    private var movers: TopMoversPanel?
    private var storePath = ""
    private let clock = ContinuousClock()
    private let encoder = JSONEncoder()

    init(json: Bool) {
        self.json = json
        encoder.outputFormatting = [.sortedKeys]
    }

    func show(_ ids: [ObjectID], in context: ManagedObjectContext, storePath: String) {
        companies = ids.compactMap { try? context.existingObject(with: $0) as? Company }
        self.storePath = storePath
        if !json { print("\u{1B}[?25l\u{1B}[2J", terminator: "") }
    }

    func showTopMovers(_ panel: TopMoversPanel) {
        movers = panel
    }

    func render(_ counters: TickerApp.Counters, registeredInMain: Int) {
        if json {
            printJSON(counters, registeredInMain: registeredInMain, final: false)
            return
        }
        let elapsed = max(0.001, Double((clock.now - counters.started).components.seconds)
            + Double((clock.now - counters.started).components.attoseconds) / 1e18)
        var lines = [
            "ticker-import — \(storePath)",
            String(format: "imported %@ objects in %d saves · %.1f imports/s · last merge %.2f ms · registered in main: %d",
                   grouped(counters.importedObjects), counters.saves, Double(counters.saves) / elapsed,
                   counters.lastMergeMillis, registeredInMain),
            "",
        ]
        var table = ["WATCHLIST", pad("SYMBOL", 7) + pad("NAME", 22) + lpad("PRICE", 10) + lpad("CHANGE", 9) + lpad("UPDATES", 9) + "  LAST UPDATE"]
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        for company in companies where !company.isDeleted {
            let change = company.previousClose > 0 ? (company.price / company.previousClose - 1) * 100 : 0
            table.append(pad(company.symbol, 7) + pad(company.name, 22) + lpad(String(format: "%.2f", company.price), 10)
                         + lpad(String(format: "%+.2f%%", change), 9) + lpad(String(company.updateCount), 9)
                         + "  " + (company.lastUpdate.map(formatter.string(from:)) ?? "—"))
        }
        var panel: [String] = []
        if let movers {
            panel = ["TOP MOVERS  last change " + movers.lastChange, pad("SYMBOL", 7) + lpad("PRICE", 10) + lpad("CHANGE", 9) + lpad("UPDATES", 9)]
            for company in movers.companies {
                let change = company.previousClose > 0 ? (company.price / company.previousClose - 1) * 100 : 0
                panel.append(pad(company.symbol, 7) + lpad(String(format: "%.2f", company.price), 10)
                             + lpad(String(format: "%+.2f%%", change), 9) + lpad(String(company.updateCount), 9))
            }
        }
        let width = Self.terminalWidth()
        // The panel sits beside the watchlist when the terminal is wide enough, below it otherwise.
        if width >= 76 + 36 {
            for row in 0..<max(table.count, panel.count) {
                lines.append(pad(row < table.count ? table[row] : "", 76) + (row < panel.count ? panel[row] : ""))
            }
        } else {
            lines += table + (panel.isEmpty ? [] : [""] + panel)
        }
        lines.append("")
        lines.append("Ctrl-C stops after the current save.")
        // Redraw in place: home, each line cleared to its end, then clear below. No full clear, no flicker.
        var frame = "\u{1B}[H"
        for line in lines { frame += String(line.prefix(width)) + "\u{1B}[K\n" }
        frame += "\u{1B}[J"
        FileHandle.standardOutput.write(Data(frame.utf8))
    }

    func finish(_ counters: TickerApp.Counters, registeredInMain: Int) {
        if json {
            printJSON(counters, registeredInMain: registeredInMain, final: true)
        } else {
            render(counters, registeredInMain: registeredInMain)
            print("\u{1B}[?25hstopped: \(grouped(counters.importedObjects)) objects imported in \(counters.saves) saves.")
        }
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
        var watchlist: [Entry]
        var topMovers: [Entry]
        var final: Bool
    }

    private func printJSON(_ counters: TickerApp.Counters, registeredInMain: Int, final: Bool) {
        let line = Line(imported: counters.importedObjects, stockUpdates: counters.stockUpdates, saved: counters.saves, mergeMillis: counters.lastMergeMillis,
                        registeredInMain: registeredInMain,
                        watchlist: companies.filter { !$0.isDeleted }.map { company in
                            .init(symbol: company.symbol, price: company.price,
                                  change: company.previousClose > 0 ? ((company.price / company.previousClose - 1) * 10_000).rounded() / 100 : 0,
                                  updates: company.updateCount)
                        },
                        topMovers: (movers?.companies ?? []).map { company in
                            .init(symbol: company.symbol, price: company.price,
                                  change: company.previousClose > 0 ? ((company.price / company.previousClose - 1) * 10_000).rounded() / 100 : 0,
                                  updates: company.updateCount)
                        }, final: final)
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
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
