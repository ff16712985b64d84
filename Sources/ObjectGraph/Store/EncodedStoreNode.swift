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
/// The bytes are tagged values in the entity's slot order — integers as
/// zigzag varints, text and blobs after their length as a varint — then a
/// trailer: the index of the row's first kept value (only if it has any),
/// the version in as few bytes as it needs, and a byte that says which of
/// them are there. What has no compact form (to-one IDs, which keep their
/// scope alive; decimals, UUIDs, constants) is kept as a ``PropertyValue``
/// beside them, in order. Fixed-size lengths, integers and a fixed trailer
/// made a row ~20 bytes longer: a fifth of a ticker's row.
///
/// Rows share their heap blocks: a builder fills a chunk of about a kilobyte
/// with consecutive rows of one entity and store (fifteen or so of a small
/// entity, which the chunk names once for all of them) and starts another
/// when the next row does not fit or is of another entity or store. A block
/// per row cost a `malloc` and a header per row, about a third of the row's cost. A chunk lives while any
/// of its rows does, so a row the cache keeps after evicting its neighbours
/// holds at most a chunk: a kilobyte, where a row of its own was ~110 bytes.
@_spi(StoreImplementation)
public struct EncodedStoreNode: @unchecked Sendable {
    // @unchecked: `chunk` is a class with mutable state; a chunk is written
    // only by the builder that made it, before any row in it is handed out
    // (a fetch returns its rows when it has read them all), and never after.

    /// First, so that the row cache's enum of rows finds its tag in the
    /// reference's spare bits (see ``RowCache``), and stays three words.
    private let chunk: Chunk
    /// The row's key: its entity and store are its chunk's (``Chunk/scope``),
    /// rather than a reference to them in every row (eight bytes, and a
    /// retain and a release of the scope a row).
    private let primaryKey: Int64
    /// Where the row's bytes start and end in the chunk: a chunk is never
    /// larger than a row's values can make it (SQLite's rows are shorter than
    /// 2 GB), so 32 bits each.
    private let start: UInt32
    private let end: UInt32

    /// The row's object.
    public var objectID: ObjectID { ObjectID(scope: objectIDScope, primaryKey: primaryKey) }

    /// The scope of ``objectID``, read without making the ID.
    package var objectIDScope: ObjectIDScope { chunk.scope.unsafelyUnwrapped }

    /// The bits of ``objectID``'s key (``ObjectID/rawKey``).
    package var objectIDKey: UInt64 { UInt64(bitPattern: primaryKey) }

    @usableFromInline enum Tag: UInt8 {
        case null, integer, double, boolFalse, boolTrue, string, date, data, uri, other
    }

    /// The trailer's last byte: the version's byte count in its low four
    /// bits, and this bit when the first kept value's index is there.
    @usableFromInline static let hasOthersFlag: UInt8 = 0x10
    /// The longest trailer: the index, eight bytes of version and the byte.
    @usableFromInline static let maximumTrailerSize = 13

    /// The trailer: the version, the end of the values, and the index of the
    /// row's first kept value in the chunk (0 if it has none).
    private var trailer: (version: Int64, valuesEnd: Int, firstOther: Int) {
        let bytes = chunk.bytes
        let last = bytes.load(fromByteOffset: Int(end) - 1, as: UInt8.self)
        let versionSize = Int(last & 0xF)
        var position = Int(end) - 1 - versionSize
        var version: UInt64 = 0
        for index in 0..<versionSize {
            version |= UInt64(bytes.load(fromByteOffset: position + index, as: UInt8.self)) << (8 * index)
        }
        var firstOther = 0
        if last & Self.hasOthersFlag != 0 {
            position -= 4
            firstOther = Int(chunk.load(UInt32.self, at: position))
        }
        return (Int64(bitPattern: version), position, firstOther)
    }

    /// The row's version (`Z_OPT`).
    public var version: Int64 { trailer.version }

    /// The row as values, as an ``IncrementalStoreNode`` of the same row.
    public var node: IncrementalStoreNode {
        let trailer = trailer
        return IncrementalStoreNode(objectID: objectID, values: values(before: trailer.valuesEnd, firstOther: trailer.firstOther),
                                    version: trailer.version)
    }

    /// The row's values in slot order, decoded.
    public var values: ContiguousArray<PropertyValue> {
        let trailer = trailer
        return values(before: trailer.valuesEnd, firstOther: trailer.firstOther)
    }

