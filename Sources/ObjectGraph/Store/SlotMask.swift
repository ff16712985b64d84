/// Slots of an entity, as a set of bits: one word for the first 64 slots
/// (every entity of most models), more only past them.
package struct SlotMask: Hashable, Sendable {
    private var low: UInt64 = 0
    private var high: [UInt64] = []

    package init() {}

    package mutating func insert(_ slot: Int) {
        if slot < 64 {
            low |= 1 << UInt64(slot)
            return
        }
        let word = slot / 64 - 1
        while high.count <= word { high.append(0) }
        high[word] |= 1 << UInt64(slot % 64)
    }

    package func contains(_ slot: Int) -> Bool {
        if slot < 64 { return slot >= 0 && low & (1 << UInt64(slot)) != 0 }
        let word = slot / 64 - 1
        return word < high.count && high[word] & (1 << UInt64(slot % 64)) != 0
    }

    /// The slots in the mask, in ascending order.
    package var slots: [Int] {
        var result: [Int] = []
        for (offset, word) in ([low] + high).enumerated() where word != 0 {
            for bit in 0..<64 where word & (1 << UInt64(bit)) != 0 { result.append(offset * 64 + bit) }
        }
        return result
    }
}
