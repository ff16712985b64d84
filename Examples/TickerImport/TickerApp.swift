import DataStack
import Foundation
import Synchronization

/// Runs the example: sets up the stack, imports the feed in the background and
/// shows the watchlist from the main context after every merge.
final class TickerApp: Sendable {
    let options: Options
    let stack = StackManager.default
    private let counters = Mutex(Counters())
    private let view: WatchlistView
    /// The import loop; its value is the error that stopped it, nil when it was asked to stop.
    private let importTask = Mutex<Task<(any Error)?, Never>?>(nil)

    struct Counters {
        var importedObjects = 0
        var stockUpdates = 0
        var saves = 0
        var started = ContinuousClock.now
        var lastMergeMillis = 0.0
    }

    init(options: Options) {
        self.options = options
        self.view = WatchlistView(json: options.json)
    }

    /// Sets everything up and starts importing; returns once the import runs.
    func start() async throws {
        // A store made by the model's first version is migrated here (the
        // stack's default options): show how far it got when it takes a while.
        let progress = Task.detached { [stack, view] in
            for await fraction in stack.migrationProgress { view.showMigration(fraction) }
        }
        defer { progress.cancel() }
        if options.modelFile {
            // The same model, as Xcode's editor writes it, shipped as a resource.
            try await stack.setup(modelNamed: "TickerModel", in: .module, storeURL: options.store,
                                  managedObjectClasses: [Company.self, StockUpdate.self])
        } else {
            try await stack.setup(model: TickerModel.make(), storeURL: options.store)
        }
        var feed = MarketFeed(seed: options.seed, tickers: options.tickers)
        let ids = try await prepareCompanies(feed.listings)
        let watched = options.watch.isEmpty ? Array(feed.listings.prefix(10).map(\.symbol)) : options.watch
        let watchIDs = watched.compactMap { ids.bySymbol[$0] }
        if watchIDs.isEmpty { throw Options.UsageError(description: "none of the watched symbols is in the market") }

        let main = stack.mainContext
        let storePath = stack.storeURL?.path ?? "in memory"
        try await main.perform {
            try self.view.show(watchIDs, in: main, storePath: storePath)
            self.view.showTopMovers(try TopMoversPanel(context: main))
        }
        observeMerges()
        counters.withLock { $0.started = .now }

        let batch = options.batch
        let listingIDs = ids.byListing
        let task = Task.detached { [stack] () -> (any Error)? in
            let quotes = AnySequence { AnyIterator { feed.next(1).first } }
            do {
                try await stack.performImport(quotes, chunkSize: batch) { quote, context in
                    guard let company = context.object(with: listingIDs[quote.listing]) as? Company else { return }
                    let now = Date()
                    company.price = quote.price
                    company.lastUpdate = now
                    company.updateCount += 1
                    let update = StockUpdate(context: context)
                    update.price = quote.price
                    update.volume = quote.volume
                    update.time = now
                    update.company = company
                }
                return nil
            } catch is CancellationError {
                return nil
            } catch {
                return error
            }
        }
        importTask.withLock { $0 = task }
        Task.detached {
            let failure = await task.value
            await main.perform { self.finish(failure: failure) }
        }
        if let duration = options.duration {
            Task.detached {
                try? await Task.sleep(for: .milliseconds(Int(duration * 1000)))
                self.stop()
            }
        }
    }

    /// Stops after the save in progress.
    func stop() {
        importTask.withLock { $0?.cancel() }
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
            try importer.save()
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
                return counters
            }
            // Posted on the main queue, where the main context and the view live.
            self.view.render(snapshot, registeredInMain: self.stack.mainContext.registeredObjectCount)
        }
    }

    /// Ends a run that could not start: the error goes where a failed import's does.
    func fail(_ error: any Error) {
        DispatchQueue.main.async { self.finish(failure: error) }
    }

    /// Draws the last frame (or JSON line) and exits: 0 when the run was
    /// stopped, 1 when the store or the import failed. On the main queue.
    private func finish(failure: (any Error)?) {
        let snapshot = counters.withLock { $0 }
        let message = failure.map(describe)
        view.finish(snapshot, registeredInMain: stack.isReady ? stack.mainContext.registeredObjectCount : 0, failure: message)
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
