import Foundation

/// A row kept as bytes until a fault fires from it: what a store may answer
/// a fetch whose objects come back as faults (``StoreFetch/returnsObjectsAsFaults``,
/// ``StoreResult/encodedNodes(_:)``).
///
/// Such a fetch reads every row and keeps it in the coordinator's row cache,
/// but only the faults that fire need values. Kept as an
/// ``IncrementalStoreNode``, each row cost a string allocated, checked as
/// UTF-8 and counted for every text column, and an array of values — about
/// a thousand instructions and three heap blocks a row for values most
/// fetches never read. Here a row is a run of bytes: the columns' bytes as
/// the store read them, with the text unchecked; ``node`` turns it into
/// values when a fault fires, exactly as the store would have.
///
/// The bytes are tagged values in the entity's slot order, then a trailer
/// (the version, the run's length, the index of its first kept value). What
/// has no compact form (to-one IDs, which keep their scope alive; decimals,
/// UUIDs, constants) is kept as a ``PropertyValue`` beside them, in order.
///
/// Rows share their heap blocks: a builder fills a chunk of about a kilobyte
/// with consecutive rows (ten or so of a small entity) and starts another
/// when the next row does not fit. A block per row cost a `malloc` and a
/// header per row, about a third of the row's cost. A chunk lives while any
/// of its rows does, so a row the cache keeps after evicting its neighbours
/// holds at most a chunk: a kilobyte, where a row of its own was ~110 bytes.
@_spi(StoreImplementation)
public struct EncodedStoreNode: @unchecked Sendable {
    // @unchecked: `chunk` is a class with mutable state; a chunk is written
    // only by the builder that made it, before any row in it is handed out
    // (a fetch returns its rows when it has read them all), and never after.
    public let objectID: ObjectID
    private let chunk: Chunk
    /// The offset of the row's trailer in the chunk; its bytes end there.
    private let trailer: Int

    /// The row's version (`Z_OPT`).
    public var version: Int64 { Int64(bitPattern: chunk.load(UInt64.self, at: trailer)) }

    @usableFromInline enum Tag: UInt8 {
        case null, integer, double, boolFalse, boolTrue, string, date, data, uri, other
    }

    /// Bytes after a row's values: its version, the values' byte count, its first kept value.
    @usableFromInline static let trailerSize = 16

    /// The row as values, as an ``IncrementalStoreNode`` of the same row.
    public var node: IncrementalStoreNode {
        IncrementalStoreNode(objectID: objectID, values: values, version: version)
    }

