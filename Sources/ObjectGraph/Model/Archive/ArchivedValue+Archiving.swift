import Foundation

extension ArchivedValue {
    /// The value as an `NSKeyedArchiver` archive that Apple's `NSKeyedUnarchiver`
    /// (and ``unarchive(_:)``) reads.
    ///
    /// The layout is what Apple's archiver writes (see ``KeyedArchiveWriter``);
    /// dates, UUIDs, URLs, `NSNull` and collections are objects with a `$class` UID.
    ///
    /// Dictionary keys and set members are written in a fixed order (sorted by
    /// their description), so equal values give equal bytes.
    public func archived() -> Data {
        var writer = KeyedArchiveWriter()
        let root = writer.encode(self)
        return writer.archive(root: root)
    }
}

extension KeyedArchiveWriter {
    /// Writes `value` and what it contains; returns the reference to it.
    package mutating func encode(_ value: ArchivedValue) -> PropertyListValue {
        switch value {
        case .bool(let bool): return scalar(.bool(bool))
        case .integer(let integer): return scalar(.integer(integer))
        case .double(let double): return scalar(.real(double))
        case .string(let string): return scalar(.string(string))
        case .data(let data): return scalar(.data(data))
        case .null:
            return object(["NSNull", "NSObject"]) { _ in [:] }
        case .date(let date):
            return object(["NSDate", "NSObject"]) { _ in ["NS.time": .real(date.timeIntervalSinceReferenceDate)] }
        case .uuid(let uuid):
            return object(["NSUUID", "NSObject"]) { _ in ["NS.uuidbytes": .data(withUnsafeBytes(of: uuid.uuid) { Data($0) })] }
        case .url(let url):
            return object(["NSURL", "NSObject"]) { writer in
                ["NS.base": .uid(0), "NS.relative": writer.encode(.string(url.absoluteString))]
            }
        case .array(let elements):
            return object(["NSArray", "NSObject"]) { writer in ["NS.objects": .array(elements.map { writer.encode($0) })] }
        case .set(let members):
            return object(["NSSet", "NSObject"]) { writer in
                ["NS.objects": .array(Self.ordered(members).map { writer.encode($0) })]
            }
        case .dictionary(let dictionary):
            return object(["NSDictionary", "NSObject"]) { writer in
                let keys = Self.ordered(dictionary.keys)
                let keyUIDs = keys.map { writer.encode($0) }
                let valueUIDs = keys.map { writer.encode(dictionary[$0]!) }
                return ["NS.keys": .array(keyUIDs), "NS.objects": .array(valueUIDs)]
            }
        }
    }

    /// Collection members in a fixed order, so archives of equal values are equal bytes.
    private static func ordered(_ values: some Collection<ArchivedValue>) -> [ArchivedValue] {
        values.map { (key: String(describing: $0), value: $0) }
            .sorted { $0.key < $1.key }
            .map(\.value)
    }
}
