import Foundation

extension ArchivedValue {
    /// The value as an `NSKeyedArchiver` archive that Apple's `NSKeyedUnarchiver`
    /// (and ``unarchive(_:)``) reads.
    ///
    /// The layout is what Apple's archiver writes: `$version` 100000, `$archiver`
    /// `"NSKeyedArchiver"`, `$top` `{root: UID(1)}`, `$objects` starting with
    /// `"$null"`; strings, numbers and data inline in `$objects` (equal ones shared);
    /// dates, UUIDs, URLs, `NSNull` and collections as objects with a `$class` UID;
    /// each class description written once, after the first object of its class;
    /// an object's UID assigned before its contents are written.
    ///
    /// Dictionary keys and set members are written in a fixed order (sorted by
    /// their description), so equal values give equal bytes.
    public func archived() -> Data {
        var archiver = Archiver()
        let root = archiver.encode(self)
        return BinaryPropertyList.encode(.dictionary([
            "$version": .integer(100_000),
            "$archiver": .string("NSKeyedArchiver"),
            "$top": .dictionary(["root": root]),
            "$objects": .array(archiver.objects),
        ]))
    }
}

// MARK: - Archiver

extension ArchivedValue {
    /// Builds `$objects` for ``archived()``.
    private struct Archiver {
        private(set) var objects: [PropertyListValue] = [.string("$null")]
        /// The UID of each inline scalar already written.
        private var scalarUIDs: [PropertyListValue: Int] = [:]
        /// The UID of each class description already written.
        private var classUIDs: [String: Int] = [:]

        /// Writes `value` and what it contains; returns the UID that refers to it.
        mutating func encode(_ value: ArchivedValue) -> PropertyListValue {
            switch value {
            case .bool(let bool): return scalar(.bool(bool))
            case .integer(let integer): return scalar(.integer(integer))
            case .double(let double): return scalar(.real(double))
            case .string(let string): return scalar(.string(string))
            case .data(let data): return scalar(.data(data))
            case .null:
                return object("NSNull") { _ in [:] }
            case .date(let date):
                return object("NSDate") { _ in ["NS.time": .real(date.timeIntervalSinceReferenceDate)] }
            case .uuid(let uuid):
                return object("NSUUID") { _ in ["NS.uuidbytes": .data(withUnsafeBytes(of: uuid.uuid) { Data($0) })] }
            case .url(let url):
                return object("NSURL") { archiver in
                    ["NS.base": .uid(0), "NS.relative": archiver.encode(.string(url.absoluteString))]
                }
            case .array(let elements):
                return object("NSArray") { archiver in ["NS.objects": .array(elements.map { archiver.encode($0) })] }
            case .set(let members):
                return object("NSSet") { archiver in
                    ["NS.objects": .array(Self.ordered(members).map { archiver.encode($0) })]
                }
            case .dictionary(let dictionary):
                return object("NSDictionary") { archiver in
                    let keys = Self.ordered(dictionary.keys)
                    let keyUIDs = keys.map { archiver.encode($0) }
                    let valueUIDs = keys.map { archiver.encode(dictionary[$0]!) }
                    return ["NS.keys": .array(keyUIDs), "NS.objects": .array(valueUIDs)]
                }
            }
        }

        /// An inline `$objects` entry, shared with an equal one already written.
        private mutating func scalar(_ value: PropertyListValue) -> PropertyListValue {
            if let uid = scalarUIDs[value] { return .uid(uid) }
            objects.append(value)
            scalarUIDs[value] = objects.count - 1
            return .uid(objects.count - 1)
        }

        /// An object of `className`: its UID first, then its contents, then its class.
        private mutating func object(_ className: String, fields: (inout Archiver) -> [String: PropertyListValue]) -> PropertyListValue {
            let uid = objects.count
            objects.append(.string("$null"))   // placeholder until the contents are written
            var dictionary = fields(&self)
            dictionary["$class"] = .uid(classUID(className))
            objects[uid] = .dictionary(dictionary)
            return .uid(uid)
        }

        /// The class description for a Foundation class whose superclass is `NSObject`.
        private mutating func classUID(_ name: String) -> Int {
            if let uid = classUIDs[name] { return uid }
            objects.append(.dictionary([
                "$classname": .string(name),
                "$classes": .array([.string(name), .string("NSObject")]),
            ]))
            classUIDs[name] = objects.count - 1
            return objects.count - 1
        }

        /// Collection members in a fixed order, so archives of equal values are equal bytes.
        private static func ordered(_ values: some Collection<ArchivedValue>) -> [ArchivedValue] {
            values.map { (key: String(describing: $0), value: $0) }
                .sorted { $0.key < $1.key }
                .map(\.value)
        }
    }
}
