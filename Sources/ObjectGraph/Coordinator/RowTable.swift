/// An element of a ``RowTable``: a row that names its own object, by the
/// two parts of its ID, which the table reads without making the ID (a row
/// may keep them apart: see ``EncodedStoreNode``).
protocol RowTableElement {
    var objectIDScope: ObjectIDScope { get }
    var objectIDKey: UInt64 { get }
}

extension RowTableElement {
    var objectID: ObjectID { ObjectID(scope: objectIDScope, rawKey: objectIDKey) }

    /// Whether the element's ID is the one of `scope` and `key` (`==` of the IDs, neither made).
    @inline(__always)
    func hasObjectID(_ scope: ObjectIDScope, _ key: UInt64) -> Bool {
        ObjectID.sameID(objectIDScope, objectIDKey, scope, key)
    }
}

/// The row cache's table: rows by the object ID each row carries, at most
/// ``capacity`` of them, evicted by the CLOCK algorithm over the table's own
/// buckets, each with a time stamp its owner gives (see ``update(_:stamp:)``).
///
/// The hand sweeps the buckets in table order, not in the order rows came,
/// so a row just stored may lie right ahead of it: each row has a credit, 1
/// when stored and 2 when read, and the hand takes one from each row it
/// passes and evicts the first it finds without any. Rows never read go
/// before rows read since the hand last passed, and a row just stored
/// outlives one pass (GCLOCK with counters of two).
///
/// Not a `ClockCache` (a `Dictionary` of entries beside an array of keys for
/// the clock's slots): a fetch of faults caches a row per object, and there
/// the dictionary's power-of-two buckets, each holding the ID again as its
/// key beside an entry with its slot number, and the slots array holding it a
/// third time, came to ~250 bytes a row at 100,000 rows — more than the
/// object and its row together. Here a bucket is the row alone, the ID is
/// the row's own, the table is sized at a load of 3/4 in any multiple of
/// eight buckets (eight consecutive keys share a block of them, picked by
/// the hash scaled to the number of blocks), and the hand sweeps the
/// buckets themselves. Beside each bucket a word holds what the table keeps
/// of it (``Meta``): part of its ID's hash, its credit and its stamp. A
/// probe reads that word, and the row's ID only when the hash matches:
/// reading an optional row to compare would copy it (retaining what it
/// holds) at every probe. With the credit and the stamp in the bucket
/// instead, a row cache's bucket took 16 bytes more: ~21 bytes a cached row
/// at a load of 3/4.
///
/// Open addressing with linear probing; removal shifts later entries of a
/// run back into the hole, so lookups stop at the first empty bucket. An
/// entry shifted past the hand may escape one sweep: CLOCK approximates
/// least-recently-used, and stays an approximation.
///
/// A class, confined by its owner: the row cache reaches it only under its
/// lock.
final class RowTable<Element: RowTableElement>: @unchecked Sendable {
    private typealias Meta = RowTableMeta

    /// The largest stamp a bucket keeps: stamps are 36 bits.
    static var maximumStamp: UInt64 { 1 << (64 - Meta.stampShift) - 1 }

