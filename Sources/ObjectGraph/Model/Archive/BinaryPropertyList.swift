import Foundation

/// Reads and writes Apple's binary property list format (`bplist00`).
///
/// ```swift
/// let value = try BinaryPropertyList.decode(blob)       // PropertyListValue
/// let bytes = BinaryPropertyList.encode(value)          // bplist00 again
/// ```
///
/// Why hand-written: Foundation on Linux parses binary property lists, but hands
/// each `UID` back as the internal `_NSKeyedArchiverUID` class, which has no
/// public accessor for its number. A keyed archive (a Core Data model cache,
/// a transformable attribute's bytes) is a graph of such UIDs, so it cannot be
/// walked through Foundation's parser.
///
/// The reader takes untrusted bytes (a store's blob) and never traps or hangs:
/// every offset, length and reference is checked with overflow-safe arithmetic;
/// containers nest at most ``maximumDepth`` deep; a container that contains
/// itself is an error; the object count is bounded by the data's length, and
/// memory follows the objects actually read, not the count the trailer claims
/// (a table of millions of entries costs nothing until they are referenced); the
/// values the object table expands to (a container referenced twice is read
/// twice) are bounded by a multiple of the data's length, so a table of shared
/// containers cannot blow up exponentially. Every failure is a
/// ``PropertyListError`` naming the byte offset or object index.
///
/// Format reference: Apple's `CFBinaryPList.c` (the comment at its top) and
/// Python's `plistlib`, whose binary writer ``encode(_:)`` mirrors.
///
/// ## Topics
/// - ``decode(_:)``
/// - ``encode(_:)``
package enum BinaryPropertyList {
    /// How deep containers may nest (the top object has depth 1).
    ///
    /// A keyed archive nests four deep (its objects refer to each other by UID,
    /// not by nesting), and property lists of settings a few more. The reader
    /// recurses, and 64 levels take about 350 KB of stack in a debug build
    /// (5.5 KB a level, measured), so even a 512 KiB secondary thread's stack
    /// holds them, where 256 overflowed it.
    package static let maximumDepth = 64

    /// Reads a binary property list.
    ///
    /// Sets read as `.array`. `null` and `fill` objects, dictionary keys that are
    /// not strings and 128-bit integers outside `Int64` throw.
    ///
    /// - Complexity: O(*n*), *n* = the data's length.
    package static func decode(_ data: Data) throws(PropertyListError) -> PropertyListValue {
        var reader = try Reader(bytes: [UInt8](data))
        return try reader.readTopObject()
    }
}

// MARK: - Reader

extension BinaryPropertyList {
    /// The decoding state: the bytes, the trailer, and what has been read.
    struct Reader {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let topObject: Int
        let offsetTableStart: Int
        /// Decoded objects with the number of values each expands to, by index.
        /// Dictionaries rather than arrays of `objectCount`: the count comes from
        /// the trailer, and the table behind it may be a run of zeros that inflated
        /// from a few bytes (a model cache is DEFLATE).
        private var cache: [Int: (value: PropertyListValue, size: Int)] = [:]
        /// Objects whose decoding has begun and not finished: a reference to one is a cycle.
        private var inProgress: Set<Int> = []
        /// Values still allowed to be produced (counting every expansion of a shared container).
        private var budget: Int

        private static let trailerSize = 32
        private static let headerSize = 8

