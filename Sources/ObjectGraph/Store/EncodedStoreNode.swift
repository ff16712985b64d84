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
/// fetches never read. Here a row is one buffer: the columns' bytes as the
/// store read them, with the text unchecked; ``node`` turns it into values
/// when a fault fires, exactly as the store would have.
///
/// The bytes are tagged values in the entity's slot order. What has no
/// compact form (to-one IDs, which keep their scope alive; decimals, UUIDs,
/// constants) is kept as a ``PropertyValue`` beside them, in order.
@_spi(StoreImplementation)
public struct EncodedStoreNode: @unchecked Sendable {
    // @unchecked: `row` is a `ManagedBuffer`, which the standard library
    // marks non-Sendable; this one is never changed after it is built.
    public let objectID: ObjectID
    /// The row's version (`Z_OPT`).
    public let version: Int64
    private let row: EncodedRow

    fileprivate enum Tag: UInt8 {
        case null, integer, double, boolFalse, boolTrue, string, date, data, uri, other
    }

    /// The row as values, as an ``IncrementalStoreNode`` of the same row.
    public var node: IncrementalStoreNode {
        IncrementalStoreNode(objectID: objectID, values: values, version: version)
    }

    /// The row's values in slot order, decoded.
    public var values: ContiguousArray<PropertyValue> {
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(objectID.entity.slotProperties.count)
        row.withUnsafeMutablePointers { header, start in
            let bytes = UnsafeRawBufferPointer(start: start, count: header.pointee.count)
            var position = 0
            var nextOther = 0
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
                    values.append(header.pointee.others[nextOther])
                    nextOther += 1
                }
            }
        }
        return values
    }

    /// One heap block a row: its bytes, and the values without a compact form.
    /// Never changed once ``Builder/finish(objectID:version:)`` has filled it.
    private final class EncodedRow: ManagedBuffer<EncodedRow.Header, UInt8> {
        struct Header {
            var count: Int
            var others: ContiguousArray<PropertyValue>
        }
    }

    /// Builds encoded rows one at a time, in a buffer it keeps between rows.
    public final class Builder {
        private var buffer: UnsafeMutableRawPointer
        private var capacity = 256
        private var count = 0
        private var others = ContiguousArray<PropertyValue>()

        public init() {
            buffer = .allocate(byteCount: capacity, alignment: 8)
        }

        deinit { buffer.deallocate() }

        public func appendNull() { put(.null) }

        public func appendInteger(_ value: Int64) { put(.integer, word: UInt64(bitPattern: value)) }

        public func appendDouble(_ value: Double) { put(.double, word: value.bitPattern) }

        public func appendBool(_ value: Bool) { put(value ? .boolTrue : .boolFalse) }

        /// A date as its seconds since the reference date, as the store keeps it.
        public func appendDate(secondsSinceReferenceDate value: Double) { put(.date, word: value.bitPattern) }

        /// Text as the store read it: checked as UTF-8 (and repaired, as
        /// `String(decoding:as:)` does) only when the row is decoded.
        public func appendString(utf8 text: UnsafeRawBufferPointer) { put(.string, run: text) }

        public func appendData(_ data: UnsafeRawBufferPointer) { put(.data, run: data) }

        /// A URL's text: the value is `URL(string:)` of it, or null if it is not one.
        public func appendURI(utf8 text: UnsafeRawBufferPointer) { put(.uri, run: text) }

        /// Any value, kept as it is.
        public func append(_ value: PropertyValue) {
            put(.other)
            others.append(value)
        }

        /// The row built since the last call; the builder starts the next.
        public func finish(objectID: ObjectID, version: Int64) -> EncodedStoreNode {
            let bytes = count
            var kept = ContiguousArray<PropertyValue>()
            if !others.isEmpty { swap(&kept, &others) }
            let row = unsafeDowncast(EncodedRow.create(minimumCapacity: bytes) { _ in
                EncodedRow.Header(count: bytes, others: kept)
            }, to: EncodedRow.self)
            row.withUnsafeMutablePointerToElements { $0.initialize(from: buffer.assumingMemoryBound(to: UInt8.self), count: bytes) }
            count = 0
            return EncodedStoreNode(objectID: objectID, version: version, row: row)
        }

        @inline(__always)
        private func reserve(_ more: Int) {
            if count + more > capacity { grow(to: count + more) }
        }

        private func grow(to needed: Int) {
            while capacity < needed { capacity *= 2 }
            let larger = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
            larger.copyMemory(from: buffer, byteCount: count)
            buffer.deallocate()
            buffer = larger
        }

        @inline(__always)
        private func put(_ tag: Tag) {
            reserve(1)
            buffer.storeBytes(of: tag.rawValue, toByteOffset: count, as: UInt8.self)
            count += 1
        }

        @inline(__always)
        private func put(_ tag: Tag, word: UInt64) {
            reserve(9)
            buffer.storeBytes(of: tag.rawValue, toByteOffset: count, as: UInt8.self)
            buffer.storeBytes(of: word.littleEndian, toByteOffset: count + 1, as: UInt64.self)
            count += 9
        }

        @inline(__always)
        private func put(_ tag: Tag, run: UnsafeRawBufferPointer) {
            // SQLite's values are shorter than 2 GB (SQLITE_MAX_LENGTH): the count fits.
            reserve(5 + run.count)
            buffer.storeBytes(of: tag.rawValue, toByteOffset: count, as: UInt8.self)
            buffer.storeBytes(of: UInt32(truncatingIfNeeded: run.count).littleEndian, toByteOffset: count + 1, as: UInt32.self)
            if let base = run.baseAddress, run.count > 0 { (buffer + count + 5).copyMemory(from: base, byteCount: run.count) }
            count += 5 + run.count
        }
    }
}
