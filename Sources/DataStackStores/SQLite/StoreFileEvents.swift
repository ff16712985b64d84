import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage
#endif

/// Calls a handler when a store's files — the database, its `-wal` or its
/// `-journal` — are written, created or renamed into place, by any process.
///
/// On Linux it is an inotify watch on the store's folder, filtered by file
/// name: a folder watch survives SQLite deleting and recreating the `-wal`,
/// which a watch on the file itself would not. Every store of the process
/// shares one inotify instance (``InotifyWatches``). Elsewhere, or when
/// inotify is out of instances or watches, ``init(storeURL:queue:onEvent:)``
/// returns nil and the caller polls instead.
///
/// An event says only that bytes moved. In WAL mode the writer appends the
/// commit frame and then updates the WAL index in `-shm` through shared
/// memory, which raises no event, so an event may arrive a moment before the
/// commit is visible: ``SQLiteChangeWatcher`` keeps checking for a short
/// while after each event rather than trusting the event itself.
final class StoreFileEvents: Sendable {
    #if canImport(Glibc)
    private let subscription: InotifyWatches.Subscription
    private let watches: InotifyWatches
    #endif

    /// Starts watching; nil when the platform or the kernel offers no watch.
    init?(storeURL: URL, queue: DispatchQueue, onEvent: @escaping @Sendable () -> Void) {
        #if canImport(Glibc)
        let name = storeURL.lastPathComponent
        guard let watches = InotifyWatches.shared,
              let subscription = watches.subscribe(folder: storeURL.deletingLastPathComponent().path,
                                                   names: [name, name + "-wal", name + "-journal"],
                                                   queue: queue, onEvent: onEvent) else { return nil }
        self.watches = watches
        self.subscription = subscription
        #else
        return nil
        #endif
    }

    /// Stops watching; no handler runs after the event being handled now, if any.
    func cancel() {
        #if canImport(Glibc)
        watches.unsubscribe(subscription)
        #endif
    }

    deinit {
        cancel()
    }
}
