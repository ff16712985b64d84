import DataStack
import Foundation
import Synchronization

/// `importer --name A --count N`: N saves through one importer context of the
/// stack, each inserting the entry `A-<n>` and incrementing the shared counter.
///
/// The context's merge policy is `.error`, so that a save that finds the
/// counter moved by another writer (its `Z_OPT` changed) throws instead of
/// writing a stale value; the save is then retried with the counter read
/// again from the store and incremented once more. No increment is lost.
struct PeerImporter {
    let stack: StackManager
    let name: String
    let count: Int
    /// A pause between saves, so that the run lasts long enough to be watched.
    let interval: Duration
    /// Whether a save the store refuses (`PersistentStoreError`: the server
    /// unreachable, the connection lost) is reported as a `failed` line, its
    /// changes discarded, and the run goes on with the next entry; otherwise
    /// the importer stops with the error.
    var keepsGoing = false

    func run() async throws {
        let context = stack.importerContext()
        context.mergePolicy = .error
        // A faulted counter is read from the store, never from the coordinator's row cache.
        context.stalenessInterval = 0
        let tokens = SavedTokens(observing: context)
        try await context.perform { try Self.createCounterIfNeeded(in: context) }
        for number in 1...max(1, count) {
            let entryName = "\(name)-\(number)"
            let value: Int64, attempts: Int, started: Date
            do {
                (value, attempts, started) = try await context.perform { try Self.save(entryNamed: entryName, in: context) }
            } catch let error as PersistentStoreError where keepsGoing {
                // Not saved: nothing of it may stay pending for the next save.
                await context.perform { context.rollback() }
                PeerOutput.write(PeerOutput.Failed(failed: entryName, code: "\(error.code)", error: "\(error)"))
                try await Task.sleep(for: interval)
                continue
            }
            guard let token = tokens.last else { throw PeerError("the save of \(entryName) reported no history token") }
            PeerOutput.write(PeerOutput.Saved(saved: entryName, token: token.transactionNumber, counter: value, attempts: attempts,
                                              at: started.timeIntervalSince1970))
            try await Task.sleep(for: interval)
        }
    }

    /// Inserts the entry, increments the counter and saves; on a merge
    /// conflict, reads the counter again and retries. Returns the counter's
    /// saved value, the number of tries, and when the last try called `save()`.
    private static func save(entryNamed entryName: String, in context: ManagedObjectContext) throws -> (Int64, Int, Date) {
        let entry = ManagedObject(entity: try entity("Entry", in: context), insertInto: context)
        try entry.setValue(entryName, forKey: "name")
        guard let counter = try context.fetch(PeerModel.counterRequest).first else {
            throw PeerError("the shared counter is gone")
        }
        for attempt in 1... {
            let value = try PeerModel.value(of: counter) + 1
            try counter.setValue(Int(value), forKey: "value")
            do {
                let called = Date()
                try context.save()
                return (value, attempt, called)
            } catch ObjectGraphError.Code.mergeConflict where attempt < 1_000 {
                // Discard the stale increment; the next read fires the fault from the store.
                context.refresh(counter, mergeChanges: false)
            }
        }
        preconditionFailure("unreachable: the loop returns or throws")
    }

    /// Inserts the shared counter unless it exists; of two importers creating
    /// it at once, the unique index lets one in and the other finds its row.
    private static func createCounterIfNeeded(in context: ManagedObjectContext) throws {
        if try !context.fetch(PeerModel.counterRequest).isEmpty { return }
        let counter = ManagedObject(entity: try entity("Counter", in: context), insertInto: context)
        try counter.setValue(PeerModel.sharedCounterName, forKey: "name")
        try counter.setValue(0, forKey: "value")
        do {
            try context.save()
        } catch ObjectGraphError.Code.uniquenessConflict {
            context.rollback()
            guard try !context.fetch(PeerModel.counterRequest).isEmpty else {
                throw PeerError("creating the shared counter met a uniqueness conflict, yet there is no counter")
            }
        }
    }

    private static func entity(_ name: String, in context: ManagedObjectContext) throws -> EntityDescription {
        guard let entity = context.persistentStoreCoordinator?.managedObjectModel.entitiesByName[name] else {
            throw PeerError("the model has no entity \(name)")
        }
        return entity
    }
}

/// The history tokens of a context's saves, from its did-save notifications
/// (posted on the context's queue, inside `save()`).
private final class SavedTokens {
    private let tokens = TokenLog()
    private let observer: any NSObjectProtocol

    init(observing context: ManagedObjectContext) {
        observer = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil
        ) { [tokens] notification in
            // A notification without a payload is not a save's; there is no token to keep.
            guard let save = try? ContextDidSave(notification) else { return }
            tokens.append(save.historyTokens)
        }
    }

    deinit {
        NotificationCenter.default.removeObserver(observer)
    }

    /// The token of the last save.
    var last: PersistentHistoryToken? { tokens.last }
}

/// Tokens appended on the context's queue and read after its `perform` returned.
private final class TokenLog: Sendable {
    private let tokens = Mutex<[PersistentHistoryToken]>([])
    func append(_ more: [PersistentHistoryToken]) { tokens.withLock { $0 += more } }
    var last: PersistentHistoryToken? { tokens.withLock { $0.last } }
}

/// Why a peer mode stopped.
struct PeerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
