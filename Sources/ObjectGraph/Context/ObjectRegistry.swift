/// A context's identity map: each registered object under its ID.
///
/// An open-addressing table with linear probing rather than a `Dictionary`: a
/// `Dictionary` scatters IDs over its buckets with a seeded hash, so
/// registering the objects of a large fetch — rows in primary-key order —
/// misses the processor's cache on every insert. Here four consecutive keys of
/// an entity share a block of buckets, and blocks are spread by a
/// multiplicative hash of the rest of the key and the entity, so a fetch in key
/// order touches a new block only every fourth object. The entity takes part
/// by its name's hash (``EntityDescription/nameSeed``), not its identity: IDs
/// of one row from two copies of a model are equal (see ``ObjectID``).
struct ObjectRegistry {
    private struct Entry {
        var id: ObjectID
        var object: ManagedObject
    }

    private var entries: [Entry?]
    /// How many objects are registered.
    private(set) var count = 0

    init() {
        entries = Self.emptyTable(count: 16)
    }

    var isEmpty: Bool { count == 0 }

    /// The registered objects, in no particular order.
    var objects: some Sequence<ManagedObject> { entries.lazy.compactMap { $0?.object } }

    /// The registered IDs, in no particular order.
    var ids: some Sequence<ObjectID> { entries.lazy.compactMap { $0?.id } }

    subscript(id: ObjectID) -> ManagedObject? {
        get {
            guard let index = find(id) else { return nil }
            return entries[index]?.object
        }
        set {
            if let newValue { insert(newValue, for: id) } else { removeValue(forKey: id) }
        }
    }

    /// Makes room for `capacity` objects without growing.
    mutating func reserveCapacity(_ capacity: Int) {
        var size = entries.count
        while capacity > size / 4 * 3 { size *= 2 }
        if size != entries.count { rehash(to: size) }
    }

    @discardableResult
    mutating func removeValue(forKey id: ObjectID) -> ManagedObject? {
        guard var index = find(id), let removed = entries[index]?.object else { return nil }
        entries[index] = nil
        count -= 1
        // Backward shift: pull later entries of the run into the hole, so that
        // lookups can stop at the first empty bucket.
        let mask = entries.count - 1
        var next = (index + 1) & mask
        while let entry = entries[next] {
            let home = Self.home(of: entry.id, mask: mask)
            // Move the entry unless its home lies cyclically in (index, next].
            let stays = index <= next ? (home > index && home <= next) : (home > index || home <= next)
            if !stays {
                entries[index] = entry
                entries[next] = nil
                index = next
            }
            next = (next + 1) & mask
        }
        return removed
    }

    /// Removes the objects for which `isUnused` returns true; it gets each
    /// object `inout`, so it can ask `isKnownUniquelyReferenced`.
    mutating func removeAll(where isUnused: (inout ManagedObject) -> Bool) {
        var unused: [ObjectID] = []
        for index in entries.indices where entries[index] != nil {
            if isUnused(&entries[index]!.object) { unused.append(entries[index]!.id) }
        }
        for id in unused { removeValue(forKey: id) }
    }

    /// The object registered under `id`, or nil; removed instead when `isUnused`
    /// (which gets it `inout`, as in ``removeAll(where:)``) returns true.
    mutating func object(for id: ObjectID, removingIf isUnused: (inout ManagedObject) -> Bool) -> ManagedObject? {
        guard let index = find(id) else { return nil }
        if isUnused(&entries[index]!.object) {
            removeValue(forKey: id)
            return nil
        }
        return entries[index]?.object
    }

    /// Files every object again under its current ID, after many IDs changed
    /// (a save that gave most of them permanent IDs).
    mutating func rekeyAll() {
        rehash(to: entries.count, rekeying: true)
    }

    // MARK: - Table

    private func find(_ id: ObjectID) -> Int? {
        let mask = entries.count - 1
        var index = Self.home(of: id, mask: mask)
        while let entry = entries[index] {
            if entry.id == id { return index }
            index = (index + 1) & mask
        }
        return nil
    }

    private mutating func insert(_ object: ManagedObject, for id: ObjectID) {
        if let index = find(id) {
            entries[index]!.object = object
            return
        }
        insertUnregistered(object, for: id)
    }

    /// Registers an object under an ID the caller has just looked up and not
    /// found: a fetch registering its rows' objects would otherwise search for
    /// each ID twice.
    mutating func insertUnregistered(_ object: ManagedObject, for id: ObjectID) {
        if count + 1 > entries.count / 4 * 3 { rehash(to: entries.count * 2) }
        place(Entry(id: id, object: object))
        count += 1
    }

    private mutating func place(_ entry: Entry) {
        let mask = entries.count - 1
        var index = Self.home(of: entry.id, mask: mask)
        while entries[index] != nil { index = (index + 1) & mask }
        entries[index] = entry
    }

    private mutating func rehash(to size: Int, rekeying: Bool = false) {
        let old = entries
        entries = Self.emptyTable(count: size)
        count = 0
        // Each object is registered once, under its own ID: no two entries can
        // meet under one ID, so entries are placed without a lookup.
        for case var entry? in old {
            if rekeying { entry.id = entry.object.objectID }
            place(entry)
            count += 1
        }
    }

    /// A table of `count` empty buckets. `Array(repeating:count:)` copies its
    /// optional value into each bucket through the value witness, ~100
    /// instructions a bucket; initializing the buffer in place is a store loop.
    private static func emptyTable(count: Int) -> [Entry?] {
        [Entry?](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.initialize(repeating: nil)
            initialized = count
        }
    }

    /// The first bucket for an ID: a block of four for four consecutive keys.
    @inline(__always)
    private static func home(of id: ObjectID, mask: Int) -> Int {
        let bits: UInt64
        switch id.key {
        case .permanent(let primaryKey): bits = UInt64(bitPattern: primaryKey)
        case .temporary(let counter): bits = counter ^ 0x5555_5555_5555_5554
        }
        let block = (((bits >> 2) ^ id.entity.nameSeed) &* 0x9E37_79B9_7F4A_7C15) >> 30
        return Int(truncatingIfNeeded: block << 2 | (bits & 3)) & mask
    }
}
