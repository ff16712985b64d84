// The checksum that ends every chunk (SyncCodec): a damaged byte anywhere in a
// chunk, also inside a value no other check could tell from a good one, is
// reported as such instead of read as another value.

/// CRC-32 (ISO-HDLC, as zlib's `crc32`), which catches every damaged byte
/// and every burst of up to 32 bits.
enum SyncCRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? (value >> 1) ^ 0xEDB8_8320 : value >> 1 }
        return value
    }

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
