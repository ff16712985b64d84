import Foundation

/// How a replica syncs: with which hub, how often, in what chunks.
public struct SyncOptions: Sendable {
    /// The hub every replica of the data pushes to and pulls from.
    public var hub: any SyncHub
    /// How long the engine waits between cycles when nothing wakes it (a
    /// local save or the hub's notice wakes it sooner). The default is 1 s.
    public var pullInterval: Duration = .seconds(1)
    /// How long local saves must pause before the engine, once woken, runs
    /// its cycle — at most ten times this after the first: an import's run of
    /// saves goes in one cycle after it, not in cycles competing with it for
    /// the processor. It adds to the latency from a save to the other
    /// replicas. The default is 50 ms: shorter than the pause between the
    /// saves of a steady feed that saves a few times a second (100 ms apart,
    /// ticker-import's `--rate 100 --batch 10`), which a longer interval held
    /// back until its cap, and longer than the gap between an import's chunks.
    public var gatheringInterval: Duration = .milliseconds(50)
    /// The most changes one push or one pull moves; each chunk is applied and
    /// recorded before the next. The default is 500.
    public var chunkSize: Int = 500
    /// Resolvers for properties whose policy is ``SyncMergePolicy/resolver(_:)``, by name.
    public var resolvers: [String: SyncResolver] = [:]
    /// The transaction author of the engine's own saves, which it never pushes back.
    public var transactionAuthor = "datastack.sync"

    public init(hub: any SyncHub) {
        self.hub = hub
    }
}
