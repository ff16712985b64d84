import DataStack
import DataStackSync
import Foundation

/// The command line of ticker-import.
struct Options: Sendable {
    /// Which halves of the example run in this process.
    enum Mode: Sendable {
        /// The importer and the live screen, in one process.
        case importAndView
        /// `--import-only`: the importer, printing one line per save.
        case importOnly
        /// `--view-only`: the live screen of what other processes import.
        case viewOnly
    }

    var mode = Mode.importAndView
    var duration: Double?
    var tickers = 300
    var batch = 500
    /// Whether `--batch` was given: refused with `--view-only`, which imports nothing.
    private var batchGiven = false
    /// `--keep-updates N`: after each save the importer deletes the oldest
    /// price updates beyond the newest N (a batch delete); nil keeps them all.
    var keepUpdates: Int?
    var watch: [String] = []
    /// How many companies the watchlist shows without `--watch`: the first of the market.
    var watchCount = 10
    /// `--search TEXT`: the screen lists the companies whose name matches it,
    /// most relevant first (``SearchPanel``); nil shows no such panel.
    var search: SearchQuery?
    var store: URL?
    /// `--sync URL`: the hub this process's local store syncs through
    /// (``TickerSync``); nil syncs nothing.
    var sync: URL?
    /// `--rate N`: at most N quotes a second; nil imports as fast as the store saves.
    var rate: Int?
    var seed: UInt64 = 1
    var json = false
    var modelFile = false
    var runLoop = false

    static let usage = """
        usage: ticker-import [options]

        Imports a simulated stock feed through background importer contexts while
        the main context shows a live watchlist that refreshes after every merge.

        Two processes can share one store: run --import-only in one terminal and
        --view-only in another, on the same --store.

          --import-only        import without a screen, printing one line per save once
                               it is on disk
          --view-only          import nothing: show what other processes import into the
                               store, merged from its history; a store that does not exist
                               yet is created empty, and the screen waits for their saves
          --duration SECONDS   stop after this long (default: run until Ctrl-C)
          --tickers N          companies in the simulated market (default 300)
          --batch N            price updates per importer save (default 500)
          --keep-updates N     after each save, delete all but the newest N price updates
                               (one batch delete), so a long run's store stays bounded:
                               at most N + --batch updates (default: keep every update)
          --watch SYM,SYM,...  tickers to show (default: the first 10 of the market;
                               with --view-only, shown once another process creates them)
          --search TEXT        also show the 10 companies whose name best matches TEXT, the
                               matched words in [brackets], kept up to date as the import
                               adds and renames companies. TEXT is a full-text query: words
                               (all must match), OR, a NOT b, "a phrase", prefix*, ( )
          --store PATH|URL     the SQLite store (default: $XDG_DATA_HOME or ~/.local/share,
                               then ticker-import/ticker-import.sqlite), or a postgresql://
                               URL with ticker-import-postgresql (Stores/PostgreSQL)
          --sync URL           keep the local --store in step with other replicas through the
                               sync hub at URL (postgresql://… with ticker-import-postgresql):
                               run one process per terminal, each with its own --store and
                               --seed, and each shows every replica's companies; --watch may
                               name another replica's symbols, shown once they arrive
          --rate N             import at most N quotes a second (default: as fast as the
                               store saves)
          --seed N             seed of the simulated market (default 1)
          --json               print one JSON object per merge instead of the live screen
                               (per save with --import-only)
          --model-file         load the model from TickerModel.xcdatamodeld instead of code
          --run-loop           service the main queue with RunLoop.main instead of dispatchMain()
          --help               show this help

        Exit status: 0 when stopped by --duration or Ctrl-C, 1 when the store could
        not be opened or an import failed (the error is on stderr, on the screen,
        and in the last --json line as "error"), 2 for a bad option, 130 when a
        second Ctrl-C quits at once.
        """

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// A path, or a URL with a scheme (`postgresql://…`) for a store type registered for it.
    static func storeLocation(_ text: String) throws -> URL {
        guard text.contains("://") else { return URL(fileURLWithPath: text) }
        guard let url = URL(string: text), let scheme = url.scheme else { throw UsageError(description: "--store: '\(text)' is not a URL") }
        if scheme != "file", StoreType.registered(forURLScheme: scheme) == nil {
            throw UsageError(description: """
                --store: this ticker-import opens SQLite stores; for \(scheme):// run ticker-import-postgresql \
                (swift run --package-path Stores/PostgreSQL ticker-import-postgresql …)
                """)
        }
        return url
    }

