/// A context's identity map: each registered object under its ID.
///
/// An open-addressing table with linear probing rather than a `Dictionary`: a
/// `Dictionary` scatters IDs over its buckets with a seeded hash, so
/// registering the objects of a large fetch — rows in primary-key order —
/// misses the processor's cache on every insert. Here eight consecutive keys
/// of an entity share a block of buckets (a cache line of them), and blocks
/// are spread by a multiplicative hash of the rest of the key and the entity,
/// so a fetch in key order touches a new block only every eighth object. The
/// entity takes part by its name's hash (``EntityDescription/nameSeed``), not
/// its identity: IDs of one row from two copies of a model are equal (see
/// ``ObjectID``).
///
/// A bucket holds the object alone, 8 bytes, not its ID beside it (it was 16
/// with the ID's key word): the ID a probe compares is read from the object.
/// Blocks of consecutive keys make the first probe the object sought nearly
/// always, so the load through the object costs a lookup little, and at
/// 100,000 objects the table is 1 MB rather than 2. So an object is filed
/// under its current ``ManagedObject/objectID``: take it out before changing
/// its ID and file it again after (or call ``rekeyAll()`` once many changed).
struct ObjectRegistry {
    private typealias Entry = ManagedObject

    /// The buckets, shared between copies until one of them changes (the
    /// sequences of ``objects`` and ``ids`` hold it while they are iterated).
    private var table: Table
    /// How many objects are registered.
    private(set) var count = 0

    init() {
        table = Table(count: 16)
    }

    var isEmpty: Bool { count == 0 }

    /// How many buckets the table has (for tests of its sizing).
    var bucketCount: Int { table.count }

    /// The registered objects, in no particular order.
    var objects: some Sequence<ManagedObject> {
        (0..<table.count).lazy.compactMap { [table] in table.buckets[$0] }
    }

    /// The registered IDs, in no particular order.
    var ids: some Sequence<ObjectID> {
        (0..<table.count).lazy.compactMap { [table] in table.buckets[$0]?.objectID }
    }

    subscript(id: ObjectID) -> ManagedObject? {
        get {
            guard let index = find(id) else { return nil }
            return table.buckets[index]
        }
        set {
            if let newValue { insert(newValue, for: id) } else { removeValue(forKey: id) }
        }
    }

    /// Makes room for `capacity` objects without growing: a table of just
    /// the size that holds them at the largest load (3/4), not the next power
    /// of two, which for a fetch of 100,000 objects took twice the buckets
    /// (262,144: 42 bytes an object rather than 21).
    mutating func reserveCapacity(_ capacity: Int) {
        guard capacity > Self.maximumCount(size: table.count) else { return }
        // Whole blocks of eight (see `home(key:seed:size:)`).
        rehash(to: (capacity / 3 * 4 + 4 + 7) & ~7)
    }

    /// How many objects a table of `size` buckets holds before it grows.
    @inline(__always)
    private static func maximumCount(size: Int) -> Int { size / 4 * 3 }

    /// The bucket after `index`, cyclically.
    @inline(__always)
    private static func next(after index: Int, size: Int) -> Int {
        index + 1 == size ? 0 : index + 1
    }

    @discardableResult
    mutating func removeValue(forKey id: ObjectID) -> ManagedObject? {
        guard var index = find(id) else { return nil }
        makeUnique()
        let buckets = table.buckets
        guard let removed = buckets[index] else { return nil }
        buckets[index] = nil
        count -= 1
        // Backward shift: pull later entries of the run into the hole, so that
        // lookups can stop at the first empty bucket.
        let size = table.count
        var next = Self.next(after: index, size: size)
        while let entry = buckets[next] {
            let home = Self.home(of: entry, size: size)
            // Move the entry unless its home lies cyclically in (index, next].
            let stays = index <= next ? (home > index && home <= next) : (home > index || home <= next)
            if !stays {
                buckets[index] = entry
                buckets[next] = nil
                index = next
            }
            next = Self.next(after: next, size: size)
        }
        return removed
    }

    /// Removes the objects for which `isUnused` returns true; it gets each
    /// object `inout`, so it can ask `isKnownUniquelyReferenced`.
    mutating func removeAll(where isUnused: (inout ManagedObject) -> Bool) {
        makeUnique()
        let buckets = table.buckets
        var unused: [ObjectID] = []
        for index in 0..<table.count where buckets[index] != nil {
            if isUnused(&buckets[index]!) { unused.append(buckets[index]!.objectID) }
        }
        for id in unused { removeValue(forKey: id) }
    }

    /// The object registered under `id`, or nil; removed instead when `isUnused`
    /// (which gets it `inout`, as in ``removeAll(where:)``) returns true.
    mutating func object(for id: ObjectID, removingIf isUnused: (inout ManagedObject) -> Bool) -> ManagedObject? {
        guard let index = find(id) else { return nil }
        makeUnique()
        if isUnused(&table.buckets[index]!) {
            removeValue(forKey: id)
            return nil
        }
        return table.buckets[index]
    }

    /// Files every object again under its current ID, after many IDs changed
    /// (a save that gave most of them permanent IDs).
    mutating func rekeyAll() {
        rehash(to: table.count)
    }

    // MARK: - Table

    /// The buckets of an open-addressing table, in memory of its own.
    ///
    /// Not an `Array`: an array of `Entry?` is destroyed by the runtime's
    /// generic `swift_arrayDestroy`, which asks `Optional`'s value witness
    /// whether each bucket is empty (~115 instructions a bucket, empty or not:
    /// 1.9 M for a context's table of 16,384 buckets, on every reset and
    /// rehash). This table's deinitializer is compiled for `Entry?`.
    private final class Table {
        let buckets: UnsafeMutablePointer<Entry?>
        let count: Int

