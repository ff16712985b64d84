#if canImport(Glibc)
@_spi(DataStackInternal) import DataStackSupport
import Dispatch
import Foundation
import Glibc
import Synchronization

/// The process's one inotify instance, shared by every ``StoreFileEvents``:
/// a watch per folder, and the events read once and handed to the
/// subscribers whose file names they carry.
///
/// Instances are the scarce resource — 128 per user by default
/// (`fs.inotify.max_user_instances`), against thousands of watches — and an
/// instance per store ran out in a process with many stores open (the test
/// suite held 126 at its peak), which left the later stores polling.
final class InotifyWatches: @unchecked Sendable {
    // @unchecked Sendable: `source` is set once in init and only kept (DispatchSource is
    // thread-safe); the rest is constant or behind `state`'s lock.
    /// One store's interest: its folder's watch and its file names.
    final class Subscription: Sendable {
        fileprivate let watch: Int32
        fileprivate let names: Set<String>
        fileprivate let queue: DispatchQueue
        fileprivate let onEvent: @Sendable () -> Void
        /// Cleared by ``InotifyWatches/unsubscribe(_:)``: a call already queued then does nothing.
        fileprivate let isActive = Atomic(true)

        fileprivate init(watch: Int32, names: Set<String>, queue: DispatchQueue, onEvent: @escaping @Sendable () -> Void) {
            self.watch = watch
            self.names = names
            self.queue = queue
            self.onEvent = onEvent
        }
    }

    private struct State {
        var subscriptions: [ObjectIdentifier: Subscription] = [:]
        /// Subscriptions per watch: a watch is removed with its last one.
        var users: [Int32: Int] = [:]
    }

    private static let instance = Locked<InotifyWatches?>(nil)

    /// The shared instance, made on first use; nil while the kernel gives
    /// none (a later call tries again).
    static var shared: InotifyWatches? {
        instance.withLock { current in
            if current == nil { current = InotifyWatches() }
            return current
        }
    }

    private let descriptor: Int32
    private let source: any DispatchSourceRead
    /// `Locked`, not `Mutex`: ThreadSanitizer sees its order (DataStackSupport's Locked.swift).
    private let state = Locked(State())

    private init?() {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        // Never cancelled: the instance lives as long as the process.
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: DispatchQueue(label: "DataStack inotify"))
        source.setEventHandler { [unowned self] in deliver(Self.drain(descriptor)) }
        source.activate()
    }

    /// Calls `onEvent` on `queue` when a file of `folder` named one of
    /// `names` is written, created or moved into place (or when the kernel
    /// dropped events, which may have named one); nil when the kernel adds
    /// no watch (out of watches, or no such folder).
    func subscribe(folder: String, names: Set<String>, queue: DispatchQueue,
                   onEvent: @escaping @Sendable () -> Void) -> Subscription? {
        state.withLock { state in
            // Under the lock: a watch the kernel returns again for the same folder is counted before another removes it.
            let watch = inotify_add_watch(descriptor, folder, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO))
            guard watch >= 0 else { return nil }
            let subscription = Subscription(watch: watch, names: names, queue: queue, onEvent: onEvent)
            state.subscriptions[ObjectIdentifier(subscription)] = subscription
            state.users[watch, default: 0] += 1
            return subscription
        }
    }

    /// Ends a subscription: no call of it starts after this returns.
    func unsubscribe(_ subscription: Subscription) {
        subscription.isActive.store(false, ordering: .sequentiallyConsistent)
        state.withLock { state in
            guard state.subscriptions.removeValue(forKey: ObjectIdentifier(subscription)) != nil else { return }
            // A watch the kernel removed (its folder deleted) is no longer counted.
            guard let users = state.users[subscription.watch] else { return }
            if users > 1 {
                state.users[subscription.watch] = users - 1
            } else {
                state.users[subscription.watch] = nil
                inotify_rm_watch(descriptor, subscription.watch)
            }
        }
    }

    /// What one read of the queue carried.
    private struct Events {
        var names: [Int32: Set<String>] = [:]
        var removedWatches: [Int32] = []
        var overflowed = false
    }

    private func deliver(_ events: Events) {
        let due: [Subscription] = state.withLock { state in
            for watch in events.removedWatches { state.users[watch] = nil }
            return state.subscriptions.values.filter { subscription in
                events.overflowed || !(events.names[subscription.watch]?.isDisjoint(with: subscription.names) ?? true)
            }
        }
        for subscription in due {
            subscription.queue.async {
                if subscription.isActive.load(ordering: .sequentiallyConsistent) { subscription.onEvent() }
            }
        }
    }

    /// Reads every pending event.
    private static func drain(_ descriptor: Int32) -> Events {
        var events = Events()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return events }   // EAGAIN: nothing more for now
            buffer.withUnsafeBytes { bytes in
                // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
                let header = MemoryLayout<inotify_event>.size
                var offset = 0
                while offset + header <= count {
                    let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let start = offset + header
                    let name = bytes[start..<min(start + length, count)].prefix { $0 != 0 }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { events.overflowed = true }
                    if mask & UInt32(IN_IGNORED) != 0 { events.removedWatches.append(watch) }
                    if !name.isEmpty { events.names[watch, default: []].insert(String(decoding: name, as: UTF8.self)) }
                    offset = start + length
                }
            }
        }
    }
}
#endif
