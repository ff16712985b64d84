import Synchronization

/// An entity's map from `@Managed` storage key paths to slot indexes, read
/// without a lock on every typed property access.
///
/// Key path objects are unique per class and property, so their identity is the
/// key. The map only grows: readers load the current snapshot atomically, and a
/// miss (once per class and property) builds a new snapshot under a lock.
/// Snapshots are kept until the table goes away, so a reader never sees one freed.
final class ManagedSlotTable: Sendable {
    private final class Snapshot: Sendable {
        let indexes: [ObjectIdentifier: Int]
        /// The key paths, kept alive so their identities cannot be reused.
        let keyPaths: [AnyKeyPathBox]
        init(indexes: [ObjectIdentifier: Int], keyPaths: [AnyKeyPathBox]) {
            self.indexes = indexes
            self.keyPaths = keyPaths
        }
    }

    // @unchecked Sendable: key paths are immutable.
    private struct AnyKeyPathBox: @unchecked Sendable { let keyPath: AnyKeyPath }

    /// The newest snapshot's address (0: none yet).
    private let current = Atomic<UInt>(0)
    private let snapshots = Mutex<[Snapshot]>([])

    /// The slot of a key path, if it was resolved before.
    @inline(__always)
    func index(for keyPath: AnyKeyPath) -> Int? {
        guard let raw = UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring)) else { return nil }
        return Unmanaged<Snapshot>.fromOpaque(raw).takeUnretainedValue().indexes[ObjectIdentifier(keyPath)]
    }

    /// Records a resolved slot.
    func insert(_ index: Int, for keyPath: AnyKeyPath) {
        snapshots.withLock { snapshots in
            let previous = snapshots.last
            var indexes = previous?.indexes ?? [:]
            if indexes[ObjectIdentifier(keyPath)] != nil { return }
            indexes[ObjectIdentifier(keyPath)] = index
            let snapshot = Snapshot(indexes: indexes, keyPaths: (previous?.keyPaths ?? []) + [AnyKeyPathBox(keyPath: keyPath)])
            snapshots.append(snapshot)
            current.store(UInt(bitPattern: Unmanaged.passUnretained(snapshot).toOpaque()), ordering: .releasing)
        }
    }
}
