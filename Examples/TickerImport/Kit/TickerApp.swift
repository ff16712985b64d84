import DataStack
import Foundation
import Synchronization

/// Runs the example: sets up the stack, imports the feed in the background and
/// shows the watchlist from the main context after every merge — or, in two
/// processes on one store, only the import (`--import-only`) or only the
/// watchlist, fed by the other process's saves (`--view-only`).
final class TickerApp: Sendable {
    let options: Options
    let stack = StackManager.default
    private let counters = Mutex(Counters())
    /// The live screen or `--json` merge lines; nil with `--import-only`.
    private let view: WatchlistView?
    /// The line per save of `--import-only`; nil otherwise.
    private let saveLog: SaveLog?
    /// What runs until the app is stopped.
    private let work = Mutex(Work())
    /// `--sync`: the engine keeping the local store in step with the hub; nil without the flag.
    private let sync: TickerSync?

    struct Counters {
        var importedObjects = 0
        var stockUpdates = 0
        var saves = 0
        var started = ContinuousClock.now
        var lastMergeMillis = 0.0
        /// Stock updates deleted by `--keep-updates` trims, as merged (not counted as saves or imports).
        var trimmedUpdates = 0
        /// Where the last merged save came from: this process's importer or another process.
        var lastSource: StackDidMerge.Source?
    }

    /// The import loop (with `--view-only`, a wait), whose value is the error
    /// that stopped it, nil when it was asked to stop; and whether a stop came
    /// before it started (a Ctrl-C while the store opens).
    private struct Work {
        var task: Task<(any Error)?, Never>?
        var isStopRequested = false
    }

    init(options: Options) {
        self.options = options
        let sync = options.sync.map(TickerSync.init(hubURL:))
        self.sync = sync
        self.view = options.mode == .importOnly ? nil : WatchlistView(json: options.json, viewOnly: options.mode == .viewOnly, sync: sync) {
            [stack] in stack.historyMergeError.map { "\($0)" }
        }
        self.saveLog = options.mode == .importOnly ? SaveLog(json: options.json, sync: sync) : nil
    }

    /// Sets everything up and starts importing (or, with `--view-only`,
    /// waiting for other processes' saves); returns once that runs.
    func start() async throws {
        try await setUpStack()
        // Before the market's companies are saved: the engine pushes that save like any other.
        try sync?.start(stack: stack)
        let feed = MarketFeed(seed: options.seed, tickers: options.tickers)
        let defaultWatch = Array(feed.listings.prefix(options.watchCount).map(\.symbol))
        switch options.mode {
        case .viewOnly:
            // The companies may not exist yet: the watchlist shows each once another process creates it.
            try await showWatchlist(options.watch.isEmpty ? defaultWatch : options.watch)
            run { await Self.waitUntilCancelled() }
        case .importOnly:
            _ = try await prepareCompanies(feed.listings)
            run { [self, feed] in await importFeed(feed) }
        case .importAndView:
            let stored = try await prepareCompanies(feed.listings)
            // With --sync, --watch may name another replica's companies: shown once they arrive, as --view-only shows them.
            let watched = (options.watch.isEmpty ? defaultWatch : options.watch).filter { stored.contains($0) || sync != nil }
            if watched.isEmpty { throw Options.UsageError(description: "none of the watched symbols is in the market") }
            try await showWatchlist(watched)
            run { [self, feed] in await importFeed(feed) }
        }
        if let duration = options.duration {
            Task.detached {
                try? await Task.sleep(for: .milliseconds(Int(duration * 1000)))
                self.stop()
            }
        }
    }