    /// The most elements kept.
    let capacity: Int
    private(set) var count = 0
    /// Per bucket, what the table keeps of it (see ``Meta``).
    private var metas: UnsafeMutablePointer<Meta>
    /// Initialized where the meta is not empty.
    private var buckets: UnsafeMutablePointer<Element>
    private var size: Int
    private var hand = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        size = Self.blockSize
        (metas, buckets) = Self.allocate(size)
    }

    deinit {
        Self.deallocate(metas, buckets, size: size)
    }

    var isEmpty: Bool { count == 0 }

    /// The element for `id` and the stamp it was stored with, marked as read
    /// so that the hand spares it twice.
    func element(for id: ObjectID) -> (element: Element, stamp: UInt64)? {
        guard let index = find(id) else { return nil }
        metas[index].credit = 2
        return (buckets[index], metas[index].stamp)
    }

    /// Stores `element` under its object ID with `stamp` (at most
    /// ``maximumStamp``; the owner's, given back by ``element(for:)``). One
    /// already there is replaced and keeps its credit; a new one evicts
    /// another when the table is full.
    ///
    /// The element is consumed, and moved on explicitly (`consume`) in each
    /// branch, so that a caller handing over rows it owns (a fetch's, see
    /// ``RowCache``) moves each into its bucket: without, the optimizer
    /// passed it borrowed and copied it in, a retain and a release of each
    /// reference the row holds. One probe: the search that misses ends at the
    /// empty bucket where the element goes, unless an eviction or a rehash
    /// must make room first (out of line). The search is written out rather
    /// than shared with `find`: passed to a shared probe, the element's ID
    /// was copied (0.4 M more on the fault phase of 11,000 rows).
    @inline(__always)
    func update(_ element: consuming Element, stamp: UInt64) {
        let hash = Self.hash(scope: element.objectIDScope, key: element.objectIDKey)
        var index = Self.home(of: hash, size: size)
        while true {
            let meta = metas[index]
            if meta.isEmpty { break }
            if meta.hash == hash && buckets[index].hasObjectID(element.objectIDScope, element.objectIDKey) {
                buckets[index] = consume element
                metas[index].stamp = stamp
                return
            }
            index = Self.next(after: index, size: size)
        }
        if count == capacity || count + 1 > Self.maximumCount(size: size) {
            insertMakingRoom(consume element, meta: Meta(hash: hash, credit: 1, stamp: stamp))
        } else {
            metas[index] = Meta(hash: hash, credit: 1, stamp: stamp)
            (buckets + index).initialize(to: consume element)
            count += 1
        }
    }

    /// ``update(_:stamp:)`` of an element not in the table when the table is
    /// full (evict one) or at its largest load (grow).
    private func insertMakingRoom(_ element: consuming Element, meta: Meta) {
        if count == capacity { evictOne() }
        if count + 1 > Self.maximumCount(size: size) { rehash(to: size * 2) }
        place(consume element, meta: meta)
        count += 1
    }

    /// Makes room for `count` elements in total (bounded by ``capacity``)
    /// without growing on the way.
    func reserveCapacity(_ count: Int) {
        let wanted = min(capacity, count)
        guard wanted > Self.maximumCount(size: size) else { return }
        rehash(to: (wanted / 3 * 4 + 4 + Self.blockSize - 1) & ~(Self.blockSize - 1))
    }

    /// Removes the element for `id`, if there is one.
    func removeElement(for id: ObjectID) {
        guard let index = find(id) else { return }
        remove(at: index)
    }

    /// Removes the elements whose IDs satisfy `isRemoved`: found in one pass,
    /// removed after it (a removal shifts entries the pass has not reached
    /// back, or wrapped ones it has reached forward).
    func removeElements(where isRemoved: (ObjectID) throws -> Bool) rethrows {
        var removed: [ObjectID] = []
        for index in 0..<size where !metas[index].isEmpty {
            let id = buckets[index].objectID
            if try isRemoved(id) { removed.append(id) }
        }
        for id in removed { removeElement(for: id) }
    }

    /// Lowers every stamp by `amount`, to 0 at least: for an owner whose
    /// stamps count from a point it moves on (see ``RowCache``).
    func lowerStamps(by amount: UInt64) {
        for index in 0..<size where !metas[index].isEmpty {
            let stamp = metas[index].stamp
            metas[index].stamp = stamp > amount ? stamp - amount : 0
        }
    }

    /// Removes every element.
    func removeAll() {
        Self.deallocate(metas, buckets, size: size)
        size = Self.blockSize
        (metas, buckets) = Self.allocate(size)
        count = 0
        hand = 0
    }

    // MARK: - The table

    private static func allocate(_ size: Int) -> (UnsafeMutablePointer<Meta>, UnsafeMutablePointer<Element>) {
        let metas = UnsafeMutablePointer<Meta>.allocate(capacity: size)
        metas.initialize(repeating: .empty, count: size)
        return (metas, .allocate(capacity: size))
    }

    private static func deallocate(_ metas: UnsafeMutablePointer<Meta>, _ buckets: UnsafeMutablePointer<Element>, size: Int) {
        for index in 0..<size where !metas[index].isEmpty { (buckets + index).deinitialize(count: 1) }
        metas.deallocate()
        buckets.deallocate()
    }

    private static func maximumCount(size: Int) -> Int { size / 4 * 3 }

    @inline(__always)
    private static func next(after index: Int, size: Int) -> Int {
        index + 1 == size ? 0 : index + 1
    }

    /// How many consecutive keys share a block of buckets (see ``home(of:size:)``).
    private static var blockSize: Int { 8 }

    /// The bits `ObjectID` hashes (its key but its three low bits, whether it
    /// is temporary and its entity name's seed), mixed, 22 of them in bits
    /// 4–25, with the key's three low bits beside them (bits 1–3) and bit 0
    /// set: never 0, and within ``Meta/hashMask``.
    @inline(__always)
    private static func hash(scope: ObjectIDScope, key: UInt64) -> UInt64 {
        let bits = ((key >> 3) &<< 1 | (scope.storeReference == nil ? 1 : 0)) ^ scope.entity.nameSeed
        return ((bits &* 0x9E37_79B9_7F4A_7C15) >> 42) << 4 | (key & 7) << 1 | 1
    }

    /// The first bucket for a hash: eight consecutive keys of an entity have
    /// eight consecutive buckets, in a block picked by the rest of the hash
    /// scaled to the number of blocks. A fetch stores its rows in key order,
    /// and so writes a new block of metas and of buckets every eighth row: with
    /// each row's bucket picked apart, each missed the processor's caches
    /// twice (meta and bucket), two fifths of the time of storing them.
    @inline(__always)
    private static func home(of hash: UInt64, size: Int) -> Int {
        let block = ((hash >> 4) &* UInt64(truncatingIfNeeded: size / blockSize)) >> 22
        return Int(truncatingIfNeeded: block) &* blockSize | Int(truncatingIfNeeded: hash >> 1 & 7)
    }

    private func find(_ id: ObjectID) -> Int? {
        find(id, hash: Self.hash(scope: id.scope, key: id.rawKey))
    }

    @inline(__always)
    private func find(_ id: ObjectID, hash: UInt64) -> Int? {
        var index = Self.home(of: hash, size: size)
        while true {
            let meta = metas[index]
            if meta.isEmpty { return nil }
            if meta.hash == hash && buckets[index].hasObjectID(id.scope, id.rawKey) { return index }
            index = Self.next(after: index, size: size)
        }
    }

    private func place(_ element: consuming Element, meta: Meta) {
        var index = Self.home(of: meta.hash, size: size)
        while !metas[index].isEmpty { index = Self.next(after: index, size: size) }
        metas[index] = meta
        (buckets + index).initialize(to: element)
    }

    private func remove(at start: Int) {
        var index = start
        metas[index] = .empty
        (buckets + index).deinitialize(count: 1)
        count -= 1
        var next = Self.next(after: index, size: size)
        while !metas[next].isEmpty {
            let home = Self.home(of: metas[next].hash, size: size)
            // Move the entry unless its home lies cyclically in (index, next].
            let stays = index <= next ? (home > index && home <= next) : (home > index || home <= next)
            if !stays {
                metas[index] = metas[next]
                metas[next] = .empty
                (buckets + index).moveInitialize(from: buckets + next, count: 1)
                index = next
            }
            next = Self.next(after: next, size: size)
        }
    }

    /// Evicts the first element the hand finds without credit, taking one
    /// from each it passes. The table holds at least one element.
    private func evictOne() {
        while true {
            let index = hand
            hand = Self.next(after: hand, size: size)
            guard !metas[index].isEmpty else { continue }
            if metas[index].credit > 0 {
                metas[index].credit -= 1
            } else {
                remove(at: index)
                return
            }
        }
    }

    private func rehash(to newSize: Int) {
        let (oldMetas, oldBuckets) = (metas, buckets)
        let oldSize = size
        size = newSize
        (metas, buckets) = Self.allocate(newSize)
        hand = 0
        for index in 0..<oldSize where !oldMetas[index].isEmpty {
            place((oldBuckets + index).move(), meta: oldMetas[index])
        }
        oldMetas.deallocate()
        oldBuckets.deallocate()
    }
}