        init(bytes: [UInt8]) throws(PropertyListError) {
            self.bytes = bytes
            let n = bytes.count
            guard n >= Self.headerSize + Self.trailerSize + 1,
                  bytes[0..<8].elementsEqual("bplist00".utf8) else {
                throw PropertyListError(.notBinaryPropertyList,
                                        message: n >= 8 && bytes[0..<6].elementsEqual("bplist".utf8)
                                            ? "header \"\(String(decoding: bytes[0..<8], as: UTF8.self))\" at offset 0 is not \"bplist00\""
                                            : "data (\(n) bytes) does not start with \"bplist00\" at offset 0 followed by objects and a 32-byte trailer")
            }
            let trailer = n - Self.trailerSize
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let count = Self.bigEndian(bytes, at: trailer + 8, size: 8)
            let top = Self.bigEndian(bytes, at: trailer + 16, size: 8)
            let tableStart = Self.bigEndian(bytes, at: trailer + 24, size: 8)
            func invalid(_ message: String) -> PropertyListError {
                PropertyListError(.invalidTrailer, message: "trailer at offset \(trailer): \(message)")
            }
            guard (1...8).contains(offsetSize) else { throw invalid("offset size \(offsetSize) is not 1 to 8") }
            guard (1...8).contains(referenceSize) else { throw invalid("object reference size \(referenceSize) is not 1 to 8") }
            // Each object takes at least one byte before the table, so the count is bounded by the length.
            guard count >= 1, count <= UInt64(n) else { throw invalid("object count \(count) is impossible for \(n) bytes") }
            guard top < count else { throw invalid("top object \(top) is not below the object count \(count)") }
            guard tableStart >= UInt64(Self.headerSize + 1), tableStart <= UInt64(trailer) else {
                throw invalid("offset table offset \(tableStart) is outside the objects (9 to \(trailer))")
            }
            objectCount = Int(count)
            topObject = Int(top)
            offsetTableStart = Int(tableStart)
            let (tableLength, overflow) = objectCount.multipliedReportingOverflow(by: offsetSize)
            guard !overflow, tableLength <= trailer - offsetTableStart else {
                throw invalid("offset table of \(objectCount) × \(offsetSize) bytes at offset \(offsetTableStart) runs past the trailer")
            }
            let (scaled, scaleOverflow) = n.multipliedReportingOverflow(by: 16)
            budget = scaleOverflow ? Int.max : scaled + 1024
        }

        mutating func readTopObject() throws(PropertyListError) -> PropertyListValue {
            try readObject(topObject, depth: 1).value
        }

        // MARK: Objects

        /// The byte offset of object `index`, checked to lie among the objects.
        private func offset(ofObject index: Int) throws(PropertyListError) -> Int {
            let entry = offsetTableStart + index * offsetSize   // bounded by the init's checks
            let offset = Self.bigEndian(bytes, at: entry, size: offsetSize)
            guard offset >= UInt64(Self.headerSize), offset < UInt64(offsetTableStart) else {
                throw PropertyListError(.outOfBounds,
                                        message: "object \(index): offset \(offset) is outside the objects (8 to \(offsetTableStart - 1))")
            }
            return Int(offset)
        }

        private mutating func readObject(_ index: Int, depth: Int) throws(PropertyListError) -> (value: PropertyListValue, size: Int) {
            if let cached = cache[index] {
                try spend(cached.size, index: index)
                return cached
            }
            guard !inProgress.contains(index) else {
                throw PropertyListError(.cycle, message: "object \(index) contains itself")
            }
            guard depth <= BinaryPropertyList.maximumDepth else {
                throw PropertyListError(.tooComplex,
                                        message: "object \(index): containers nest deeper than \(BinaryPropertyList.maximumDepth)")
            }
            inProgress.insert(index)
            defer { inProgress.remove(index) }
            let start = try offset(ofObject: index)
            let result = try readObject(at: start, index: index, depth: depth)
            cache[index] = result
            return result
        }

        /// Counts `size` values against the budget.
        private mutating func spend(_ size: Int, index: Int) throws(PropertyListError) {
            guard size <= budget else {
                throw PropertyListError(.tooComplex,
                                        message: "object \(index): shared containers expand to more values than \(bytes.count) bytes can hold")
            }
            budget -= size
        }