    /// Opens (or creates, or migrates) the store, showing a migration's progress.
    private func setUpStack() async throws {
        // A store made by the model's first version is migrated here (the
        // stack's default options): show how far it got when it takes a while.
        let progress = Task.detached { [stack, options] in
            for await fraction in stack.migrationProgress { MigrationProgressLine.write(fraction, json: options.json) }
        }
        defer { progress.cancel() }
        if options.modelFile {
            // The same model, as Xcode's editor writes it, shipped as a resource.
            try await stack.setup(modelNamed: "TickerModel", in: .module, storeURL: options.store,
                                  managedObjectClasses: [Company.self, StockUpdate.self])
        } else {
            try await stack.setup(classes: TickerModel.classes, storeURL: options.store)
        }
    }

    /// Shows the watchlist, the top movers and, with `--search`, the companies
    /// matching it, from the main context, and redraws them after every merge.
    private func showWatchlist(_ symbols: [String]) async throws {
        guard let view else { return }
        let main = stack.mainContext
        let storePath = stack.storeURL?.path ?? "in memory"
        let search = options.search
        try await main.perform {
            // The watchlist's view model observes the companies it shows (WatchlistModel).
            main.isObservable = true
            try view.show(symbols, in: main, storePath: storePath)
            view.showTopMovers(try TopMoversPanel(context: main))
            if let search { try view.showSearch(SearchPanel(query: search, context: main)) }
        }
        observeMerges()
        let snapshot = counters.withLock { counters in
            counters.started = .now
            return counters
        }
        await main.perform { view.showFirstFrame(snapshot) }
    }

    /// Runs `body` until the app is stopped, then finishes: 0 when asked to stop, 1 when `body` failed.
    private func run(_ body: @escaping @Sendable () async -> (any Error)?) {
        let task = Task.detached(operation: body)
        let stopNow = work.withLock { work in
            work.task = task
            return work.isStopRequested
        }
        if stopNow { task.cancel() }
        let main = stack.mainContext
        Task.detached {
            let failure = await task.value
            await main.perform { self.finish(failure: failure) }
        }
    }

    /// Imports the feed until cancelled, a save per `--batch` quotes; returns the error that stopped it.
    ///
    /// Each quote upserts its company by symbol — each save finds the
    /// companies of its quotes with one query — and inserts a stock update;
    /// now and then a quote renames its company (``MarketFeed/renameInterval``).
    /// With `--keep-updates`, each save is followed by a trim (``UpdateRetention``).
    ///
    /// `updateCount += 1` is computed from the stored count: another importer
    /// (another process on the store) that saved the company meanwhile makes
    /// the save meet a conflict, and the importers' merge policy would keep
    /// this chunk's count, losing the other's increments. So a chunk that meets
    /// a conflict is built again on the store's current rows and saved again
    /// (``ImportConflictResolution/rebuildChunk(attempts:)``): every increment
    /// lands, and each company's count equals its stock updates.
    private func importFeed(_ feed: MarketFeed) async -> (any Error)? {
        var feed = feed
        let listings = feed.listings
        let pace = options.rate.map(QuotePace.init(perSecond:))
        let quotes = AnySequence { AnyIterator { pace?.wait(); return feed.next(1).first } }
        let clock = UpdateClock()
        let retention = options.keepUpdates.map { UpdateRetention(stack: stack, limit: $0) }
        do {
            try await stack.performImport(quotes, chunkSize: options.batch, upserting: Company.self, by: "symbol",
                                          key: { listings[$0.listing].symbol },
                                          onConflict: .rebuildChunk(attempts: Self.conflictAttempts)) { quote, company, context in
                // New only if it was deleted since prepareCompanies: it is listed again.
                if company.isInserted { Self.list(company, as: listings[quote.listing]) }
                // Now and then a quote renames its company: `--search` results change as names do.
                if let name = quote.rename { company.name = name }
                let now = clock.next()
                company.price = quote.price
                company.lastUpdate = now
                company.updateCount += 1
                let update = StockUpdate(context: context)
                update.price = quote.price
                update.volume = quote.volume
                update.time = now
                update.company = company
            } progress: { [saveLog, stack, purgesHistory = sync == nil] progress in
                // Called once the chunk's save returned: the line stands for a save on disk
                // (and, with --keep-updates, for its trim).
                let trimmed = retention.map { Self.trim(with: $0) }
                saveLog?.recordImportSave(progress, trimmed: trimmed)
                // Not with --sync: the engine reads what to push from the history, and a replica
                // offline for longer than the purge's five minutes would never push what it dropped.
                if purgesHistory && progress.savedChunks % Self.historyPurgeInterval == 0 { Self.purgeHistory(of: stack) }
            }
            return nil
        } catch is CancellationError {
            return nil
        } catch {
            return error
        }
    }

