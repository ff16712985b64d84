import DataStack
import DataStackSync
import Foundation
import Synchronization

/// `--sync URL`: the stack's local store kept in step with other replicas
/// through the hub at URL (a ``SyncEngine`` on the stack), and what the
/// screen's sync line and the `sync` object of each `--json` line say about it.
///
/// The hub is made from the URL by whatever registered its scheme
/// (``SyncHubs``): `ticker-import-postgresql` registers PostgreSQL's. Saves
/// never wait for the hub: the engine pushes them from the store's history
/// afterwards, and applies other replicas' changes through an importer
/// context, whose merge redraws the screen like any import's.
final class TickerSync: Sendable {
    /// The sync line's values, as of the engine's last event.
    struct Snapshot: Encodable, Sendable, Equatable {
        /// `stopped`, `idle`, `pushing`, `pulling`, `offline` or `error`.
        var status = "stopped"
        /// Local changes this run pushed to the hub.
        var pushed = 0
        /// Changes this run pulled from the hub and folded in: every replica's,
        /// this one's own included (the hub's log is one order for all; a
        /// replica's own changes change nothing when they come back).
        var pulled = 0
        /// The last hub sequence applied here (across runs: the store keeps it).
        var pulledThrough: Int64 = 0
        /// The hub, without its password.
        var hub: String
        /// Why the engine is offline or stopped with an error; nil otherwise.
        var error: String?
    }

    let hubURL: URL
    private let state: Mutex<Snapshot>
    /// Set by ``start(stack:)``.
    private let engine = Mutex<SyncEngine?>(nil)
    /// Reads the engine's events into the snapshot.
    private let listener = Mutex<Task<Void, Never>?>(nil)

    init(hubURL: URL) {
        self.hubURL = hubURL
        state = Mutex(Snapshot(hub: SyncHubs.displayString(hubURL)))
    }

    /// What the sync line shows now.
    var snapshot: Snapshot { state.withLock { $0 } }

    /// Whether the engine was started and not stopped yet.
    var isRunning: Bool { engine.withLock { $0 != nil } }

    /// Starts the engine on the stack's store; returns once it runs. The hub is
    /// made by the engine's first call (``DeferredSyncHub``): one that cannot be
    /// reached now leaves the replica offline, importing, until it can.
    ///
    /// - Throws: ``SyncError`` when the store's sync tables cannot be made or read.
    func start(stack: StackManager) throws(SyncError) {
        let engine = try SyncEngine(stack: stack, options: SyncOptions(hub: DeferredSyncHub(url: hubURL)))
        if let storeURL = stack.storeURL, let summary = try SyncReplicaSummary.read(storeAt: storeURL) {
            state.withLock { $0.pulledThrough = summary.pulledSequence }
        }
        // Subscribed before the engine starts: its first cycle's events are not missed.
        let events = engine.events
        let task = Task.detached { [self] in
            for await event in events {
                state.withLock { Self.apply(event, to: &$0) }
                // The engine's last event: stop() waits for it to be folded in.
                if case .statusChanged(.stopped) = event { break }
            }
        }
        listener.withLock { $0 = task }
        self.engine.withLock { $0 = engine }
        engine.start()
    }

    /// Stops the engine after the cycle in progress; returns once it has stopped.
    /// Changes saved since its last push stay in the store and are pushed by the next run.
    func stop() async {
        guard let engine = engine.withLock({ $0.take() }) else { return }
        // SyncEngine.stop() blocks until its cycle ends: on a thread of its own, not a cooperative one.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                engine.stop()
                done.resume()
            }.start()
        }
        // Every event the engine sent before it stopped is in the line. An engine stopped
        // before its first cycle sends no "stopped" (its status never changed): the
        // listener is then cancelled after a second.
        let task = listener.withLock { $0 }
        let timeout = Task.detached {
            try? await Task.sleep(for: .seconds(1))
            task?.cancel()
        }
        await task?.value
        timeout.cancel()
        state.withLock { $0.status = "stopped" }
    }

    private static func apply(_ event: SyncEvent, to snapshot: inout Snapshot) {
        switch event {
        case .statusChanged(let status):
            switch status {
            case .stopped: snapshot.status = "stopped"
            case .idle: snapshot.status = "idle"
            case .pushing: snapshot.status = "pushing"
            case .pulling: snapshot.status = "pulling"
            case .reseeding: snapshot.status = "reseeding"
            case .offline(let error): snapshot.status = "offline"; snapshot.error = error.message
            case .error(let error): snapshot.status = "error"; snapshot.error = error.message
            }
            if case .idle = status { snapshot.error = nil }
        case .pushed(let count, _):
            snapshot.pushed += count
        case .pulled(let count, _, let through):
            snapshot.pulled += count
            snapshot.pulledThrough = max(snapshot.pulledThrough, through)
        case .clockSkew, .uniqueKeyConflict, .reseeded:
            break
        }
    }
}

extension TickerSync.Snapshot {
    /// The screen's sync line.
    var line: String {
        "SYNC \(status) · pushed \(pushed) · pulled \(pulled) · through #\(pulledThrough) · \(hub)"
            + (error.map { " · \($0)" } ?? "")
    }
}
