import Foundation

/// `--rate N`: holds the feed to at most N quotes a second, so that a run
/// shows a market that moves at a readable pace — and, with `--sync`, one
/// whose changes a hub and the other replicas keep up with.
///
/// The schedule is kept from the first quote on, not from the last: a save
/// that took long is caught up on, and the rate over the run is N.
///
/// Used by the import loop only, on the thread that iterates the feed.
final class QuotePace {
    private let interval: Double
    private var start: ContinuousClock.Instant?
    private var count = 0

    init(perSecond rate: Int) {
        interval = 1 / Double(rate)
    }

    /// Returns when the next quote is due: at once when the feed is behind schedule.
    func wait() {
        let now = ContinuousClock.now
        let start = self.start ?? now
        self.start = start
        let due = start + .milliseconds(Int(Double(count) * interval * 1000))
        count += 1
        if due > now {
            let ahead = now.duration(to: due).components
            // The import loop's own thread, not the main queue: sleeping here paces only the feed.
            Thread.sleep(forTimeInterval: Double(ahead.seconds) + Double(ahead.attoseconds) / 1e18)
        }
    }
}