        /// Decodes the object at `start` by its marker's high nibble.
        private mutating func readObject(at start: Int, index: Int, depth: Int) throws(PropertyListError) -> (value: PropertyListValue, size: Int) {
            let value: PropertyListValue
            switch bytes[start] >> 4 {
            case 0x0: value = try readSingleByteObject(at: start, index: index)
            case 0x1: value = .integer(try readInteger(at: start, index: index))
            case 0x2: value = .real(try readReal(at: start, index: index))
            case 0x3: value = .date(try readDate(at: start, index: index))
            case 0x4: value = .data(try readData(at: start, index: index))
            case 0x5: value = .string(try readASCIIString(at: start, index: index))
            case 0x6: value = .string(try readUTF16String(at: start, index: index))
            case 0x8: value = .uid(try readUID(at: start, index: index))
            case 0xA, 0xC: return try readArray(at: start, index: index, depth: depth)
            case 0xD: return try readDictionary(at: start, index: index, depth: depth)
            default: throw unknownMarker(at: start, index: index)
            }
            try spend(1, index: index)
            return (value, 1)
        }

        /// An error about object `index`, which starts at byte `start`: every
        /// message about an object names both, so they read alike.
        private func objectError(_ code: PropertyListError.Code, _ message: String, index: Int, start: Int) -> PropertyListError {
            PropertyListError(code, message: "object \(index) at offset \(start): \(message)")
        }

        private func unknownMarker(at start: Int, index: Int) -> PropertyListError {
            objectError(.invalidObject, "unknown marker 0x\(String(bytes[start], radix: 16))", index: index, start: start)
        }

        // MARK: Scalars

        /// A marker that is the whole object (`0x0n`): `false`, `true`, or the
        /// null and fill objects, which have no value.
        private func readSingleByteObject(at start: Int, index: Int) throws(PropertyListError) -> PropertyListValue {
            switch bytes[start] & 0x0F {
            case 0x8: return .bool(false)
            case 0x9: return .bool(true)
            case 0x0: throw objectError(.unsupportedValue, "null objects have no property list value", index: index, start: start)
            case 0xF: throw objectError(.unsupportedValue, "fill bytes are not a value", index: index, start: start)
            default: throw unknownMarker(at: start, index: index)
            }
        }

        /// An integer object (`0x1n`): 1, 2 and 4 bytes unsigned, 8 bytes signed,
        /// 16 bytes signed when the value fits `Int64`.
        private func readInteger(at start: Int, index: Int) throws(PropertyListError) -> Int64 {
            let low = Int(bytes[start] & 0x0F)
            guard low <= 4 else {
                throw objectError(.invalidObject, "an integer of \(1 << min(low, 15)) bytes (only 1 to 16)", index: index, start: start)
            }
            let size = 1 << low
            let content = try range(start + 1, size, index: index, start: start)
            if size <= 8 {
                let raw = Self.bigEndian(bytes, at: content.lowerBound, size: size)
                return size == 8 ? Int64(bitPattern: raw) : Int64(raw)
            }
            let highBits = Self.bigEndian(bytes, at: content.lowerBound, size: 8)
            let lowBits = Self.bigEndian(bytes, at: content.lowerBound + 8, size: 8)
            let value = Int64(bitPattern: lowBits)
            // Fits when the high half is the sign extension of the low half.
            guard highBits == (value < 0 ? UInt64.max : 0) else {
                throw objectError(.unsupportedValue, "a 128-bit integer beyond Int64", index: index, start: start)
            }
            return value
        }

        /// A real object (`0x2n`): a big-endian `Float` or `Double`.
        private func readReal(at start: Int, index: Int) throws(PropertyListError) -> Double {
            let low = Int(bytes[start] & 0x0F)
            guard low == 2 || low == 3 else {
                throw objectError(.invalidObject, "a real of \(1 << low) bytes (only 4 and 8)", index: index, start: start)
            }
            let size = 1 << low
            let bits = Self.bigEndian(bytes, at: try range(start + 1, size, index: index, start: start).lowerBound, size: size)
            return size == 4 ? Double(Float(bitPattern: UInt32(bits))) : Double(bitPattern: bits)
        }

