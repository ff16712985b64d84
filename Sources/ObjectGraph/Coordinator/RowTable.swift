/// An element of a ``RowTable``: a row that names its own object.
protocol RowTableElement {
    var objectID: ObjectID { get }
}

/// The row cache's table: rows by the object ID each row carries, at most
/// ``capacity`` of them, evicted by the CLOCK algorithm over the table's own
/// buckets.
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
/// object and its row together. Here a bucket is the row and its credit, the ID
/// is the row's own, the table is sized at a load of 3/4 in any multiple of
/// eight buckets (eight consecutive keys share a block of them, picked by
/// the hash scaled to the number of blocks), and the hand sweeps the
/// buckets themselves: ~100 bytes a row. A probe reads a word of hash per
/// bucket, in an array of its own, and the row's ID only when that
/// matches: reading an optional row to compare would copy it
/// (retaining what it holds) at every probe.
///
/// Open addressing with linear probing; removal shifts later entries of a
/// run back into the hole, so lookups stop at the first empty bucket. An
/// entry shifted past the hand may escape one sweep: CLOCK approximates
/// least-recently-used, and stays an approximation.
///
/// A class, confined by its owner: the row cache reaches it only under its
/// lock.
final class RowTable<Element: RowTableElement>: @unchecked Sendable {
    private struct Bucket {
        var element: Element
        /// How many times the hand spares it still: 1 when stored, 2 when
        /// read since the hand last passed.
        var credit: UInt8
    }

    /// The most elements kept.
    let capacity: Int
    private(set) var count = 0
    /// Per bucket, 0 when empty, else its element's ID's hash with the low
    /// bit set.
    private var tags: UnsafeMutablePointer<UInt64>
    /// Initialized where the tag is not 0.
    private var buckets: UnsafeMutablePointer<Bucket>
    private var size: Int
    private var hand = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        size = Self.blockSize
        (tags, buckets) = Self.allocate(size)
    }

    deinit {
        Self.deallocate(tags, buckets, size: size)
    }

    var isEmpty: Bool { count == 0 }

    /// The element for `id`, marked as read so that the hand spares it twice.
    func element(for id: ObjectID) -> Element? {
        guard let index = find(id) else { return nil }
        buckets[index].credit = 2
        return buckets[index].element
    }

    /// Stores `element` under its object ID. One already there is replaced and
    /// keeps its credit; a new one evicts another when the table is full.
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
    func update(_ element: consuming Element) {
        let hash = Self.hash(of: element.objectID)
        var index = Self.home(of: hash, size: size)
        while true {
            let tag = tags[index]
            if tag == 0 { break }
            if tag == hash && buckets[index].element.objectID == element.objectID {
                buckets[index].element = consume element
                return
            }
            index = Self.next(after: index, size: size)
        }
        if count == capacity || count + 1 > Self.maximumCount(size: size) {
            insertMakingRoom(consume element, hash: hash)
        } else {
            tags[index] = hash
            (buckets + index).initialize(to: Bucket(element: consume element, credit: 1))
            count += 1
        }
    }

    /// ``update(_:)`` of an element not in the table when the table is full
    /// (evict one) or at its largest load (grow).
    private func insertMakingRoom(_ element: consuming Element, hash: UInt64) {
        if count == capacity { evictOne() }
        if count + 1 > Self.maximumCount(size: size) { rehash(to: size * 2) }
        place(Bucket(element: consume element, credit: 1), hash: hash)
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
        for index in 0..<size where tags[index] != 0 {
            let id = buckets[index].element.objectID
            if try isRemoved(id) { removed.append(id) }
        }
        for id in removed { removeElement(for: id) }
    }

    /// Removes every element.
    func removeAll() {
        Self.deallocate(tags, buckets, size: size)
        size = Self.blockSize
        (tags, buckets) = Self.allocate(size)
        count = 0
        hand = 0
    }

    // MARK: - The table

    private static func allocate(_ size: Int) -> (UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<Bucket>) {
        let tags = UnsafeMutablePointer<UInt64>.allocate(capacity: size)
        tags.initialize(repeating: 0, count: size)
        return (tags, .allocate(capacity: size))
    }

    private static func deallocate(_ tags: UnsafeMutablePointer<UInt64>, _ buckets: UnsafeMutablePointer<Bucket>, size: Int) {
        for index in 0..<size where tags[index] != 0 { (buckets + index).deinitialize(count: 1) }
        tags.deallocate()
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
    /// is temporary and its entity name's seed), mixed, with the key's three
    /// low bits beside them (bits 1–3) and bit 0 set: never 0.
    @inline(__always)
    private static func hash(of id: ObjectID) -> UInt64 {
        let bits = ((id.rawKey >> 3) &<< 1 | (id.scope.storeReference == nil ? 1 : 0)) ^ id.scope.entity.nameSeed
        return bits &* 0x9E37_79B9_7F4A_7C15 & ~0xF | (id.rawKey & 7) &<< 1 | 1
    }

    /// The first bucket for a hash: eight consecutive keys of an entity have
    /// eight consecutive buckets, in a block picked by the rest of the hash
    /// scaled to the number of blocks. A fetch stores its rows in key order,
    /// and so writes a new block of tags and of buckets every eighth row: with
    /// each row's bucket picked apart, each missed the processor's caches
    /// twice (tag and bucket), two fifths of the time of storing them.
    @inline(__always)
    private static func home(of hash: UInt64, size: Int) -> Int {
        let block = hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: size / blockSize)).high
        return Int(truncatingIfNeeded: block) &* blockSize | Int(truncatingIfNeeded: hash >> 1 & 7)
    }

    private func find(_ id: ObjectID) -> Int? {
        find(id, hash: Self.hash(of: id))
    }

    @inline(__always)
    private func find(_ id: ObjectID, hash: UInt64) -> Int? {
        var index = Self.home(of: hash, size: size)
        while true {
            let tag = tags[index]
            if tag == 0 { return nil }
            if tag == hash && buckets[index].element.objectID == id { return index }
            index = Self.next(after: index, size: size)
        }
    }

    private func place(_ bucket: consuming Bucket, hash: UInt64) {
        var index = Self.home(of: hash, size: size)
        while tags[index] != 0 { index = Self.next(after: index, size: size) }
        tags[index] = hash
        (buckets + index).initialize(to: bucket)
    }

    private func remove(at start: Int) {
        var index = start
        tags[index] = 0
        (buckets + index).deinitialize(count: 1)
        count -= 1
        var next = Self.next(after: index, size: size)
        while tags[next] != 0 {
            let home = Self.home(of: tags[next], size: size)
            // Move the entry unless its home lies cyclically in (index, next].
            let stays = index <= next ? (home > index && home <= next) : (home > index || home <= next)
            if !stays {
                tags[index] = tags[next]
                tags[next] = 0
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
            guard tags[index] != 0 else { continue }
            if buckets[index].credit > 0 {
                buckets[index].credit -= 1
            } else {
                remove(at: index)
                return
            }
        }
    }

    private func rehash(to newSize: Int) {
        let (oldTags, oldBuckets) = (tags, buckets)
        let oldSize = size
        size = newSize
        (tags, buckets) = Self.allocate(newSize)
        hand = 0
        for index in 0..<oldSize where oldTags[index] != 0 {
            place((oldBuckets + index).move(), hash: oldTags[index])
        }
        oldTags.deallocate()
        oldBuckets.deallocate()
    }
}
