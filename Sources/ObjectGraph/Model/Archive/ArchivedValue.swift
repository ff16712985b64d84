import Foundation

/// A Foundation value as a secure-coding keyed archive holds it: what Core Data's
/// default transformers (`NSKeyedUnarchiveFromData`, `NSSecureUnarchiveFromData`)
/// write into a transformable attribute's column.
///
/// ```swift
/// let tags = try ArchivedValue.unarchive(blob)             // .array([.string("a"), .string("b")])
/// let swift = tags.foundationValue as? [String]           // ["a", "b"]
/// let bytes = ArchivedValue(["a", "b"])!.archived()       // what NSKeyedArchiver writes
/// ```
///
/// The classes read are those `NSSecureUnarchiveFromDataTransformer` allows by
/// default: `NSString`, `NSNumber`, `NSDate`, `NSData`, `NSUUID`, `NSURL`,
/// `NSArray`, `NSDictionary`, `NSSet`, `NSNull`, their mutable subclasses, and
/// `NSOrderedSet` (read as an array) and `NSDecimalNumber` (read as a double when
/// its mantissa fits 64 bits). Any other class, anywhere inside the value, makes
/// the whole value fail with ``KeyedArchiveError/Code-swift.struct/unsupportedClass``
/// naming the class and its path: a value is never partially decoded.
///
/// ## Topics
/// - ``unarchive(_:)``
/// - ``archived()``
/// - ``foundationValue``
/// - ``init(_:)``
public enum ArchivedValue: Sendable, Hashable {
    /// `NSNull`, or the archive's root being `$null`.
    case null
    /// An `NSNumber` holding a boolean.
    case bool(Bool)
    /// An `NSNumber` holding an integer.
    case integer(Int64)
    /// An `NSNumber` holding a floating-point number.
    case double(Double)
    /// An `NSString` or `NSMutableString`.
    case string(String)
    /// An `NSDate`.
    case date(Date)
    /// An `NSData` or `NSMutableData`.
    case data(Data)
    /// An `NSUUID`.
    case uuid(UUID)
    /// An `NSURL`, resolved against its base URL when it has one.
    case url(URL)
    /// An `NSArray`, `NSMutableArray` or `NSOrderedSet`.
    case array([ArchivedValue])
    /// An `NSDictionary` or `NSMutableDictionary`.
    case dictionary([ArchivedValue: ArchivedValue])
    /// An `NSSet` or `NSMutableSet`.
    case set(Set<ArchivedValue>)

    /// Reads the root object (`$top.root`) of a keyed archive.
    ///
    /// - Throws: ``KeyedArchiveError`` when the bytes are not a keyed archive, or
    ///   the root holds a class this type does not read, a reference cycle, or
    ///   containers nested deeper than 64.
    public static func unarchive(_ data: Data) throws(KeyedArchiveError) -> ArchivedValue {
        try KeyedArchive(data: data).rootValue()
    }
}

// MARK: - Decoding

extension ArchivedValue {
    /// Turns archive objects into values, guarding against cycles, deep nesting
    /// and shared containers that would expand without bound.
    struct Decoder {
        /// How deep values may nest. A transformable attribute's value nests a
        /// few levels; 64 levels take about 320 KB of stack in a debug build
        /// (5 KB a level, measured), so even a 512 KiB secondary thread's stack
        /// holds them, where 256 overflowed it.
        static let maximumDepth = 64

        let archive: KeyedArchive
        /// `$objects` indices on the path being decoded: meeting one again is a cycle.
        private var visiting: Set<Int> = []
        /// Values still allowed to be produced, counting every expansion of a shared object.
        private var budget: Int

        init(archive: KeyedArchive) {
            self.archive = archive
            let (scaled, overflow) = archive.objects.count.multipliedReportingOverflow(by: 64)
            budget = overflow ? Int.max : scaled + 4096
        }

        /// Decodes a value found under a key or at the top: an inline scalar or a UID.
        mutating func decode(_ value: PropertyListValue, path: String) throws(KeyedArchiveError) -> ArchivedValue {
            guard let object = try archive.resolve(value, path: path) else { return .null }
            return try decode(object)
        }

        /// Decodes an object of the archive: an inline scalar as itself, an
        /// object by its class.
        private mutating func decode(_ object: ArchivedObject) throws(KeyedArchiveError) -> ArchivedValue {
            let path = object.path
            guard budget > 0 else {
                throw KeyedArchiveError(.tooComplex, path: path,
                                        message: "shared objects expand to more values than the archive's \(archive.objects.count) objects can hold")
            }
            budget -= 1
            switch object.value {
            case .bool(let bool): return .bool(bool)
            case .integer(let integer): return .integer(integer)
            case .real(let real): return .double(real)
            case .string(let string): return .string(string)
            case .data(let data): return .data(data)
            case .date(let date): return .date(date)
            case .uid, .array:
                throw KeyedArchiveError(.wrongType, path: path,
                                        message: "$objects entry \(object.uid ?? 0) is \(object.value.kindDescription), not an object or a scalar")
            case .dictionary:
                break
            }
            let uid = object.uid ?? 0
            guard !visiting.contains(uid) else {
                throw KeyedArchiveError(.tooComplex, path: path, message: "object UID \(uid) contains itself")
            }
            guard visiting.count < Self.maximumDepth else {
                throw KeyedArchiveError(.tooComplex, path: path, message: "values nest deeper than \(Self.maximumDepth)")
            }
            visiting.insert(uid)
            defer { visiting.remove(uid) }
            switch object.className ?? "" {
            case "NSURL":
                return .url(try url(object))
            case "NSArray", "NSMutableArray", "NSOrderedSet", "NSMutableOrderedSet":
                return .array(try elements(of: object))
            case "NSSet", "NSMutableSet":
                return .set(Set(try elements(of: object)))
            case "NSDictionary", "NSMutableDictionary":
                var result: [ArchivedValue: ArchivedValue] = [:]
                for (key, value) in try object.asEntries() { result[try decode(key)] = try decode(value) }
                return .dictionary(result)
            default:
                return try leaf(object)
            }
        }

