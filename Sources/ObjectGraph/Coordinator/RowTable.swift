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
/// object and its row together. Here a bucket is the row and a mark, the ID
/// is the row's own, the table is sized at a load of 3/4 in any multiple of
/// four buckets (the home is the hash scaled to the bucket count), and the
/// hand sweeps the buckets themselves: ~60 bytes a row.
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
    private var buckets: UnsafeMutablePointer<Bucket?>
    private var size: Int
    private var hand = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        size = 4
        buckets = .allocate(capacity: size)
        buckets.initialize(repeating: nil, count: size)
    }

    deinit {
        buckets.deinitialize(count: size)
        buckets.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    /// The element for `id`, marked as read so that the hand spares it once.
    func element(for id: ObjectID) -> Element? {
        guard let index = find(id) else { return nil }
        buckets[index]!.credit = 2
        return buckets[index]!.element
    }

    /// Stores `element` under its object ID. One already there is replaced and
    /// keeps its mark; a new one evicts another when the table is full.
    func update(_ element: Element) {
        let id = element.objectID
        if let index = find(id) {
            buckets[index]!.element = element
            return
        }
        if count == capacity { evictOne() }
        if count + 1 > Self.maximumCount(size: size) { rehash(to: max(size * 2, 8)) }
        place(Bucket(element: element, credit: 1))
        count += 1
    }

    /// Makes room for `count` elements in total (bounded by ``capacity``)
    /// without growing on the way.
    func reserveCapacity(_ count: Int) {
        let wanted = min(capacity, count)
        guard wanted > Self.maximumCount(size: size) else { return }
        rehash(to: (wanted / 3 * 4 + 4 + 3) & ~3)
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
        for index in 0..<size {
            if let bucket = buckets[index], try isRemoved(bucket.element.objectID) { removed.append(bucket.element.objectID) }
        }
        for id in removed { removeElement(for: id) }
    }

    /// Removes every element.
    func removeAll() {
        buckets.deinitialize(count: size)
        buckets.deallocate()
        size = 4
        buckets = .allocate(capacity: size)
        buckets.initialize(repeating: nil, count: size)
        count = 0
        hand = 0
    }

    // MARK: - The table

    private static func maximumCount(size: Int) -> Int { size / 4 * 3 }

    private static func next(after index: Int, size: Int) -> Int {
        index + 1 == size ? 0 : index + 1
    }

    /// The hash of an ID's bits as `ObjectID` hashes them (its key, whether it
    /// is temporary and its entity name's seed), scaled to the bucket count.
    @inline(__always)
    private static func home(of id: ObjectID, size: Int) -> Int {
        let bits = (id.rawKey &<< 1 | (id.scope.storeReference == nil ? 1 : 0)) ^ id.scope.entity.nameSeed
        let hash = bits &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: size)).high)
    }

    private func find(_ id: ObjectID) -> Int? {
        var index = Self.home(of: id, size: size)
        while let bucket = buckets[index] {
            if bucket.element.objectID == id { return index }
            index = Self.next(after: index, size: size)
        }
        return nil
    }

    private func place(_ bucket: Bucket) {
        var index = Self.home(of: bucket.element.objectID, size: size)
        while buckets[index] != nil { index = Self.next(after: index, size: size) }
        buckets[index] = bucket
    }

    private func remove(at start: Int) {
        var index = start
        buckets[index] = nil
        count -= 1
        var next = Self.next(after: index, size: size)
        while let bucket = buckets[next] {
            let home = Self.home(of: bucket.element.objectID, size: size)
            // Move the entry unless its home lies cyclically in (index, next].
            let stays = index <= next ? (home > index && home <= next) : (home > index || home <= next)
            if !stays {
                buckets[index] = (buckets + next).move()
                (buckets + next).initialize(to: nil)
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
            guard buckets[index] != nil else { continue }
            if buckets[index]!.credit > 0 {
                buckets[index]!.credit -= 1
            } else {
                remove(at: index)
                return
            }
        }
    }

    private func rehash(to newSize: Int) {
        let old = buckets
        let oldSize = size
        size = newSize
        buckets = .allocate(capacity: newSize)
        buckets.initialize(repeating: nil, count: newSize)
        hand = 0
        for index in 0..<oldSize {
            guard let bucket = (old + index).move() else { continue }
            place(bucket)
        }
        old.deallocate()
    }
}
