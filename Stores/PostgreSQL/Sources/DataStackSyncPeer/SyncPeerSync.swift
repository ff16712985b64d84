import DataStackSync
import Foundation

/// The peer's syncs: one cycle between edits (offline is fine: the edits wait
/// in the outbox), or cycles until the replica is quiet.
enum SyncPeerSync {
    /// One cycle; writes how it went.
    static func once(_ engine: SyncEngine, storeURL: URL?) {
        do {
            try engine.syncNow()
            SyncPeerOutput.write(SyncPeerOutput.Synced(sync: "ok"))
        } catch {
            SyncPeerOutput.write(SyncPeerOutput.Synced(sync: error.isTransient ? "offline" : "error", error: "\(error)"))
        }
    }

    /// Cycles until one pushed nothing and pulled nothing, and the outbox is
    /// empty; an offline hub is tried again until `deadline`. Writes the last
    /// state; throws the last error when the deadline passed.
    static func untilQuiet(_ engine: SyncEngine, storeURL: URL, deadline: ContinuousClock.Instant) throws {
        var previous: SyncReplicaSummary?
        while true {
            do {
                try engine.syncNow()
                let summary = try SyncReplicaSummary.read(storeAt: storeURL)
                if let summary, let previous, summary.pendingChanges == 0,
                   summary.pulledSequence == previous.pulledSequence, summary.recordedChanges == previous.recordedChanges {
                    SyncPeerOutput.write(SyncPeerOutput.Synced(sync: "quiet", pulledSequence: summary.pulledSequence, pending: 0))
                    return
                }
                previous = summary
            } catch {
                guard error.isTransient, ContinuousClock.now < deadline else { throw error }
                previous = nil
                Thread.sleep(forTimeInterval: 0.05)   // offline: the link may be back in a moment
            }
        }
    }
}
