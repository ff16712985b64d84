import Foundation

// The bytes of a change as it is stored on the hub and sent between machines:
// a version byte, then varints (zigzag for signed numbers), UUIDs as 16 bytes,
// strings as a length and UTF-8, values as a tag and their bytes. Dictionaries
// are written in key order, so a change has one encoding.
extension SyncChange {
    /// The encoding's version, the first byte.
    static let encodingVersion: UInt8 = 1

    /// The change's bytes (see ``init(encoded:)``).
    public func encoded() -> [UInt8] {
        var writer = SyncByteWriter()
        writer.byte(Self.encodingVersion)
        writer.uuid(objectID)
        writer.string(entity)
        writer.byte(kind.rawValue)
        writer.signed(timestamp.milliseconds)
        writer.unsigned(UInt64(timestamp.counter))
        writer.uuid(timestamp.replica)
        writer.signed(localSequence)
        writer.signed(baseSequence)
        writer.unsigned(UInt64(values.count))
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            writer.string(name)
            writer.value(value)
        }
        for members in [added, removed] {
            writer.unsigned(UInt64(members.count))
            for (name, objects) in members.sorted(by: { $0.key < $1.key }) {
                writer.string(name)
                writer.unsigned(UInt64(objects.count))
                for object in objects.sorted(by: { $0.uuidString < $1.uuidString }) { writer.uuid(object) }
            }
        }
        return writer.bytes
    }

    /// Decodes a change from ``encoded()``'s bytes; throws ``SyncError`` `.corruptChange`
    /// saying what is wrong and at which byte for bytes that are not one.
    public init(encoded bytes: some Collection<UInt8>) throws(SyncError) {
        var reader = SyncByteReader(Array(bytes))
        let version = try reader.byte("version")
        guard version == Self.encodingVersion else {
            throw reader.corrupt("encoding version \(version); this replica reads version \(Self.encodingVersion)")
        }
        let objectID = try reader.uuid("object ID")
        let entity = try reader.string("entity")
        let kindByte = try reader.byte("kind")
        guard let kind = Kind(rawValue: kindByte) else { throw reader.corrupt("kind \(kindByte)") }
        let milliseconds = try reader.signed("timestamp")
        let counter = try reader.unsigned("timestamp counter")
        guard let counter32 = UInt32(exactly: counter) else { throw reader.corrupt("timestamp counter \(counter)") }
        let replica = try reader.uuid("replica")
        let localSequence = try reader.signed("local sequence")
        let baseSequence = try reader.signed("base sequence")
        var values: [String: SyncValue] = [:]
        for _ in 0..<(try reader.count("values")) {
            let name = try reader.string("property name")
            values[name] = try reader.value(name)
        }
        var members: [[String: Set<UUID>]] = []
        for label in ["added", "removed"] {
            var byName: [String: Set<UUID>] = [:]
            for _ in 0..<(try reader.count(label)) {
                let name = try reader.string("relationship name")
                var objects = Set<UUID>()
                for _ in 0..<(try reader.count("\(label) \(name)")) { objects.insert(try reader.uuid("\(label) \(name)")) }
                byName[name] = objects
            }
            members.append(byName)
        }
        guard reader.isAtEnd else { throw reader.corrupt("\(reader.remaining) bytes after the change") }
        self.init(objectID: objectID, entity: entity, kind: kind, values: values, added: members[0], removed: members[1],
                  timestamp: HybridTimestamp(milliseconds: milliseconds, counter: counter32, replica: replica),
                  localSequence: localSequence, baseSequence: baseSequence)
    }
}

/// The value tags of the encoding; never renumbered.
private enum SyncValueTag: UInt8 {
    case null = 0, integer, double, boolFalse, boolTrue, string, date, data, uuid, url, decimal, object
}

/// Writes the encoding's numbers, strings and values; shared by ``SyncChange``
/// and ``SyncObjectState``.
struct SyncByteWriter {
    private(set) var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Overwrites a byte written before (a flags byte known only after what it flags).
    mutating func setByte(_ value: UInt8, at index: Int) { bytes[index] = value }

