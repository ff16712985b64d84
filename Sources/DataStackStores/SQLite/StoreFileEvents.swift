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
/// which a watch on the file itself would not. Elsewhere, or when inotify is
/// out of watches, ``init(storeURL:queue:onEvent:)`` returns nil and the
/// caller polls instead.
///
/// An event says only that bytes moved. In WAL mode the writer appends the
/// commit frame and then updates the WAL index in `-shm` through shared
/// memory, which raises no event, so an event may arrive a moment before the
/// commit is visible: ``SQLiteChangeWatcher`` keeps checking for a short
/// while after each event rather than trusting the event itself.
final class StoreFileEvents: @unchecked Sendable {
    // @unchecked Sendable: `source` is set once in init; DispatchSource is thread-safe,
    // and the descriptor is only read on `source`'s queue and closed by its cancel handler.
    private let source: any DispatchSourceRead

    /// Starts watching; nil when the platform or the kernel offers no watch.
    init?(storeURL: URL, queue: DispatchQueue, onEvent: @escaping @Sendable () -> Void) {
        #if canImport(Glibc)
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let folder = storeURL.deletingLastPathComponent().path
        let mask = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO)
        guard inotify_add_watch(descriptor, folder, mask) >= 0 else {
            close(descriptor)
            return nil
        }
        let name = storeURL.lastPathComponent
        let names: Set<String> = [name, name + "-wal", name + "-journal"]
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler {
            if Self.drain(descriptor, touches: names) { onEvent() }
        }
        source.setCancelHandler { close(descriptor) }
        source.activate()
        #else
        return nil
        #endif
    }

    /// Stops watching and closes the descriptor; no handler runs after the
    /// event being handled now, if any.
    func cancel() {
        source.cancel()
    }

    deinit {
        source.cancel()
    }

    #if canImport(Glibc)
    /// Reads every pending event; whether one of them names one of `names`
    /// (or the kernel dropped events, which may have).
    private static func drain(_ descriptor: Int32, touches names: Set<String>) -> Bool {
        var touched = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return touched }   // EAGAIN: nothing more for now
            buffer.withUnsafeBytes { bytes in
                // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
                let header = MemoryLayout<inotify_event>.size
                var offset = 0
                while offset + header <= count {
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let start = offset + header
                    let name = bytes[start..<min(start + length, count)].prefix { $0 != 0 }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 || names.contains(String(decoding: name, as: UTF8.self)) {
                        touched = true
                    }
                    offset = start + length
                }
            }
        }
    }
    #endif
}
