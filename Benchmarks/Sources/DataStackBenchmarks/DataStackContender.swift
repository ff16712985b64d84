import DataStack
import Foundation
import Synchronization

/// DataStack as an app uses it: a `StackManager` on a SQLite file, imports
/// through `performImport` (importer contexts, a save and reset per chunk),
/// reads through the main context.
enum DataStackBench {
    /// A stack on `url` (with the stack's default options unless given others), with a watcher of its merges.
    static func open(_ url: URL, model: ManagedObjectModel = BenchModel.make(),
                     options: StoreOptions = .stackDefaults) async throws -> (StackManager, MergeWatcher) {
        let stack = StackManager()
        let watcher = MergeWatcher(stack)
        try await stack.setup(model: model, storeURL: url, options: options)
        return (stack, watcher)
    }

    /// Imports the rows in chunks; returns the number of chunks saved.
    static func insert(_ rows: [TickerValues], chunkSize: Int, into stack: StackManager) async throws -> Int {
        let progress = try await stack.performImport(rows, chunkSize: chunkSize) { values, context in
            BenchTicker(context: context).assign(values)
        }
        return progress.savedChunks
    }

    private static func read(_ ticker: BenchTicker, into checksum: inout Checksum) {
        checksum.add(symbol: ticker.symbol, name: ticker.name, price: ticker.price, volume: ticker.volume, time: ticker.time)
    }

    /// Every object, fetched filled (`returnsObjectsAsFaults = false`), every attribute read.
    static func fetchAll(in context: ManagedObjectContext) async throws -> Checksum {
        try await context.perform {
            var request = FetchRequest<BenchTicker>()
            request.returnsObjectsAsFaults = false
            var checksum = Checksum()
            for ticker in try context.fetch(request) { read(ticker, into: &checksum) }
            return checksum
        }
    }

    /// The row cache's hits and misses while a fault task fired its faults.
    typealias CacheCounts = (hits: Int, misses: Int)

    /// Fetches every ticker as a fault, its row read and cached (the default),
    /// fires every `stride`-th; returns what they read and the row cache's
    /// hits and misses while firing.
    static func fetchFaultsThenFire(every stride: Int, in context: ManagedObjectContext) async throws -> (Checksum, cache: CacheCounts) {
        // Each way has a closure of its own, so a profiler can count one alone (Scripts/instruction-counts.sh).
        try await context.perform { try fireFaults(every: stride, in: context, includesPropertyValues: true) }
    }

    /// ``fetchFaultsThenFire(every:in:)`` with `includesPropertyValues = false`:
    /// IDs only, each fired fault a query of its own.
    static func fetchIDFaultsThenFire(every stride: Int, in context: ManagedObjectContext) async throws -> (Checksum, cache: CacheCounts) {
        try await context.perform { try fireFaults(every: stride, in: context, includesPropertyValues: false) }
    }

    private static func fireFaults(every stride: Int, in context: ManagedObjectContext,
                                   includesPropertyValues: Bool) throws -> (Checksum, cache: CacheCounts) {
        var request = FetchRequest<BenchTicker>()
        request.includesPropertyValues = includesPropertyValues
        let tickers = try context.fetch(request)
        var checksum = Checksum()
        let before = context.persistentStoreCoordinator?.rowCacheStatistics
        for index in Swift.stride(from: 0, to: tickers.count, by: stride) { read(tickers[index], into: &checksum) }
        let after = context.persistentStoreCoordinator?.rowCacheStatistics
        return (checksum, (hits: (after?.hits ?? 0) - (before?.hits ?? 0), misses: (after?.misses ?? 0) - (before?.misses ?? 0)))
    }
}

/// Counts a stack's merges (``StackManager/didMergeNotification``) and keeps a
/// summary of each, so a benchmark can wait for them. It keeps no object IDs,
/// so that watching a long import does not itself use memory in proportion to it.
final class MergeWatcher: Sendable {
    struct Merge: Sendable {
        /// When the stack's merge notification arrived.
        var received: ContinuousClock.Instant
        /// `StackDidMerge.duration`.
        var duration: Duration
        /// How many objects the save inserted, updated and deleted.
        var saved: (inserted: Int, updated: Int, deleted: Int)
        /// How many registered objects of the main context the merge refreshed.
        var refreshed: Int
    }

    private final class Log: Sendable {
        let merges = Mutex<[Merge]>([])
    }

    private let log = Log()
    private let token: Token

    init(_ stack: StackManager) {
        let log = self.log
        token = Token(NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) { notification in
            let now = ContinuousClock.now
            guard let payload = try? StackDidMerge(notification) else { return }
            let merge = Merge(received: now, duration: payload.duration,
                              saved: (payload.save.insertedObjectIDs.count, payload.save.updatedObjectIDs.count,
                                      payload.save.deletedObjectIDs.count),
                              refreshed: payload.refreshedObjectIDs.count)
            log.merges.withLock { $0.append(merge) }
        })
    }

    deinit { NotificationCenter.default.removeObserver(token.observer) }

    var count: Int { log.merges.withLock { $0.count } }

    var merges: [Merge] { log.merges.withLock { $0 } }

    /// Waits until `count` merges arrived (the main queue keeps running meanwhile).
    @discardableResult
    func wait(for count: Int, timeout: Duration = .seconds(600)) async throws -> [Merge] {
        let deadline = ContinuousClock.now + timeout
        while self.count < count {
            guard ContinuousClock.now < deadline else { throw BenchError("timed out waiting for merge \(count) (have \(self.count))") }
            try await Task.sleep(for: .microseconds(200))
        }
        return merges
    }
}

// @unchecked Sendable: an opaque NotificationCenter token, only handed back to it.
private final class Token: @unchecked Sendable {
    let observer: any NSObjectProtocol
    init(_ observer: any NSObjectProtocol) { self.observer = observer }
}