    mutating func unsigned(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func signed(_ value: Int64) { unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    mutating func uuid(_ value: UUID) { withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) } }

    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        unsigned(UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    mutating func data(_ value: Data) {
        unsigned(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func value(_ value: SyncValue) {
        switch value {
        case .null: byte(SyncValueTag.null.rawValue)
        case .integer(let number): byte(SyncValueTag.integer.rawValue); signed(number)
        case .double(let number): byte(SyncValueTag.double.rawValue); unsigned(number.bitPattern)
        case .bool(let flag): byte(flag ? SyncValueTag.boolTrue.rawValue : SyncValueTag.boolFalse.rawValue)
        case .string(let text): byte(SyncValueTag.string.rawValue); string(text)
        case .date(let date): byte(SyncValueTag.date.rawValue); unsigned(date.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let blob): byte(SyncValueTag.data.rawValue); data(blob)
        case .uuid(let id): byte(SyncValueTag.uuid.rawValue); uuid(id)
        case .url(let url): byte(SyncValueTag.url.rawValue); string(url.absoluteString)
        case .decimal(let text): byte(SyncValueTag.decimal.rawValue); string(text)
        case .object(let id): byte(SyncValueTag.object.rawValue); uuid(id)
        }
    }
}

/// Reads what ``SyncByteWriter`` wrote, throwing `.corruptChange` naming
/// what is wrong and at which byte; shared by ``SyncChange`` and ``SyncObjectState``.
struct SyncByteReader {
    private let bytes: [UInt8]
    private var offset = 0
    /// What the bytes are, for errors ("a sync change").
    private let subject: String

    init(_ bytes: [UInt8], subject: String = "a sync change") {
        self.bytes = bytes
        self.subject = subject
    }

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    func corrupt(_ what: String) -> SyncError {
        SyncError(.corruptChange, message: "\(subject) does not decode: \(what), at byte \(offset) of \(bytes.count)")
    }

    mutating func byte(_ what: String) throws(SyncError) -> UInt8 {
        guard offset < bytes.count else { throw corrupt("it ends before its \(what)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func unsigned(_ what: String) throws(SyncError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte(what)
            guard shift < 64, shift < 63 || next <= 1 else { throw corrupt("the number of its \(what) is too long") }
            value |= UInt64(next & 0x7F) << shift
            if next < 0x80 { return value }
            shift += 7
        }
    }

    mutating func signed(_ what: String) throws(SyncError) -> Int64 {
        let raw = try unsigned(what)
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// A count of items each at least one byte long: never more than the bytes left.
    mutating func count(_ what: String) throws(SyncError) -> Int {
        let value = try unsigned("count of \(what)")
        guard value <= UInt64(remaining) else { throw corrupt("\(value) \(what) in \(remaining) bytes") }
        return Int(value)
    }

    mutating func raw(_ length: Int, _ what: String) throws(SyncError) -> ArraySlice<UInt8> {
        guard length <= remaining else { throw corrupt("its \(what) needs \(length) bytes, \(remaining) are left") }
        defer { offset += length }
        return bytes[offset..<(offset + length)]
    }

    mutating func uuid(_ what: String) throws(SyncError) -> UUID {
        let raw = try raw(16, what)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: raw) }
        return UUID(uuid: value)
    }

    mutating func string(_ what: String) throws(SyncError) -> String {
        let length = try count(what)
        let raw = try raw(length, what)
        guard let text = String(validating: raw, as: UTF8.self) else { throw corrupt("its \(what) is not UTF-8") }
        return text
    }

    mutating func value(_ name: String) throws(SyncError) -> SyncValue {
        let tagByte = try byte("value of \(name)")
        guard let tag = SyncValueTag(rawValue: tagByte) else { throw corrupt("value tag \(tagByte) of \(name)") }
        switch tag {
        case .null: return .null
        case .integer: return .integer(try signed(name))
        case .double: return .double(Double(bitPattern: try unsigned(name)))
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .string: return .string(try string(name))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try unsigned(name))))
        case .data: return .data(Data(try raw(try count(name), name)))
        case .uuid: return .uuid(try uuid(name))
        case .url:
            let text = try string(name)
            guard let url = URL(string: text) else { throw corrupt("the URL of \(name) does not parse: \(text)") }
            return .url(url)
        case .decimal: return .decimal(try string(name))
        case .object: return .object(try uuid(name))
        }
    }
}