        /// A date object (`0x33`): a `Double` of seconds since 2001-01-01.
        private func readDate(at start: Int, index: Int) throws(PropertyListError) -> Date {
            guard bytes[start] & 0x0F == 3 else {
                throw objectError(.invalidObject, "a date of marker 0x\(String(bytes[start], radix: 16)) (only 0x33)", index: index, start: start)
            }
            let bits = Self.bigEndian(bytes, at: try range(start + 1, 8, index: index, start: start).lowerBound, size: 8)
            return Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
        }

        /// A data object (`0x4n`).
        private func readData(at start: Int, index: Int) throws(PropertyListError) -> Data {
            let (count, contentStart) = try readCount(at: start, index: index)
            return Data(bytes[try range(contentStart, count, index: index, start: start)])
        }

        /// An ASCII string object (`0x5n`), which holds no byte above 0x7F.
        private func readASCIIString(at start: Int, index: Int) throws(PropertyListError) -> String {
            let (count, contentStart) = try readCount(at: start, index: index)
            let content = bytes[try range(contentStart, count, index: index, start: start)]
            guard content.allSatisfy({ $0 < 0x80 }) else {
                throw objectError(.invalidObject, "an ASCII string holds a byte above 0x7F", index: index, start: start)
            }
            return String(decoding: content, as: UTF8.self)
        }