    /// A hub URL whose scheme has a hub registered (``SyncHubs``); the hub is
    /// made, and reached, only once the store is open.
    static func syncHubLocation(_ text: String) throws -> URL {
        guard text.contains("://"), let url = URL(string: text), url.scheme != nil, url.host != nil || url.path.count > 1 else {
            throw UsageError(description: "--sync: '\(text)' is not a hub URL (postgresql://host/database)")
        }
        if let scheme = url.scheme?.lowercased(), ["postgresql", "postgres"].contains(scheme), !SyncHubs.isRegistered(scheme: scheme) {
            throw UsageError(description: """
                --sync: this ticker-import has no PostgreSQL hub; for \(scheme):// run ticker-import-postgresql \
                (swift run --package-path Stores/PostgreSQL ticker-import-postgresql --sync … --store own.sqlite)
                """)
        }
        do {
            try SyncHubs.validate(url)
        } catch {
            throw UsageError(description: "--sync: \(error)")
        }
        return url
    }

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var remaining = arguments[...]
        func value(for flag: String) throws -> String {
            guard let value = remaining.popFirst(), !value.hasPrefix("--") else {
                throw UsageError(description: "\(flag) needs a value")
            }
            return value
        }
        func positive(_ flag: String) throws -> Int {
            let text = try value(for: flag)
            guard let number = Int(text), number > 0 else { throw UsageError(description: "\(flag) takes a positive whole number, not '\(text)'") }
            return number
        }
        while let flag = remaining.popFirst() {
            switch flag {
            case "--duration":
                let text = try value(for: flag)
                guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                    throw UsageError(description: "--duration takes a positive number of seconds, not '\(text)'")
                }
                options.duration = seconds
            case "--tickers": options.tickers = try positive(flag)
            case "--batch":
                options.batch = try positive(flag)
                options.batchGiven = true
            case "--keep-updates": options.keepUpdates = try positive(flag)
            case "--watch":
                options.watch = try value(for: flag).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).uppercased() }.filter { !$0.isEmpty }
                if options.watch.isEmpty { throw UsageError(description: "--watch needs at least one symbol") }
            case "--search":
                do {
                    options.search = try SearchQuery(try value(for: flag))
                } catch let error as SearchQueryError {
                    // "bad search query at offset 0 in '"unclosed': …": the place and what is wrong.
                    throw UsageError(description: "--search: \(error)")
                }
            case "--store": options.store = try storeLocation(try value(for: flag))
            case "--sync": options.sync = try syncHubLocation(try value(for: flag))
            case "--rate": options.rate = try positive(flag)
            case "--seed":
                let text = try value(for: flag)
                guard let seed = UInt64(text) else { throw UsageError(description: "--seed takes a whole number, not '\(text)'") }
                options.seed = seed
            case "--import-only": try options.choose(.importOnly)
            case "--view-only": try options.choose(.viewOnly)
            case "--json": options.json = true
            case "--model-file": options.modelFile = true
            case "--run-loop": options.runLoop = true
            case "--help", "-h": throw UsageError(description: "")
            default: throw UsageError(description: "unknown option '\(flag)'")
            }
        }
        if options.tickers > 20_000 { throw UsageError(description: "--tickers is at most 20000") }
        // An option for the half that does not run would be silently ignored: say so instead.
        if options.mode == .importOnly && !options.watch.isEmpty {
            throw UsageError(description: "--watch shows tickers, and --import-only shows none")
        }
        if options.mode == .importOnly && options.search != nil {
            throw UsageError(description: "--search shows companies, and --import-only shows none")
        }
        if options.mode == .viewOnly && options.batchGiven {
            throw UsageError(description: "--batch sizes the import's saves, and --view-only imports nothing")
        }
        if options.mode == .viewOnly && options.rate != nil {
            throw UsageError(description: "--rate paces the import, and --view-only imports nothing")
        }
        if options.sync != nil, let store = options.store, !store.isFileURL {
            throw UsageError(description: """
                --sync keeps a local SQLite store in step with other replicas; --store \(store.scheme ?? "")://… \
                is a shared database already: give each process a file of its own (--store a.sqlite)
                """)
        }
        if options.mode == .viewOnly && options.keepUpdates != nil {
            throw UsageError(description: "--keep-updates trims what the import saves, and --view-only imports nothing")
        }
        return options
    }

    /// Sets the mode of `--import-only` or `--view-only`; the two exclude each other.
    private mutating func choose(_ mode: Mode) throws {
        if self.mode != .importAndView && self.mode != mode {
            throw UsageError(description: "--import-only and --view-only exclude each other: run one of each, in two processes")
        }
        self.mode = mode
    }
}

/// How ticker-import exits; `--help` and the README list them.
enum ExitStatus {
    /// Stopped by `--duration` or Ctrl-C, every save reported is on disk; also `--help`.
    static let stopped: Int32 = 0
    /// The store could not be opened, or a save or read of the import failed.
    static let failed: Int32 = 1
    /// A bad option.
    static let usage: Int32 = 2
    /// A second Ctrl-C quit at once (128 + SIGINT, as shells report it).
    static let interrupted: Int32 = 130
}
