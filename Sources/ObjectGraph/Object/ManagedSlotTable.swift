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
        /// The same entries in a flat array: for the few properties of a typical
        /// entity a linear scan of identities beats hashing.
        let entries: ContiguousArray<(key: ObjectIdentifier, index: Int)>
        /// The key paths, kept alive so their identities cannot be reused.
        let keyPaths: [AnyKeyPathBox]
        init(indexes: [ObjectIdentifier: Int], keyPaths: [AnyKeyPathBox]) {
            self.indexes = indexes
            self.entries = ContiguousArray(indexes.map { (key: $0.key, index: $0.value) })
            self.keyPaths = keyPaths
        }

        @inline(__always)
        func index(for key: ObjectIdentifier) -> Int? {
            if entries.count <= 16 {
                for entry in entries where entry.key == key { return entry.index }
                return nil
            }
            return indexes[key]
        }
    }

    // @unchecked Sendable: key paths are immutable.
    private struct AnyKeyPathBox: @unchecked Sendable { let keyPath: AnyKeyPath }

    /// The newest snapshot's address (0: none yet).
    private let current = Atomic<UInt>(0)
    private let snapshots = Mutex<[Snapshot]>([])
    /// Which slot a key path reads, for `#Predicate` translation.
    let probe = ManagedKeyPathProbe()

    /// The slot of a key path, if it was resolved before.
    @inline(__always)
    func index(for keyPath: AnyKeyPath) -> Int? {
        guard let raw = UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring)) else { return nil }
        return Unmanaged<Snapshot>.fromOpaque(raw).takeUnretainedValue().index(for: ObjectIdentifier(keyPath))
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

// MARK: - Key Path Probing

/// Finds which slot a `@Managed` key path reads, for predicates written with
/// Foundation's `#Predicate`: read the key path once on a throwaway object
/// while its getter reports the slot. Results are cached per key path.
///
/// The getter's cost when nobody probes is one relaxed atomic load.
final class ManagedKeyPathProbe: Sendable {
    /// The address of the object being probed (0: none).
    private let target = Atomic<UInt>(0)
    /// The first slot read on the target (-1: none yet).
    private let firstSlot = Atomic<Int>(-1)
    /// Serializes probes of one entity.
    private let probing = Mutex<Void>(())
    // @unchecked Sendable: key paths are immutable.
    private struct Key: Hashable, @unchecked Sendable { let keyPath: AnyKeyPath }
    private let cache = Mutex<[Key: Int]>([:])

    /// Called by the `@Managed` getter with every slot it reads.
    @inline(__always)
    func noteRead(of object: AnyObject, at index: Int) {
        let current = target.load(ordering: .relaxed)
        if current != 0, current == UInt(bitPattern: Unmanaged.passUnretained(object).toOpaque()) {
            _ = firstSlot.compareExchange(expected: -1, desired: index, ordering: .relaxed)
        }
    }

    /// The slot `keyPath` reads, probing it with `read` (which reads the key path on `object`) the first time.
    func slot(for keyPath: AnyKeyPath, on object: @autoclosure () -> ManagedObject, read: (ManagedObject) -> Void) -> Int? {
        if let known = cache.withLock({ $0[Key(keyPath: keyPath)] }) { return known }
        let found: Int? = probing.withLock { _ in
            let instance = object()
            firstSlot.store(-1, ordering: .relaxed)
            target.store(UInt(bitPattern: Unmanaged.passUnretained(instance).toOpaque()), ordering: .relaxed)
            read(instance)
            target.store(0, ordering: .relaxed)
            let slot = firstSlot.load(ordering: .relaxed)
            return withExtendedLifetime(instance) { slot >= 0 ? slot : nil }
        }
        if let found { cache.withLock { $0[Key(keyPath: keyPath)] = found } }
        return found
    }
}

extension ManagedSlotTable {
    @inline(__always)
    func noteRead(of object: AnyObject, at index: Int) {
        probe.noteRead(of: object, at: index)
    }
}
