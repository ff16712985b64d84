// MARK: - Telling an upsert chunk's keys apart without hashing them as values

/// Whether the keys of an upsert's chunk are all different, told by a 64-bit
/// hash of each in a table of its own: no `Hasher`, no `PropertyValue`
/// hashed.
///
/// ```swift
/// if KeyDistinctness.areDistinct(values) {
///     // each key once: the lookup's list is the keys as they are
/// }
/// ```
///
/// Why: a `Set<PropertyValue>` cost ~600 instructions a key (SipHash over a
/// string's bytes, the set's probing through `PropertyValue`'s `==`), and the
/// lookup's key list tested its elements again; this test costs ~225, and the
/// lookup is then told (``FetchPredicate/listIsDistinct``) rather than
/// testing again.
///
/// The answer errs one way only: `true` means every key differs from every
/// other as `PropertyValue`'s `==` tells them (what a set would say);
/// `false` may also mean "not known" — a key that is neither an ASCII string
/// nor an integer, or two keys with one hash — and the caller groups the keys
/// in a set. Strings count only when all of them are ASCII: two strings of
/// different bytes can still be equal in Swift (canonical equivalence:
/// "\u{212A}" KELVIN SIGN equals "K"), never two ASCII ones.
enum KeyDistinctness {
    static func areDistinct(_ values: [PropertyValue]) -> Bool {
        // A power of two at least twice the count: short probe runs.
        var capacity = 16
        while capacity < values.count * 2 { capacity <<= 1 }
        let shift = UInt64(64 - capacity.trailingZeroBitCount)
        let mask = capacity - 1
        var table = [UInt64](repeating: 0, count: capacity)
        var isText: Bool?
        return table.withUnsafeMutableBufferPointer { table in
            for value in values {
                var hash: UInt64
                switch value {
                case .string(let string) where isText != false:
                    isText = true
                    var bytes = string
                    guard let hashed = bytes.withUTF8({ Self.asciiHash($0) }) else { return false }
                    hash = hashed
                case .integer(let number) where isText != true:
                    isText = false
                    hash = UInt64(bitPattern: number)
                default:
                    return false
                }
                // 0 marks an empty bucket: a key hashing to it shares the hash of 1 (a false repeat at worst).
                if hash == 0 { hash = 1 }
                var bucket = Int(truncatingIfNeeded: (hash &* 0x9E37_79B9_7F4A_7C15) >> shift)
                while table[bucket] != 0 {
                    if table[bucket] == hash { return false }
                    bucket = (bucket + 1) & mask
                }
                table[bucket] = hash
            }
            return true
        }
    }

    /// FNV-1a of the bytes, nil when one is not ASCII.
    private static func asciiHash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var all: UInt8 = 0
        for byte in bytes {
            all |= byte
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return all < 0x80 ? hash : nil
    }
}