        init(count: Int) {
            self.count = count
            buckets = .allocate(capacity: count)
            buckets.initialize(repeating: nil, count: count)
        }

        /// A table of the same size holding the same entries.
        func copy() -> Table {
            let copy = Table(count: count)
            for index in 0..<count { copy.buckets[index] = buckets[index] }
            return copy
        }

        deinit {
            for index in 0..<count { _ = (buckets + index).move() }
            buckets.deallocate()
        }
    }

    /// Gives this registry a table of its own before it changes one shared
    /// with a copy.
    @inline(__always)
    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&table) { table = table.copy() }
    }

    private func find(_ id: ObjectID) -> Int? {
        let (index, entry) = probe(id)
        return entry == nil ? nil : index
    }

    /// Where `id` is registered: its bucket and object, or the empty bucket
    /// that ends the search for it (where it would go) and nil.
    ///
    /// The buckets are read unretained: a bucket passed over belongs to
    /// another object, and retaining it to compare its ID was an atomic
    /// write to that object's memory, often out of the processor's caches.
    /// Only the object found is retained, by the caller taking it.
    @inline(__always)
    private func probe(_ id: borrowing ObjectID) -> (index: Int, entry: ManagedObject?) {
        let buckets = UnsafeRawPointer(table.buckets)
        let size = table.count
        var index = Self.home(of: id, size: size)
        // `Entry?` and `Unmanaged<Entry>?` have one layout: a pointer, null for nil.
        while let entry = buckets.load(fromByteOffset: index &* MemoryLayout<Entry?>.stride, as: Unmanaged<Entry>?.self) {
            if entry._withUnsafeGuaranteedRef({ $0.storedID == id }) { return (index, entry.takeUnretainedValue()) }
            index = Self.next(after: index, size: size)
        }
        return (index, nil)
    }

    private mutating func insert(_ object: ManagedObject, for id: ObjectID) {
        if let index = find(id) {
            makeUnique()
            table.buckets[index] = object
            return
        }
        insertUnregistered(object, for: id)
    }

    /// Registers an object under an ID the caller has just looked up and not
    /// found: a fetch registering its rows' objects would otherwise search for
    /// each ID twice.
    mutating func insertUnregistered(_ object: ManagedObject, for id: ObjectID) {
        if count + 1 > Self.maximumCount(size: table.count) {
            rehash(to: table.count * 2)
        } else {
            makeUnique()
        }
        place(object, in: table)
        count += 1
    }

    /// The object registered under `id`, or the one `make` returns for it,
    /// registered: one probe for both, where a lookup and then
    /// ``insertUnregistered(_:for:)`` search twice (a fetch registering its
    /// rows' objects).
    ///
    /// The ID is consumed and handed to `make`, which gives it to the object
    /// it makes: the one copy the caller took moves into the object.
    ///
    /// `make` is expected to leave the registry alone; if it changed it
    /// after all (a subclass's initializer reaching the context), the
    /// object is filed with a search of its own.
    @inline(__always)
    mutating func object(for id: consuming ObjectID, orRegister make: (consuming ObjectID) -> ManagedObject) -> ManagedObject {
        // Plain values, not the table: holding it across `make` cost a retain and a release.
        let buckets = table.buckets
        let size = table.count
        let (index, registered) = probe(id)
        if let registered { return registered }
        let countBefore = count
        let object = make(consume id)
        if table.buckets == buckets && count == countBefore && count + 1 <= Self.maximumCount(size: size) {
            makeUnique()   // a copy keeps the layout: `index` is still the bucket
            table.buckets[index] = object
            count += 1
        } else {
            insertUnregistered(object, for: object.objectID)
        }
        return object
    }

    private func place(_ entry: Entry, in table: Table) {
        let size = table.count
        var index = Self.home(of: entry, size: size)
        while table.buckets[index] != nil { index = Self.next(after: index, size: size) }
        table.buckets[index] = entry
    }

    private mutating func rehash(to size: Int) {
        var old = table
        table = Table(count: size)
        count = 0
        // Entries move to the new table unless a copy of the registry still
        // reads the old one: no retain and release of their two references.
        let moving = isKnownUniquelyReferenced(&old)
        // Each object is registered once, under its own ID: no two entries can
        // meet under one ID, so entries are placed without a lookup.
        for index in 0..<old.count {
            let bucket = old.buckets + index
            let taken: Entry?
            if moving {
                taken = bucket.move()
                bucket.initialize(to: nil)
            } else {
                taken = bucket.pointee
            }
            guard let entry = taken else { continue }
            place(entry, in: table)
            count += 1
        }
    }

    /// The first bucket for an ID: a block of eight for eight consecutive keys.
    @inline(__always)
    private static func home(of id: ObjectID, size: Int) -> Int {
        home(key: id.rawKey, seed: id.entity.nameSeed, size: size)
    }

    /// The first bucket of an entry: its object's current ID's.
    @inline(__always)
    private static func home(of entry: Entry, size: Int) -> Int {
        home(of: entry.objectID, size: size)
    }

    /// The block is the hash scaled to the number of blocks (the high word of
    /// their product), so a table may have any number of blocks, not only a
    /// power of two; the multiplication leaves the hash's high bits the best mixed.
    @inline(__always)
    private static func home(key: UInt64, seed: UInt64, size: Int) -> Int {
        let hash = ((key >> 3) ^ seed) &* 0x9E37_79B9_7F4A_7C15
        let block = hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: size >> 3)).high
        return Int(truncatingIfNeeded: block << 3 | (key & 7))
    }
}