/// What the table keeps of a bucket beside it, in one word: 0 when the
/// bucket is empty, else bit 0 set, the ID's hash in bits 1–25 (see
/// `RowTable.hash(scope:key:)`), the credit in bits 26–27 (how many times the
/// hand spares it still: 1 when stored, 2 when read since the hand last
/// passed) and the stamp in bits 28–63.
private struct RowTableMeta {
    var bits: UInt64

    // Computed rather than stored: constants in every probe, with no lazy global to check.
    static var empty: RowTableMeta { RowTableMeta(bits: 0) }
    static var hashMask: UInt64 { 1 << 26 - 1 }
    static var creditShift: UInt64 { 26 }
    static var stampShift: UInt64 { 28 }

    init(bits: UInt64) { self.bits = bits }

    init(hash: UInt64, credit: UInt64, stamp: UInt64) {
        bits = hash | credit << Self.creditShift | stamp << Self.stampShift
    }

    var isEmpty: Bool { bits == 0 }
    var hash: UInt64 { bits & Self.hashMask }
    var credit: UInt64 {
        get { bits >> Self.creditShift & 3 }
        set { bits = bits & ~(3 << Self.creditShift) | newValue << Self.creditShift }
    }
    var stamp: UInt64 {
        get { bits >> Self.stampShift }
        set { bits = bits & (1 << Self.stampShift - 1) | newValue << Self.stampShift }
    }
}