    /// Runs one trim of `--keep-updates`; returns how many updates it deleted.
    ///
    /// A failed trim does not stop the import: the saves are on disk, and the
    /// next trim deletes everything beyond the newest N, so it catches up with
    /// what this one left. The error goes to stderr, and 0 is reported.
    private static func trim(with retention: UpdateRetention) -> Int {
        do {
            return try retention.trim()
        } catch {
            FileHandle.standardError.write(Data("ticker-import: deleting old price updates failed: \(error)\n".utf8))
            return 0
        }
    }

    /// Saves a chunk of quotes may take when other importers keep changing its
    /// companies, as the PostgreSQL peer tool's counter allows. Measured: two
    /// importers on ten companies, every save of 50 quotes touching each of
    /// them, took up to 39 for one chunk (the slower importer loses most
    /// races); on the default market conflicts are rare.
    static let conflictAttempts = 1_000

    /// Saves between two purges of the store's history.
    static let historyPurgeInterval = 100

    /// Deletes history older than five minutes, which keeps the store's size
    /// bounded on a long run; a viewer that fell further behind refreshes
    /// everything it shows (``StackDidMerge/Source/expiredHistory``).
    private static func purgeHistory(of stack: StackManager) {
        do {
            try stack.purgeHistory(olderThan: .seconds(300))
        } catch {
            // Not a failed import: the saves are on disk, only the history grows until the next purge.
            FileHandle.standardError.write(Data("ticker-import: purging history failed: \(error)\n".utf8))
        }
    }

    /// Waits for a stop: what `--view-only` runs in place of the import.
    private static func waitUntilCancelled() async -> (any Error)? {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        return nil
    }

    /// Stops after the save in progress.
    func stop() {
        let task = work.withLock { work in
            work.isStopRequested = true
            return work.task
        }
        task?.cancel()
    }

    /// Creates the listings the store does not have yet, and fills in what a
    /// store of the model's first version lacks, with one upsert of the
    /// companies by symbol: one save, whose one query (`symbol IN …`) finds
    /// the companies the store has; returns the symbols of every company
    /// the store then holds.
    ///
    /// Running twice on one store, or two importers starting at once, ends
    /// with one company per symbol: `Company.symbol` is declared unique, so a
    /// company another importer saved after that query is settled at save —
    /// the two become one row, with this save's values
    /// (``MergePolicy/mergeByPropertyObjectTrump``, the importers' policy).
    private func prepareCompanies(_ listings: [MarketFeed.Listing]) async throws -> Set<String> {
        // One chunk: the market appears in one save, as a viewer then shows it.
        try await stack.performImport(listings, chunkSize: listings.count, upserting: Company.self, by: "symbol",
                                      key: { $0.symbol }) { listing, company, _ in
            if company.isInserted {
                Self.list(company, as: listing)
            } else if company.sector == nil {
                // Companies from a store of the model's first version have no sector yet.
                company.sector = listing.sector
            }
        } progress: { [saveLog] progress in
            // A run on a store that has the market saves nothing here, and reports nothing.
            if progress.insertedObjects + progress.updatedObjects > 0 {
                saveLog?.recordListingSave(inserted: progress.insertedObjects, updated: progress.updatedObjects)
            }
        }
        // Every company, the market's and any other the store has (`--watch` may name them).
        let importer = stack.importerContext()
        return try await importer.perform {
            var request = FetchRequest<[String: Any]>(entityName: "Company")
            request.resultType = .dictionary
            request.propertiesToFetch = ["symbol"]
            return Set(try importer.fetch(request).compactMap { $0["symbol"] as? String })
        }
    }

