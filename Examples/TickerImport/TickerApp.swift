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

    struct Counters {
        var importedObjects = 0
        var stockUpdates = 0
        var saves = 0
        var started = ContinuousClock.now
        var lastMergeMillis = 0.0
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
        self.view = options.mode == .importOnly ? nil : WatchlistView(json: options.json, viewOnly: options.mode == .viewOnly)
        self.saveLog = options.mode == .importOnly ? SaveLog(json: options.json) : nil
    }

    /// Sets everything up and starts importing (or, with `--view-only`,
    /// waiting for other processes' saves); returns once that runs.
    func start() async throws {
        try await setUpStack()
        let feed = MarketFeed(seed: options.seed, tickers: options.tickers)
        let defaultWatch = Array(feed.listings.prefix(options.watchCount).map(\.symbol))
        switch options.mode {
        case .viewOnly:
            // The companies may not exist yet: the watchlist shows each once another process creates it.
            try await showWatchlist(options.watch.isEmpty ? defaultWatch : options.watch)
            run { await Self.waitUntilCancelled() }
        case .importOnly:
            let market = try await prepareCompanies(feed.listings)
            run { [self, feed] in await importFeed(feed, into: market.byListing) }
        case .importAndView:
            let market = try await prepareCompanies(feed.listings)
            let watched = (options.watch.isEmpty ? defaultWatch : options.watch).filter { market.bySymbol[$0] != nil }
            if watched.isEmpty { throw Options.UsageError(description: "none of the watched symbols is in the market") }
            try await showWatchlist(watched)
            run { [self, feed] in await importFeed(feed, into: market.byListing) }
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
            try await stack.setup(model: TickerModel.make(), storeURL: options.store)
        }
    }

    /// Shows the watchlist and the top movers from the main context, and redraws them after every merge.
    private func showWatchlist(_ symbols: [String]) async throws {
        guard let view else { return }
        let main = stack.mainContext
        let storePath = stack.storeURL?.path ?? "in memory"
        try await main.perform {
            try view.show(symbols, in: main, storePath: storePath)
            view.showTopMovers(try TopMoversPanel(context: main))
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
    private func importFeed(_ feed: MarketFeed, into companies: [ObjectID]) async -> (any Error)? {
        var feed = feed
        let quotes = AnySequence { AnyIterator { feed.next(1).first } }
        do {
            try await stack.performImport(quotes, chunkSize: options.batch) { quote, context in
                guard let company = context.object(with: companies[quote.listing]) as? Company else { return }
                let now = Date()
                company.price = quote.price
                company.lastUpdate = now
                company.updateCount += 1
                let update = StockUpdate(context: context)
                update.price = quote.price
                update.volume = quote.volume
                update.time = now
                update.company = company
            } progress: { [saveLog, stack] progress in
                // Called once the chunk's save returned: the line stands for a save on disk.
                saveLog?.recordImportSave(progress)
                if progress.savedChunks % Self.historyPurgeInterval == 0 { Self.purgeHistory(of: stack) }
            }
            return nil
        } catch is CancellationError {
            return nil
        } catch {
            return error
        }
    }

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

    /// Creates the listings the store does not have yet; returns every company's ID.
    private func prepareCompanies(_ listings: [MarketFeed.Listing]) async throws -> (bySymbol: [String: ObjectID], byListing: [ObjectID]) {
        let importer = stack.importerContext()
        return try await importer.perform {
            var bySymbol: [String: ObjectID] = [:]
            var request = FetchRequest<Company>()
            request.returnsObjectsAsFaults = false
            let sectors = Dictionary(listings.map { ($0.symbol, $0.sector) }, uniquingKeysWith: { first, _ in first })
            for company in try importer.fetch(request) {
                bySymbol[company.symbol] = company.objectID
                // Companies from a store of the model's first version have no sector yet.
                if company.sector == nil { company.sector = sectors[company.symbol] }
            }
            var created: [Company] = []
            for listing in listings where bySymbol[listing.symbol] == nil {
                let company = Company(context: importer)
                company.symbol = listing.symbol
                company.name = listing.name
                company.sector = listing.sector
                company.price = listing.openingPrice
                company.previousClose = listing.openingPrice
                created.append(company)
            }
            let (inserted, updated) = (importer.insertedObjects.count, importer.updatedObjects.count)
            try importer.save()
            if inserted + updated > 0 { self.saveLog?.recordListingSave(inserted: inserted, updated: updated) }
            for company in created { bySymbol[company.symbol] = company.objectID }
            return (bySymbol, listings.compactMap { bySymbol[$0.symbol] })
        }
    }

    private func observeMerges() {
        _ = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { notification in
            guard let merge = try? StackDidMerge(notification) else { return }
            let snapshot = self.counters.withLock { counters -> Counters in
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
    }

    /// Ends a run that could not start: the error goes where a failed import's does.
    func fail(_ error: any Error) {
        DispatchQueue.main.async { self.finish(failure: error) }
    }

    /// Draws the last frame (or JSON line, or save line) and exits: 0 when the run was
    /// stopped, 1 when the store or the import failed. On the main queue.
    private func finish(failure: (any Error)?) {
        let snapshot = counters.withLock { $0 }
        let message = failure.map(describe)
        view?.finish(snapshot, failure: message)
        saveLog?.finish(failure: message)
        if let message { FileHandle.standardError.write(Data("ticker-import: \(message)\n".utf8)) }
        exit(failure == nil ? ExitStatus.stopped : ExitStatus.failed)
    }

    /// The error's text, naming the store's file: store errors name it, an
    /// error from deeper down gets it added.
    private func describe(_ error: any Error) -> String {
        let path = stack.storeURL?.path ?? options.store?.path ?? StackManager.defaultStoreURL.path
        let text = "\(error)"
        return text.contains(path) ? text : "\(text) (store at \(path))"
    }
}