        /// An object of a class that contains no other values. Kept out of
        /// ``decode(_:)``, which recurses, so each level of nesting takes a small
        /// stack frame (see ``maximumDepth``).
        private func leaf(_ object: ArchivedObject) throws(KeyedArchiveError) -> ArchivedValue {
            let path = object.path
            switch object.className ?? "" {
            case "NSString", "NSMutableString":
                return .string(try object.asString())
            case "NSDate":
                guard let time = try object.double("NS.time") else { throw missing("NS.time", in: object) }
                return .date(Date(timeIntervalSinceReferenceDate: time))
            case "NSData", "NSMutableData":
                guard let data = try object.data("NS.data") else { throw missing("NS.data", in: object) }
                return .data(data)
            case "NSUUID":
                guard let bytes = try object.data("NS.uuidbytes") else { throw missing("NS.uuidbytes", in: object) }
                guard bytes.count == 16 else {
                    throw KeyedArchiveError(.wrongType, path: "\(path).NS.uuidbytes",
                                            message: "a UUID of \(bytes.count) bytes, not 16")
                }
                let b = [UInt8](bytes)
                return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                                         b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
            case "NSNull":
                return .null
            case "NSDecimalNumber":
                return .double(try decimal(object))
            default:
                let chain = object.classChain.dropFirst().joined(separator: ", ")
                throw KeyedArchiveError(.unsupportedClass, path: path,
                                        message: "class \"\(object.className ?? "?")\"\(chain.isEmpty ? "" : " (superclasses: \(chain))") is not a Foundation value class")
            }
        }

        private mutating func elements(of object: ArchivedObject) throws(KeyedArchiveError) -> [ArchivedValue] {
            let items = try object.asElements()
            var values: [ArchivedValue] = []
            values.reserveCapacity(items.count)
            for item in items { values.append(try decode(item)) }
            return values
        }

        /// `NSURL`: `NS.relative` resolved against `NS.base` (`$null` or another `NSURL`).
        private mutating func url(_ object: ArchivedObject) throws(KeyedArchiveError) -> URL {
            guard let relative = try object.string("NS.relative") else { throw missing("NS.relative", in: object) }
            var base: URL?
            if let reference = object.fields["NS.base"], reference != .uid(0) {
                guard case .url(let url) = try decode(reference, path: "\(object.path).NS.base") else {
                    throw KeyedArchiveError(.wrongType, path: "\(object.path).NS.base", message: "the base is not an NSURL")
                }
                base = url
            }
            guard let url = URL(string: relative, relativeTo: base) else {
                throw KeyedArchiveError(.wrongType, path: "\(object.path).NS.relative", message: "\"\(relative)\" is not a URL")
            }
            return url.absoluteURL
        }

        /// `NSDecimalNumber` whose mantissa fits 64 bits, as the nearest double.
        private func decimal(_ object: ArchivedObject) throws(KeyedArchiveError) -> Double {
            guard let exponent = try object.integer("NS.exponent"), let length = try object.integer("NS.length"),
                  let bytes = try object.data("NS.mantissa") else {
                throw missing("NS.exponent, NS.length or NS.mantissa", in: object)
            }
            let littleEndian = try object.integer("NS.mantissa.bo") ?? 1 == 1
            guard (0...4).contains(length), bytes.count >= Int(length) * 2, (-128...127).contains(exponent) else {
                throw KeyedArchiveError(.unsupportedClass, path: object.path,
                                        message: "an NSDecimalNumber of \(length) mantissa words (exponent \(exponent)) does not fit a double exactly enough to read")
            }
            let b = [UInt8](bytes)
            var mantissa: UInt64 = 0
            for word in (0..<Int(length)).reversed() {
                let (first, second) = (UInt64(b[word * 2]), UInt64(b[word * 2 + 1]))
                mantissa = mantissa << 16 | (littleEndian ? second << 8 | first : first << 8 | second)
            }
            let negative = try object.bool("NS.negative") ?? false
            let magnitude = Decimal(sign: negative ? .minus : .plus, exponent: Int(exponent), significand: Decimal(mantissa))
            return NSDecimalNumber(decimal: magnitude).doubleValue
        }

        private func missing(_ key: String, in object: ArchivedObject) -> KeyedArchiveError {
            KeyedArchiveError(.wrongType, path: object.path, message: "\(object.className ?? "object") has no \(key)")
        }
    }
}
