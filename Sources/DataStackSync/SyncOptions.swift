import Foundation

/// How a replica syncs: with which hub, how often, in what chunks.
public struct SyncOptions: Sendable {
    /// The hub every replica of the data pushes to and pulls from.
    public var hub: any SyncHub
    /// How long the engine waits between cycles when nothing wakes it (a
    /// local save or the hub's notice wakes it sooner). The default is 1 s.
    public var pullInterval: Duration = .seconds(1)
    /// How long the engine waits, once woken by a local save or the hub, before
    /// its cycle: saves that follow within it go in the same cycle, so an
    /// import's run of saves costs a few cycles, not one each. The default is 20 ms.
    public var gatheringInterval: Duration = .milliseconds(20)
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