    /// Fills in a new company from its listing (its symbol is set by the upsert).
    private static func list(_ company: Company, as listing: MarketFeed.Listing) {
        company.name = listing.name
        company.sector = listing.sector
        company.price = listing.openingPrice
        company.previousClose = listing.openingPrice
    }

    private func observeMerges() {
        _ = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { notification in
            guard let merge = try? StackDidMerge(notification) else { return }
            let snapshot = self.counters.withLock { counters -> Counters in
                // A trim of --keep-updates (here or in another process) only deletes
                // stock updates: it is neither a save of the import nor an import.
                if merge.save.insertedObjectIDs.isEmpty && !merge.save.deletedObjectIDs.isEmpty {
                    counters.trimmedUpdates += merge.save.deletedObjectIDs.count
                    return counters
                }
                counters.importedObjects += merge.save.insertedObjectIDs.count + merge.save.updatedObjectIDs.count
                counters.stockUpdates += merge.save.insertedObjectIDs.reduce(0) { $0 + ($1.entityName == "StockUpdate" ? 1 : 0) }
                counters.saves += 1
                counters.lastMergeMillis = Double(merge.duration.components.attoseconds) / 1e15 + Double(merge.duration.components.seconds) * 1000
                counters.lastSource = merge.source
                return counters
            }
            // Posted on the main queue, where the main context and the view live.
            self.view?.render(snapshot, companiesInserted: merge.save.insertedObjectIDs.contains { $0.entityName == "Company" })
        }
        // Without it, --view-only would show nothing while it cannot read other processes' saves.
        _ = NotificationCenter.default.addObserver(forName: StackManager.historyMergeDidFailNotification, object: stack, queue: nil) { _ in
            // Posted on the main queue, as merges are.
            self.view?.showHistoryFailure(self.counters.withLock { $0 })
        }
    }

    /// Ends a run that could not start: the error goes where a failed import's does.
    func fail(_ error: any Error) {
        DispatchQueue.main.async { self.finish(failure: error) }
    }

    /// Draws the last frame (or JSON line, or save line), closes the stack and
    /// exits: 0 when the run was stopped, 1 when the store or the import
    /// failed. On the main queue.
    ///
    /// Closing folds the store's write-ahead log into its file
    /// (``StackManager/close()``): without it every save since SQLite's last
    /// automatic checkpoint would stay in the `-wal`, and the file alone would
    /// not be the store.
    private func finish(failure: (any Error)?) {
        let message = failure.map(describe)
        // --sync: the engine stops first, after its cycle in progress, so that the last
        // frame shows all it pushed and pulled, as the store's sync tables then say.
        if let sync, sync.isRunning {
            let main = stack.mainContext
            Task.detached { [self] in
                await sync.stop()
                await main.perform { self.finish(message: message) }
            }
            return
        }
        finish(message: message)
    }

    private func finish(message: String?) {
        let snapshot = counters.withLock { $0 }
        view?.finish(snapshot, failure: message)
        saveLog?.finish(failure: message)
        if let message { FileHandle.standardError.write(Data("ticker-import: \(message)\n".utf8)) }
        // In a task: closing waits for the merges the main queue has still to run.
        Task.detached { [stack] in
            await stack.close()
            exit(message == nil ? ExitStatus.stopped : ExitStatus.failed)
        }
    }

    /// The error's text, naming the store's file: store errors name it, an
    /// error from deeper down gets it added.
    private func describe(_ error: any Error) -> String {
        let path = stack.storeURL?.path ?? options.store?.path ?? StackManager.defaultStoreURL.path
        let text = "\(error)"
        return text.contains(path) ? text : "\(text) (store at \(path))"
    }
}
