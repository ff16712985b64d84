@_spi(DataStackInternal) import DataStackSupport
import Synchronization

/// An entity's map from `@Managed` storages to slot indexes, read without a
/// lock on every typed property access.
///
/// A storage is known by its object's class and its offset in the object: the
/// accessor finds the offset by projecting the storage key path in place,
/// which the optimizer turns into a field address, so no key path object is
/// made at run time (`swift_getKeyPath` and a retain and release per access,
/// about a third of a typed read). Entries live in a fixed buffer of atomic
/// words that is written once per class and storage (under a lock) and scanned
/// by readers without one: an entry's offset and index are stored before its
/// class, and the class with release ordering.
///
/// The buffer is reached through a `let` pointer rather than stored `Atomic`
/// properties: reading an atomic stored in a class makes the compiler retain
/// and release the class around the access, and this runs on every typed
/// property access.
final class ManagedSlotTable: Sendable {
    /// Entries the buffer holds (a power of two); an entity with more
    /// `@Managed` storages (over all classes bound to it) than fit at once
    /// overflows into `overflow`.
    private static let capacity = 64
    /// Word 0: the probe's target object; word 1: the first slot read on it;
    /// then `capacity` pairs of (class identity, offset << 32 | slot index),
    /// an open-addressed table: an entry goes in the first free pair from
    /// its offset modulo the capacity. A class's storages are a byte each at
    /// consecutive offsets, so each is found at its first probe, where a scan
    /// in order took one step per storage declared before it. Entries are
    /// never removed, so a reader may stop at the first free pair.
    /// The lock-free part: a trivial value, so the `@Managed` accessors read it
    /// from the entity without retaining anything (see ``EntityDescription/managedSlotEntries``).
    let entries: ManagedSlotEntries
    private var words: UnsafeMutablePointer<Atomic<UInt>> { entries.words }
    private let overflow = Locked<[StorageKey: Int]>([:])
    /// The entries used (under this lock, which orders writers).
    private let used = Locked(0)

    private struct StorageKey: Hashable {
        let type: ObjectIdentifier
        let offset: Int
    }

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

    /// The slot of the storage at `offset` in objects of `type`, if known.
    func index(for type: AnyObject.Type, offset: Int) -> Int? {
        entries.index(for: type, offset: offset)
            ?? overflow.withLock { $0[StorageKey(type: ObjectIdentifier(type), offset: offset)] }
    }

    /// Records the slot of the storage at `offset` in objects of `type`.
    /// Classes are kept alive by their metadata, so their identities are never reused.
    func insert(_ slot: Int, for type: AnyObject.Type, offset: Int) {
        used.withLock { used in
            if index(for: type, offset: offset) != nil { return }
            guard used < Self.capacity, let packed = ManagedSlotEntries.pack(offset: offset, slot: slot) else {
                overflow.withLock { $0[StorageKey(type: ObjectIdentifier(type), offset: offset)] = slot }
                return
            }
            let entries = words + 2
            var position = offset & (Self.capacity - 1)
            while entries[2 * position].load(ordering: .relaxed) != 0 { position = (position + 1) & (Self.capacity - 1) }
            entries[2 * position + 1].store(packed, ordering: .relaxed)
            entries[2 * position].store(UInt(bitPattern: ObjectIdentifier(type)), ordering: .releasing)
            used += 1
        }
    }
}

/// The lock-free entries of a ``ManagedSlotTable``: a trivial value that the
/// inlined `@Managed` accessors scan.
@usableFromInline
struct ManagedSlotEntries: @unchecked Sendable {
    // @unchecked Sendable: atomics only; the table that owns them outlives every
    // reader, since the reader's object holds the entity that holds the table.
    @usableFromInline let words: UnsafeMutablePointer<Atomic<UInt>>
    @usableFromInline let capacity: Int

    /// Offset and slot in one word; `nil` when either does not fit in 32 bits
    /// (such an entry goes to the table's overflow).
    static func pack(offset: Int, slot: Int) -> UInt? {
        guard let offset = UInt32(exactly: offset), let slot = UInt32(exactly: slot) else { return nil }
        return UInt(offset) << 32 | UInt(slot)
    }

    @inlinable @inline(__always)
    func index(for type: AnyObject.Type, offset: Int) -> Int? {
        let key = UInt(bitPattern: ObjectIdentifier(type))
        let entries = words + 2
        // `capacity` is a power of two (see `ManagedSlotTable.words`).
        var position = offset & (capacity &- 1)
        for _ in 0..<capacity {
            let stored = entries[2 &* position].load(ordering: .acquiring)
            if stored == 0 { return nil }
            if stored == key {
                let packed = entries[2 &* position &+ 1].load(ordering: .relaxed)
                if UInt(bitPattern: offset) == packed >> 32 { return Int(packed & 0xFFFF_FFFF) }
            }
            position = (position &+ 1) & (capacity &- 1)
        }
        return nil
    }

    /// Tells the key path probe which slot a typed read used, when `object`
    /// is the probe's target (see ``ManagedKeyPathProbe``).
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
    private let probing = Locked<Void>(())
    // @unchecked Sendable: key paths are immutable.
    private struct Key: Hashable, @unchecked Sendable { let keyPath: AnyKeyPath }
    private let cache = Locked<[Key: Int]>([:])

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
