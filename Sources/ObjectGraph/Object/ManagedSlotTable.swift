import Synchronization

/// An entity's map from `@Managed` storage key paths to slot indexes, read
/// without a lock on every typed property access.
///
/// Key path objects are unique per class and property, so their identity is the
/// key. Entries live in a fixed buffer of atomic words that is written once per
/// class and property (under a lock) and scanned by readers without one: an
/// entry's index is stored before its key, and the key with release ordering.
///
/// The buffer is reached through a `let` pointer rather than stored `Atomic`
/// properties: reading an atomic stored in a class makes the compiler retain
/// and release the class around the access, and this runs on every typed
/// property access.
final class ManagedSlotTable: Sendable {
    /// Entries the buffer holds; an entity with more `@Managed` storages
    /// (over all classes bound to it) overflows into `overflow`.
    private static let capacity = 64
    /// Word 0: the probe's target object; word 1: the first slot read on it;
    /// then `capacity` pairs of (key identity, slot index), filled in order.
    // @unchecked Sendable: atomics only.
    /// The lock-free part: a trivial value, so the `@Managed` accessors read it
    /// from the entity without retaining anything (see ``EntityDescription/managedSlotEntries``).
    let entries: ManagedSlotEntries
    private var words: UnsafeMutablePointer<Atomic<UInt>> { entries.words }
    private let overflow = Mutex<[ObjectIdentifier: Int]>([:])
    /// The key paths, kept alive so their identities cannot be reused; their count is the entries used.
    private let keyPaths = Mutex<[AnyKeyPathBox]>([])

    // @unchecked Sendable: key paths are immutable.
    private struct AnyKeyPathBox: @unchecked Sendable { let keyPath: AnyKeyPath }

    /// Which slot a key path reads, for `#Predicate` translation.
    let probe: ManagedKeyPathProbe

    init() {
        let count = 2 + 2 * Self.capacity
        let pointer = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: count)
        for index in 0..<count { (pointer + index).initialize(to: Atomic(0)) }
        entries = ManagedSlotEntries(words: pointer, capacity: Self.capacity)
        probe = ManagedKeyPathProbe(target: pointer, firstSlot: pointer + 1)
    }

    deinit {
        words.deinitialize(count: 2 + 2 * Self.capacity)
        words.deallocate()
    }

    /// The slot of a key path, if it was resolved before.
    func index(for keyPath: AnyKeyPath) -> Int? {
        entries.index(for: keyPath) ?? overflow.withLock { $0[ObjectIdentifier(keyPath)] }
    }

    /// Records a resolved slot.
    func insert(_ slot: Int, for keyPath: AnyKeyPath) {
        keyPaths.withLock { keyPaths in
            if index(for: keyPath) != nil { return }
            let entry = keyPaths.count
            keyPaths.append(AnyKeyPathBox(keyPath: keyPath))
            guard entry < Self.capacity else {
                overflow.withLock { $0[ObjectIdentifier(keyPath)] = slot }
                return
            }
            let entries = words + 2
            entries[2 * entry + 1].store(UInt(bitPattern: slot), ordering: .relaxed)
            entries[2 * entry].store(UInt(bitPattern: ObjectIdentifier(keyPath)), ordering: .releasing)
        }
    }

}

/// The lock-free entries of a ``ManagedSlotTable``: the words it owns, read
/// by the `@Managed` accessors on every access.
@usableFromInline
struct ManagedSlotEntries: @unchecked Sendable {
    // @unchecked Sendable: atomics only; the table that owns them outlives every
    // reader, since the reader's object holds the entity that holds the table.
    @usableFromInline let words: UnsafeMutablePointer<Atomic<UInt>>
    @usableFromInline let capacity: Int

    /// The slot of a key path, if it was resolved before (and entered here, not in the overflow).
    @inlinable @inline(__always)
    func index(for keyPath: AnyKeyPath) -> Int? {
        let key = UInt(bitPattern: ObjectIdentifier(keyPath))
        let entries = words + 2
        for entry in 0..<capacity {
            let stored = entries[2 * entry].load(ordering: .acquiring)
            if stored == key { return Int(bitPattern: entries[2 * entry + 1].load(ordering: .relaxed)) }
            if stored == 0 { return nil }
        }
        return nil
    }

    /// Called by the `@Managed` getter with every slot it reads: reports it
    /// while a `#Predicate` key path is being probed on `object`.
    @inlinable @inline(__always)
    func noteRead(of object: AnyObject, at index: Int) {
        let target = words[0].load(ordering: .relaxed)
        if target != 0, target == UInt(bitPattern: Unmanaged.passUnretained(object).toOpaque()) {
            _ = words[1].compareExchange(expected: 0, desired: UInt(index + 1), ordering: .relaxed)
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
    // @unchecked Sendable: atomics only, owned by the slot table.
    private struct Word: @unchecked Sendable { let pointer: UnsafeMutablePointer<Atomic<UInt>> }
    /// The address of the object being probed (0: none).
    private let target: Word
    /// The first slot read on the target, plus one (0: none yet).
    private let firstSlot: Word
    /// Serializes probes of one entity.
    private let probing = Mutex<Void>(())
    // @unchecked Sendable: key paths are immutable.
    private struct Key: Hashable, @unchecked Sendable { let keyPath: AnyKeyPath }
    private let cache = Mutex<[Key: Int]>([:])

    /// - Parameters: two words of the slot table, which outlives the probe's use.
    fileprivate init(target: UnsafeMutablePointer<Atomic<UInt>>, firstSlot: UnsafeMutablePointer<Atomic<UInt>>) {
        self.target = Word(pointer: target)
        self.firstSlot = Word(pointer: firstSlot)
    }

    /// The slot `keyPath` reads, probing it with `read` (which reads the key path on `object`) the first time.
    func slot(for keyPath: AnyKeyPath, on object: @autoclosure () -> ManagedObject, read: (ManagedObject) -> Void) -> Int? {
        if let known = cache.withLock({ $0[Key(keyPath: keyPath)] }) { return known }
        let found: Int? = probing.withLock { _ in
            let instance = object()
            firstSlot.pointer.pointee.store(0, ordering: .relaxed)
            target.pointer.pointee.store(UInt(bitPattern: Unmanaged.passUnretained(instance).toOpaque()), ordering: .relaxed)
            read(instance)
            target.pointer.pointee.store(0, ordering: .relaxed)
            let slot = Int(firstSlot.pointer.pointee.load(ordering: .relaxed)) - 1
            return withExtendedLifetime(instance) { slot >= 0 ? slot : nil }
        }
        if let found { cache.withLock { $0[Key(keyPath: keyPath)] = found } }
        return found
    }
}