    private func values(before valuesEnd: Int, firstOther: Int) -> ContiguousArray<PropertyValue> {
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(objectIDScope.entity.slotProperties.count)
        var nextOther = firstOther
        let bytes = UnsafeRawBufferPointer(start: chunk.bytes + Int(start), count: valuesEnd - Int(start))
        var position = 0
        func word() -> UInt64 {
            defer { position += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        }
        func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }
        func run() -> UnsafeRawBufferPointer {
            let count = Int(varint())
            defer { position += count }
            return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)])
        }
        while position < bytes.count {
            // Every tag written is a case: the bytes never leave this type.
            let tag = Tag(rawValue: bytes[position]).unsafelyUnwrapped
            position += 1
            switch tag {
            case .null: values.append(.null)
            case .integer:
                let zigzag = varint()
                values.append(.integer(Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)))
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
        /// The entity and store of every row in the chunk: set by the first
        /// row finished in it; a row of another starts a chunk of its own.
        @usableFromInline @exclusivity(unchecked) var scope: ObjectIDScope?

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

        /// As a zigzag varint: small magnitudes, the usual ones, take a byte or two.
        @inlinable public func appendInteger(_ value: Int64) {
            reserve(11)
            chunk.bytes.storeBytes(of: Tag.integer.rawValue, toByteOffset: end, as: UInt8.self)
            end += 1
            putVarint(UInt64(bitPattern: value << 1 ^ value >> 63))
        }

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
        public func finish(objectID: consuming ObjectID, version: Int64) -> EncodedStoreNode {
            finish(scope: objectID.scope, primaryKey: Int64(bitPattern: objectID.rawKey), version: version)
        }

        /// ``finish(objectID:version:)`` of the row of `primaryKey` in `scope`
        /// (made by ``EntityDescription/idScope(in:)``): no ID made per row.
        public func finish(scope: ObjectIDScope, primaryKey: Int64, version: Int64) -> EncodedStoreNode {
            if let current = chunk.scope, current !== scope {
                startChunk(EncodedStoreNode.maximumTrailerSize)
            } else {
                reserve(EncodedStoreNode.maximumTrailerSize)
            }
            if chunk.scope == nil { chunk.scope = scope }
            let bytes = chunk.bytes
            var flags: UInt8 = 0
            if firstOther < chunk.others.count {
                bytes.storeBytes(of: UInt32(truncatingIfNeeded: firstOther).littleEndian, toByteOffset: end, as: UInt32.self)
                end += 4
                flags |= EncodedStoreNode.hasOthersFlag
            }
            var remaining = UInt64(bitPattern: version)
            while remaining != 0 {
                bytes.storeBytes(of: UInt8(truncatingIfNeeded: remaining), toByteOffset: end, as: UInt8.self)
                end += 1
                flags += 1
                remaining >>= 8
            }
            bytes.storeBytes(of: flags, toByteOffset: end, as: UInt8.self)
            end += 1
            // A chunk is at most the usual size or one row's (see `startChunk`): both offsets fit.
            let node = EncodedStoreNode(chunk: chunk, primaryKey: primaryKey,
                                        start: UInt32(truncatingIfNeeded: start), end: UInt32(truncatingIfNeeded: end))
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
            let capacity = max(Chunk.size, row + more + EncodedStoreNode.maximumTrailerSize)
            // SQLite's rows are shorter than 2 GB; ours add a few bytes a column.
            precondition(capacity <= UInt32.max, "a row of \(capacity) bytes is longer than any store's row can be")
            let next = Chunk(capacity: capacity)
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
            reserve(11 + run.count)
            let bytes = chunk.bytes
            bytes.storeBytes(of: tag.rawValue, toByteOffset: end, as: UInt8.self)
            end += 1
            putVarint(UInt64(run.count))
            if let base = run.baseAddress, run.count > 0 { (bytes + end).copyMemory(from: base, byteCount: run.count) }
            end += run.count
        }

        /// Seven bits a byte, low first, the high bit set on all but the
        /// last; the caller reserved room for ten.
        @inlinable @inline(__always)
        func putVarint(_ value: UInt64) {
            let bytes = chunk.bytes
            var remaining = value
            while remaining >= 0x80 {
                bytes.storeBytes(of: UInt8(truncatingIfNeeded: remaining) | 0x80, toByteOffset: end, as: UInt8.self)
                end += 1
                remaining >>= 7
            }
            bytes.storeBytes(of: UInt8(truncatingIfNeeded: remaining), toByteOffset: end, as: UInt8.self)
            end += 1
        }
    }
}