    /// The row's values in slot order, decoded.
    public var values: ContiguousArray<PropertyValue> {
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(objectID.entity.slotProperties.count)
        let count = Int(chunk.load(UInt32.self, at: trailer + 8))
        var nextOther = Int(chunk.load(UInt32.self, at: trailer + 12))
        let bytes = UnsafeRawBufferPointer(start: chunk.bytes + (trailer - count), count: count)
        var position = 0
        func word() -> UInt64 {
            defer { position += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        }
        func run() -> UnsafeRawBufferPointer {
            let count = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self)))
            defer { position += 4 + count }
            return UnsafeRawBufferPointer(rebasing: bytes[(position + 4)..<(position + 4 + count)])
        }
        while position < bytes.count {
            // Every tag written is a case: the bytes never leave this type.
            let tag = Tag(rawValue: bytes[position]).unsafelyUnwrapped
            position += 1
            switch tag {
            case .null: values.append(.null)
            case .integer: values.append(.integer(Int64(bitPattern: word())))
            case .double: values.append(.double(Double(bitPattern: word())))
            case .boolFalse: values.append(.bool(false))
            case .boolTrue: values.append(.bool(true))
            case .string: values.append(.string(String(decoding: run(), as: UTF8.self)))
            case .date: values.append(.date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: word()))))
            case .data: values.append(.data(Data(run())))
            case .uri: values.append(URL(string: String(decoding: run(), as: UTF8.self)).map(PropertyValue.uri) ?? .null)
            case .other:
                values.append(chunk.others[nextOther])
                nextOther += 1
            }
        }
        return values
    }

    /// Consecutive rows' bytes, and their values without a compact form.
    /// Written by one builder while it fills it; never changed after.
    @usableFromInline final class Chunk {
        /// The usual size: a large row gets a chunk of its own size.
        static let size = 1024

        @usableFromInline let bytes: UnsafeMutableRawPointer
        @usableFromInline let capacity: Int
        @usableFromInline @exclusivity(unchecked) var others = ContiguousArray<PropertyValue>()

        init(capacity: Int) {
            self.capacity = capacity
            bytes = .allocate(byteCount: capacity, alignment: 8)
        }

        deinit { bytes.deallocate() }

        @inline(__always)
        func load(_: UInt64.Type, at offset: Int) -> UInt64 {
            UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        }

        @inline(__always)
        func load(_: UInt32.Type, at offset: Int) -> UInt32 {
            UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        }
    }

    /// Builds encoded rows one at a time, into chunks it fills one after another.
    ///
    /// The appends are inlinable: a store calls one per column of every row
    /// it reads, from another module, where a call cost more than the append.
    public final class Builder {
        // `@exclusivity(unchecked)`: a builder belongs to the one decoder that
        // made it, and each value appended reads and writes these several
        // times; checked, each access was a call into the runtime.
        @usableFromInline @exclusivity(unchecked) var chunk: Chunk
        /// Where the row being built starts in the chunk, and where its next byte goes.
        @exclusivity(unchecked) private var start = 0
        @usableFromInline @exclusivity(unchecked) var end = 0
        /// The index of the row's first kept value in the chunk's `others`.
        @exclusivity(unchecked) private var firstOther = 0

        public init() {
            chunk = Chunk(capacity: Chunk.size)
        }

        @inlinable public func appendNull() { put(.null) }

        @inlinable public func appendInteger(_ value: Int64) { put(.integer, word: UInt64(bitPattern: value)) }

        @inlinable public func appendDouble(_ value: Double) { put(.double, word: value.bitPattern) }

        @inlinable public func appendBool(_ value: Bool) { put(value ? .boolTrue : .boolFalse) }

        /// A date as its seconds since the reference date, as the store keeps it.
        @inlinable public func appendDate(secondsSinceReferenceDate value: Double) { put(.date, word: value.bitPattern) }

        /// Text as the store read it: checked as UTF-8 (and repaired, as
        /// `String(decoding:as:)` does) only when the row is decoded.
        @inlinable public func appendString(utf8 text: UnsafeRawBufferPointer) { put(.string, run: text) }

        @inlinable public func appendData(_ data: UnsafeRawBufferPointer) { put(.data, run: data) }

        /// A URL's text: the value is `URL(string:)` of it, or null if it is not one.
        @inlinable public func appendURI(utf8 text: UnsafeRawBufferPointer) { put(.uri, run: text) }

        /// Any value, kept as it is.
        public func append(_ value: PropertyValue) {
            put(.other)
            chunk.others.append(value)
        }

        /// The row built since the last call; the builder starts the next.
        /// The ID moves into the row (borrowed, it was retained there and
        /// released by the caller: two atomic operations a row).
        public func finish(objectID: consuming ObjectID, version: Int64) -> EncodedStoreNode {
            reserve(EncodedStoreNode.trailerSize)
            let bytes = chunk.bytes
            // Values are shorter than SQLite's SQLITE_MAX_LENGTH (at most 2 GB), and so are rows: the counts fit.
            bytes.storeBytes(of: UInt64(bitPattern: version).littleEndian, toByteOffset: end, as: UInt64.self)
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: end - start).littleEndian, toByteOffset: end + 8, as: UInt32.self)
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: firstOther).littleEndian, toByteOffset: end + 12, as: UInt32.self)
            let node = EncodedStoreNode(objectID: consume objectID, chunk: chunk, trailer: end)
            end += EncodedStoreNode.trailerSize
            start = end
            firstOther = chunk.others.count
            return node
        }

        @inlinable @inline(__always)
        func reserve(_ more: Int) {
            if end + more > chunk.capacity { startChunk(more) }
        }

        /// Moves the row being built into a new chunk with room for `more` bytes after it.
        @usableFromInline func startChunk(_ more: Int) {
            let row = end - start
            let next = Chunk(capacity: max(Chunk.size, row + more + EncodedStoreNode.trailerSize))
            next.bytes.copyMemory(from: chunk.bytes + start, byteCount: row)
            if firstOther < chunk.others.count {
                next.others.append(contentsOf: chunk.others[firstOther...])
                chunk.others.removeSubrange(firstOther...)
            }
            chunk = next
            start = 0
            end = row
            firstOther = 0
        }

        @inlinable @inline(__always)
        func put(_ tag: Tag) {
            reserve(1)
            chunk.bytes.storeBytes(of: tag.rawValue, toByteOffset: end, as: UInt8.self)
            end += 1
        }

        @inlinable @inline(__always)
        func put(_ tag: Tag, word: UInt64) {
            reserve(9)
            let bytes = chunk.bytes
            bytes.storeBytes(of: tag.rawValue, toByteOffset: end, as: UInt8.self)
            bytes.storeBytes(of: word.littleEndian, toByteOffset: end + 1, as: UInt64.self)
            end += 9
        }

        @inlinable @inline(__always)
        func put(_ tag: Tag, run: UnsafeRawBufferPointer) {
            reserve(5 + run.count)
            let bytes = chunk.bytes
            bytes.storeBytes(of: tag.rawValue, toByteOffset: end, as: UInt8.self)
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: run.count).littleEndian, toByteOffset: end + 1, as: UInt32.self)
            if let base = run.baseAddress, run.count > 0 { (bytes + end + 5).copyMemory(from: base, byteCount: run.count) }
            end += 5 + run.count
        }
    }
}
