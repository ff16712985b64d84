import Foundation
import Synchronization
import Testing
import DataStack
@_spi(DataStackInternal) import DataStackSupport

/// The ticker model the stack tests share.
final class Ticker: ManagedObject {
    @Managed var symbol: String
    @Managed var price: Double
    @Managed var name: String?
}

enum StackTestModel {
    static func make() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: "Ticker", managedObjectClass: Ticker.self, properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "name", type: .string),
            ]),
        ])
    }
}

/// A temporary folder, removed when the value is deinitialized.
final class StackDirectory: Sendable {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("StackTests-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var storeURL: URL { url.appendingPathComponent("Stack.sqlite") }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Collects a stack's merge notifications, so a test can wait for them:
/// each arrival wakes the waits it satisfies (no polling).
final class MergeRecorder: Sendable {
    /// One merge, as the main queue saw it.
    struct Arrival: Sendable {
        var merge: StackDidMerge
        /// When the notification was posted, by the wall clock (which other processes share).
        var time: Date
        /// The main context's registered objects just after the merge; nil
        /// unless the recorder was asked to count them.
        var registeredInMain: Int?
    }

    /// The merges so far, and the tests waiting for more.
    private let log = Recording<Arrival>()
    private let token: ObserverBox

    /// - Parameter countsRegisteredObjects: also counts the main context's
    ///   registered objects after each merge (which sweeps its registry of the
    ///   unchanged objects nothing holds, as reading the count always does).
    init(_ stack: StackManager, countsRegisteredObjects: Bool = false) {
        let log = self.log
        let observer = NotificationCenter.default.addObserver(forName: StackManager.didMergeNotification, object: stack, queue: nil) {
            [weak stack] notification in
            guard let merge = try? StackDidMerge(notification) else { return }
            // Posted on the main queue, the main context's.
            let registered = countsRegisteredObjects ? stack?.mainContext.registeredObjectCount : nil
            log.append(Arrival(merge: merge, time: Date(), registeredInMain: registered))
        }
        token = ObserverBox(observer)
    }

    deinit { NotificationCenter.default.removeObserver(token.observer) }

    var all: [StackDidMerge] { arrivals.map(\.merge) }
    var arrivals: [Arrival] { log.elements }

    /// Waits until `count` merges arrived, and returns them; records an issue
    /// at the caller when they did not arrive within `seconds`.
    @discardableResult
    func wait(for count: Int, seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async -> [StackDidMerge] {
        await wait(until: "\(count) merges", seconds: seconds, sourceLocation: sourceLocation) { $0.count >= count }
        return all
    }

    /// Waits until the merges so far satisfy `isMet`, woken by each arrival;
    /// records an issue naming `what` and the merges that came at the caller
    /// when they did not within `seconds`, and says whether they did.
    ///
    /// The deadline is generous because a loaded machine (CI runs every suite
    /// at once on two cores, and all stacks share the main queue) can delay a
    /// merge by seconds; a wait that is met ends at once, so the deadline
    /// only costs when something is wrong, and then it says so here instead
    /// of in the checks that follow.
    @discardableResult
    func wait(until what: String, seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation,
              _ isMet: @escaping @Sendable ([Arrival]) -> Bool) async -> Bool {
        await log.wait(for: what, deadline: .seconds(seconds), sourceLocation: sourceLocation,
                       describe: { "merges: \($0.map { "\($0.merge.source)" })" }, until: isMet)
    }
}

// @unchecked Sendable: an opaque NotificationCenter token, only handed back to it.
final class ObserverBox: @unchecked Sendable {
    let observer: any NSObjectProtocol
    init(_ observer: any NSObjectProtocol) { self.observer = observer }
}

/// A stack set up on a fresh file.
///
/// The folder stays until the process exits even when the caller drops it
/// (`let (stack, _) = …`): deleting a store file from under its stack makes
/// the next save throw, as it must.
func makeStack(seed: URL? = nil, directory: StackDirectory = StackDirectory()) async throws -> (StackManager, StackDirectory) {
    StackDirectory.keepUntilExit(directory)
    let stack = StackManager()
    try await stack.setup(model: StackTestModel.make(), storeURL: directory.storeURL, seedDatabaseURL: seed)
    return (stack, directory)
}

extension StackDirectory {
    private static let kept = Locked<[StackDirectory]>([])

    /// Keeps `directory` until the process exits, then removes it.
    static func keepUntilExit(_ directory: StackDirectory) {
        let first = kept.withLock { kept in
            kept.append(directory)
            return kept.count == 1
        }
        if first { atexit { StackDirectory.kept.withLock { $0.removeAll() } } }
    }
}

/// Keeps objects alive (and so registered) in a context, as a view on screen would.
// @unchecked Sendable: touched only on the owning context's queue, inside perform blocks.
final class ObjectHolder: @unchecked Sendable {
    var objects: [ManagedObject] = []
}

/// Carries a fetched results controller into its context's `perform` blocks, as a screen holds its list.
// @unchecked Sendable: the controller is only used on its context's queue.
/// A fetched results controller on the main context, as a list on screen
/// holds one, with a log of the changes it reports.
// @unchecked Sendable: touched only on the main context's queue, inside perform blocks.
final class ListPanel: @unchecked Sendable {
    let controller: FetchedResultsController<Ticker>
    let log = ListChangeLog()

    init(_ controller: FetchedResultsController<Ticker>) {
        self.controller = controller
        controller.delegate = log
    }

    /// A panel on `stack`'s main context showing `request`, fetched once.
    static func make(_ stack: StackManager, _ request: FetchRequest<Ticker>, sectionNameKeyPath: String? = nil) async throws -> ListPanel {
        let main = stack.mainContext
        return try await main.perform {
            let panel = ListPanel(FetchedResultsController(fetchRequest: request, managedObjectContext: main, sectionNameKeyPath: sectionNameKeyPath))
            try panel.controller.performFetch()
            panel.log.previous = panel.controller.snapshot ?? FetchedResultsSnapshot()
            return panel
        }
    }
}

final class ControllerBox<Object: ManagedObject>: @unchecked Sendable {
    let controller: FetchedResultsController<Object>
    init(_ controller: FetchedResultsController<Object>) { self.controller = controller }
}

/// Saves a marker ticker through a second stack on `directory`'s store, as
/// another process would, and waits until `recorder` saw it merged from the
/// store's history. The history is read in order, so every transaction saved
/// before the marker was merged or skipped by then: a check that something
/// was not merged waits for this instead of a fixed time.
func mergeMarkerFromAnotherStack(_ recorder: MergeRecorder, directory: StackDirectory,
                                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let other = StackManager()
    try await other.setup(model: StackTestModel.make(), storeURL: directory.storeURL)
    _ = try await importTickers(other, count: 1, prefix: "MARKER")
    await recorder.wait(until: "the marker saved by another stack", sourceLocation: sourceLocation) { arrivals in
        arrivals.contains { if case .otherProcess = $0.merge.source { true } else { false } }
    }
}

/// Inserts `count` tickers (`<prefix>0`, `<prefix>1`, …, priced by their
/// number) through an importer of `stack`, and returns their IDs.
func importTickers(_ stack: StackManager, count: Int, prefix: String = "T") async throws -> [ObjectID] {
    let importer = stack.importerContext()
    return try await importer.perform {
        let tickers = (0..<count).map { index in
            let ticker = Ticker(context: importer)
            ticker.symbol = "\(prefix)\(index)"
            ticker.price = Double(index)
            return ticker
        }
        try importer.save()
        return tickers.map(\.objectID)
    }
}
