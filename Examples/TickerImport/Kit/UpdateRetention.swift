import DataStack
import Foundation
import Synchronization

/// `--keep-updates N`: after each importer save, the oldest price updates
/// beyond the newest N are deleted with one ``BatchDeleteRequest``, so a long
/// run's store stays bounded.
///
/// ```swift
/// let retention = UpdateRetention(stack: stack, limit: 10_000)
/// let deleted = try retention.trim()   // after a save, off the main queue
/// ```
///
/// What it guarantees, with one importer on the store: once a save's trim
/// has run, the store holds `min(N, updates imported)` updates, the newest by
/// `time`; in between — a save and its trim are two transactions — at most
/// N + `--batch` (a process killed there leaves that much, and its next run's
/// first save trims it). The trim runs after every save rather than every K
/// saves because that is the smallest bound for the same work: each trim
/// deletes about one save's worth of rows.
///
/// The newest N are exact because ``UpdateClock`` makes the times of one
/// process strictly increase: the trim deletes `time < cutoff`, where
/// `cutoff` is the time of the oldest update kept, and no other update has
/// that time. Several importers on one store each trim the updates that
/// were committed when they counted, so the store can then briefly hold
/// more (never fewer than the newest N).
///
/// The deletes reach the screen like a save: the importer context posts its
/// did-save notification, the stack merges it into the main context (removing
/// the deleted updates, refreshing the companies that lost some), and another
/// process's viewer merges it from the store's history. `Company.updateCount`
/// keeps counting every update the company ever had; it is not trimmed.
///
/// - Complexity: O(*s*) per trim for *s* stored updates (at most N + `--batch`
///   once trimming started): a count, and a scan for the cutoff that keeps
///   only the excess in SQLite's sorter, then a delete of the excess. The
///   first trim of a store grown without `--keep-updates` deletes everything
///   beyond N in one transaction.
struct UpdateRetention: Sendable {
    let stack: StackManager
    /// How many updates to keep (`--keep-updates`), at least 1.
    let limit: Int

    /// Deletes the oldest updates beyond the newest ``limit``; returns how
    /// many were deleted. Blocks until the delete is on disk: call it off the
    /// main queue.
    ///
    /// - Throws: the store's error; nothing is deleted then.
    func trim() throws -> Int {
        dispatchPrecondition(condition: .notOnQueue(.main))
        let context = stack.importerContext()
        return try context.performAndWait {
            let stored = try context.count(for: FetchRequest<StockUpdate>())
            let excess = stored - limit
            guard excess > 0 else { return 0 }
            // The oldest update to keep: skip the `excess` oldest. Times are
            // strictly increasing, so exactly those are older than it.
            var oldestKept = FetchRequest<[String: Any]>(entityName: "StockUpdate")
            oldestKept.resultType = .dictionary
            oldestKept.propertiesToFetch = ["time"]
            oldestKept.sortDescriptors = [FetchSort(key: "time")]
            oldestKept.fetchOffset = excess
            oldestKept.fetchLimit = 1
            // None: another process trimmed since the count, and nothing is left to do.
            guard let cutoff = try context.fetch(oldestKept).first?["time"] as? Date else { return 0 }
            var delete = BatchDeleteRequest(fetchRequest: FetchRequest<StockUpdate>(
                entityName: "StockUpdate", predicate: try FetchPredicate(format: "time < %@", cutoff)))
            delete.resultType = .count
            guard case .count(let deleted) = try context.execute(delete) else { return 0 }
            return deleted
        }
    }
}

/// The `time` of each new price update: the wall clock, but strictly
/// increasing within the process, even when the clock stands still between
/// two updates or is set back — so the updates are ordered by it, and
/// ``UpdateRetention`` deletes exactly the ones older than those it keeps.
final class UpdateClock: Sendable {
    /// The last time handed out, in seconds since 2001 (how the store keeps dates).
    private let last = Mutex(-Double.infinity)

    /// A time later than every earlier one of this clock.
    func next() -> Date {
        let now = Date().timeIntervalSinceReferenceDate
        return Date(timeIntervalSinceReferenceDate: last.withLock { last in
            last = Swift.max(now, last.nextUp)
            return last
        })
    }
}
