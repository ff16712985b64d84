import DataStackSync
import Foundation
import Synchronization

/// A hub made on first use, and made again by the next call after making it
/// failed: a replica whose hub is unreachable when it starts goes on
/// importing, its sync line says `offline`, and it syncs once the hub answers
/// (the engine retries at every wake-up). A PostgreSQL hub connects when it is
/// made, so without this ticker-import could not start offline.
///
/// Every call waits while another makes the hub (at most the hub's connect
/// timeout), so there is one hub and one connection.
final class DeferredSyncHub: SyncHub {
    private let url: URL
    /// The hub once made; held while it is made, so there is one.
    private let made = Mutex<(any SyncHub)?>(nil)

    init(url: URL) {
        self.url = url
    }

    /// The hub, made now if it was not yet.
    ///
    /// - Throws: ``SyncError`` from ``SyncHubs/hub(for:)``: `.offline` when the hub
    ///   cannot be reached, which the engine reports and retries.
    private func hub() throws(SyncError) -> any SyncHub {
        try made.withLock { (slot: inout (any SyncHub)?) throws(SyncError) -> any SyncHub in
            if let hub = slot { return hub }
            let hub = try SyncHubs.hub(for: url)
            slot = hub
            return hub
        }
    }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration {
        try hub().register(replica: replica, modelVersion: modelVersion)
    }

    func push(_ changes: [SyncChange]) throws -> [Int64] {
        try hub().push(changes)
    }

    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try hub().pull(after: sequence, limit: limit)
    }

    func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        try hub().push(changes, encodedBy: codec)
    }

    func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        try hub().pull(after: sequence, limit: limit, decodedBy: codec)
    }

    func acknowledge(replica: UUID, through sequence: Int64) throws {
        try hub().acknowledge(replica: replica, through: sequence)
    }

    func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        try hub().putSnapshotPage(objects, through: sequence, publisher: publisher)
    }

    func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool {
        try hub().commitSnapshot(through: sequence, publisher: publisher)
    }

    func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        try hub().snapshotPage(after: objectID, limit: limit)
    }

    /// True: the engine's listener asks ``waitForChanges(after:timeout:)``,
    /// which waits as the hub does once it is made, and throws until then.
    var notifiesChanges: Bool { true }

    func waitForChanges(after sequence: Int64, timeout: Duration) throws -> Bool {
        let hub = try hub()
        if hub.notifiesChanges { return try hub.waitForChanges(after: sequence, timeout: timeout) }
        // A hub that only looks: look once the timeout passed, as the engine's interval would.
        if try hub.waitForChanges(after: sequence, timeout: timeout) { return true }
        let parts = timeout.components
        Thread.sleep(forTimeInterval: Double(parts.seconds) + Double(parts.attoseconds) / 1e18)
        return try hub.waitForChanges(after: sequence, timeout: timeout)
    }
}