        /// A UTF-16 string object (`0x6n`): big-endian units, counted in units.
        private func readUTF16String(at start: Int, index: Int) throws(PropertyListError) -> String {
            let (count, contentStart) = try readCount(at: start, index: index)
            let (length, overflow) = count.multipliedReportingOverflow(by: 2)
            guard !overflow else {
                throw objectError(.invalidObject, "a UTF-16 string of \(count) units is too long", index: index, start: start)
            }
            let content = try range(contentStart, length, index: index, start: start)
            let units = stride(from: content.lowerBound, to: content.upperBound, by: 2).map {
                UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])
            }
            guard let string = String(validating: units, as: UTF16.self) else {
                throw objectError(.invalidObject, "a UTF-16 string holds an unpaired surrogate", index: index, start: start)
            }
            return string
        }

        /// A UID object (`0x8n`): a keyed archive's reference to one of its objects.
        private func readUID(at start: Int, index: Int) throws(PropertyListError) -> Int {
            let size = Int(bytes[start] & 0x0F) + 1
            let content = try range(start + 1, size, index: index, start: start)
            // Up to 16 bytes: the bytes beyond the last 8 must be zero.
            guard content.dropLast(min(size, 8)).allSatisfy({ bytes[$0] == 0 }) else {
                throw objectError(.unsupportedValue, "a UID of \(size) bytes beyond 64 bits", index: index, start: start)
            }
            let uid = Self.bigEndian(bytes, at: content.upperBound - min(size, 8), size: min(size, 8))
            guard uid <= UInt64(Int32.max) else {
                throw objectError(.unsupportedValue, "UID \(uid) is beyond any archive's object count", index: index, start: start)
            }
            return Int(uid)
        }

        // MARK: Containers

        /// An array or set object (`0xAn`, `0xCn`), with the number of values it expands to.
        private mutating func readArray(at start: Int, index: Int, depth: Int) throws(PropertyListError) -> (value: PropertyListValue, size: Int) {
            let (count, contentStart) = try readCount(at: start, index: index)
            let references = try readReferences(count, at: contentStart, index: index, start: start)
            var elements: [PropertyListValue] = []
            elements.reserveCapacity(references.count)
            var size = 1
            for reference in references {
                let element = try readObject(reference, depth: depth + 1)
                elements.append(element.value)
                size += element.size
            }
            try spend(1, index: index)
            return (.array(elements), size)
        }

        /// A dictionary object (`0xDn`): its keys' references, then its values'.
        /// Returns the number of values it expands to, keys included.
        private mutating func readDictionary(at start: Int, index: Int, depth: Int) throws(PropertyListError) -> (value: PropertyListValue, size: Int) {
            let (count, contentStart) = try readCount(at: start, index: index)
            let (doubled, overflow) = count.multipliedReportingOverflow(by: 2)
            guard !overflow else {
                throw objectError(.invalidObject, "a dictionary of \(count) entries is too large", index: index, start: start)
            }
            let references = try readReferences(doubled, at: contentStart, index: index, start: start)
            var dictionary: [String: PropertyListValue] = [:]
            dictionary.reserveCapacity(count)
            var size = 1
            for entry in 0..<count {
                let key = try readObject(references[entry], depth: depth + 1)
                guard case .string(let name) = key.value else {
                    throw objectError(.unsupportedValue, "dictionary key \(entry) (object \(references[entry])) is \(key.value.kindDescription), not a string",
                                      index: index, start: start)
                }
                let element = try readObject(references[count + entry], depth: depth + 1)
                dictionary[name] = element.value   // a repeated key keeps its last value, as plistlib does
                size += key.size + element.size
            }
            try spend(1, index: index)
            return (.dictionary(dictionary), size)
        }

        // MARK: Parts of objects

        /// The count of a variable-length object: the marker's low nibble, or an
        /// integer object after the marker when the nibble is `0xF`; and where the content starts.
        private func readCount(at start: Int, index: Int) throws(PropertyListError) -> (count: Int, contentStart: Int) {
            let low = Int(bytes[start] & 0x0F)
            guard low == 0xF else { return (low, start + 1) }
            let countStart = start + 1
            guard countStart < offsetTableStart, bytes[countStart] >> 4 == 0x1 else {
                throw objectError(.invalidObject, "the count after the marker is not an integer object", index: index, start: start)
            }
            let count = try readInteger(at: countStart, index: index)
            guard count >= 0, count <= Int64(bytes.count) else {
                throw objectError(.outOfBounds, "count \(count) is impossible for \(bytes.count) bytes", index: index, start: start)
            }
            return (Int(count), countStart + 1 + (1 << Int(bytes[countStart] & 0x0F)))
        }

        /// `count` object references from `position`, each checked against the object count.
        private func readReferences(_ count: Int, at position: Int, index: Int, start: Int) throws(PropertyListError) -> [Int] {
            let (length, overflow) = count.multipliedReportingOverflow(by: referenceSize)
            guard !overflow else {
                throw objectError(.outOfBounds, "\(count) references are too many", index: index, start: start)
            }
            let content = try range(position, length, index: index, start: start)
            var references: [Int] = []
            references.reserveCapacity(count)
            for entry in stride(from: content.lowerBound, to: content.upperBound, by: referenceSize) {
                let reference = Self.bigEndian(bytes, at: entry, size: referenceSize)
                guard reference < UInt64(objectCount) else {
                    throw objectError(.outOfBounds, "reference \(reference) past the last object (\(objectCount - 1))", index: index, start: start)
                }
                references.append(Int(reference))
            }
            return references
        }

        /// The bytes `position ..< position + length`, checked to end before the offset table.
        private func range(_ position: Int, _ length: Int, index: Int, start: Int) throws(PropertyListError) -> Range<Int> {
            let (end, overflow) = position.addingReportingOverflow(length)
            guard length >= 0, !overflow, end <= offsetTableStart else {
                throw objectError(.outOfBounds, "\(length) bytes from offset \(position) run past the objects (which end at \(offsetTableStart))", index: index, start: start)
            }
            return position..<end
        }

        /// A big-endian unsigned integer of `size` (1 to 8) bytes; the caller checked the range.
        static func bigEndian(_ bytes: [UInt8], at position: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for byte in bytes[position..<position + size] {
                value = value << 8 | UInt64(byte)
            }
            return value
        }
    }
}
