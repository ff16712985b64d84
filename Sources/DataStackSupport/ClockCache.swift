/// A map of at most ``capacity`` values that evicts by the CLOCK algorithm:
/// a hand sweeps the slots, sparing once each value read since it last
/// passed and evicting the first that was not.
///
/// CLOCK approximates least-recently-used eviction at the cost of one flag
/// per entry: a read sets the flag and moves nothing, so a lookup stays one
/// hash. Values in use outlive a burst of new ones that are never read again
/// (a large fetch, SQL built for one request), where emptying the whole
/// cache when it is full would drop them too.
///
/// The eviction policy of a connection's prepared statements and the
/// compiled regular expressions of `MATCHES`. A coordinator's row cache,
/// which holds a row per fetched object, has a table of its own that keeps
/// no key beside the row (`RowTable`, the same policy over its buckets). It
/// is a value type without a lock; each owner confines or locks it as it
/// does its other state.
@_spi(DataStackInternal) public struct ClockCache<Key: Hashable, Value> {
    @usableFromInline struct Entry {
        @usableFromInline var value: Value
        /// The entry's slot on the clock.
        @usableFromInline var slot: Int
        /// Read since the hand last passed it.
        @usableFromInline var referenced: Bool

        @inlinable init(value: consuming Value, slot: Int, referenced: Bool = false) {
            self.value = value
            self.slot = slot
            self.referenced = referenced
        }
    }

    @usableFromInline var entries: [Key: Entry] = [:]
    /// The clock's slots: each the key stored there, stale when that key's
    /// entry names another slot or none (removed entries leave their slot
    /// for the hand to reuse).
    @usableFromInline var slots: [Key] = []
    @usableFromInline var hand = 0

    /// The most values kept.
    public let capacity: Int

    /// A cache that keeps at most `capacity` values (at least one).
    @inlinable public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// How many values the cache holds.
    @inlinable public var count: Int { entries.count }

    /// Whether the cache holds no value.
    @inlinable public var isEmpty: Bool { entries.isEmpty }

    /// The value for `key`, marked as read so that the hand spares it once.
    ///
    /// - Complexity: One hash of the key.
    @inline(__always)
    @inlinable public mutating func value(forKey key: Key) -> Value? {
        guard let index = entries.index(forKey: key) else { return nil }
        entries.values[index].referenced = true
        return entries.values[index].value
    }

    /// Stores `value` for `key`. A key already cached keeps its slot and its
    /// mark; a new one takes a free slot, evicting a value when the cache is
    /// full.
    ///
    /// - Complexity: One hash of a new key while the cache has room (a large
    ///   fetch filling it); past capacity, amortized O(1) steps of the hand.
    @inlinable public mutating func updateValue(_ value: consuming Value, forKey key: Key) {
        let room = slots.count < capacity
        let newSlot = room ? slots.count : -1
        // The entry is made in the call, so it is moved into the dictionary, not copied.
        if let old = entries.updateValue(Entry(value: value, slot: newSlot), forKey: key) {
            if let index = entries.index(forKey: key) {
                entries.values[index].slot = old.slot
                entries.values[index].referenced = old.referenced
            }
            return
        }
        // The new entry is in no slot yet, so the hand cannot evict it.
        let slot = room ? newSlot : freeSlot()
        if !room { entries[key]?.slot = slot }
        if slot == slots.count { slots.append(key) } else { slots[slot] = key }
    }

    /// A slot for a new value: the first the hand finds stale or unread
    /// (evicting its value), sparing and clearing read ones on the way.
    @usableFromInline mutating func freeSlot() -> Int {
        while true {
            let slot = hand
            hand = (hand + 1) % slots.count
            guard let index = entries.index(forKey: slots[slot]), entries.values[index].slot == slot else { return slot }
            if entries.values[index].referenced {
                entries.values[index].referenced = false
            } else {
                entries.remove(at: index)
                return slot
            }
        }
    }

    /// Removes the value for `key`; its slot goes stale, for the hand to reuse.
    @inlinable public mutating func removeValue(forKey key: Key) {
        entries[key] = nil
    }

    /// Removes every value.
    @inlinable public mutating func removeAll() {
        entries.removeAll()
        slots.removeAll()
        hand = 0
    }

    /// Makes room for `count` values in total without resizing on the way,
    /// bounded by ``capacity``.
    @inlinable public mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(min(capacity, count))
        // Only into an empty clock: `Array` reserves exactly what it is asked,
        // so growing it a little per call would copy it every time.
        if slots.isEmpty { slots.reserveCapacity(min(capacity, count)) }
    }
}

extension ClockCache: Sendable where Key: Sendable, Value: Sendable {}
extension ClockCache.Entry: Sendable where Key: Sendable, Value: Sendable {}
