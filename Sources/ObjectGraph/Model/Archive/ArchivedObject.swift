import Foundation

/// One object of a ``KeyedArchive``, with the path by which it was reached.
///
/// ```swift
/// let entity: ArchivedObject = …                          // class NSEntityDescription
/// let name = try entity.string("NSEntityName")           // "Car"
/// for (key, property) in try entity.entries("NSProperties") ?? [] {
///     print(try key.asString(), property.className ?? "?")
/// }
/// ```
///
/// An object is either a dictionary of `$objects` with a `$class` (``className``
/// is set) or an inline scalar: a string, number, boolean or data that sits in
/// `$objects` or directly under a key. The typed accessors take both forms:
/// `string("NSEntityName")` reads an inline string, a UID to a string entry, or
/// a UID to an `NSString` object (`NS.string`).
///
/// Accessors return nil when the key is absent or refers to `$null` (UID 0), and
/// throw ``KeyedArchiveError`` naming ``path`` when the key holds another type.
/// Navigation is lazy and follows references wherever they lead; Core Data's
/// model graph is cyclic (an entity's property refers back to the entity), so
/// walking it is the caller's loop to bound.
package struct ArchivedObject: Sendable {
    /// The archive the object belongs to.
    package let archive: KeyedArchive
    /// The object's index in `$objects`; nil for a scalar stored inline under a key.
    package let uid: Int?
    /// The `$objects` entry (or inline value) itself.
    package let value: PropertyListValue
    /// How the object was reached from `$top`, for messages: `"root.NSEntities[3].NSProperties.name"`.
    package internal(set) var path: String
    /// The class name (`$classname`); nil for an inline scalar.
    package let className: String?
    /// The class followed by its superclasses (`$classes`); empty for an inline scalar.
    package let classChain: [String]
    /// The object's keys and values; empty for an inline scalar. `$class` stays
    /// in (``keys`` and ``has(_:)`` leave it out): removing it would copy the
    /// dictionary each time the object is reached, and an object of thousands of
    /// keys can be referenced thousands of times.
    package let fields: [String: PropertyListValue]

    init(archive: KeyedArchive, uid: Int?, value: PropertyListValue, path: String) throws(KeyedArchiveError) {
        self.archive = archive
        self.uid = uid
        self.value = value
        self.path = path
        switch value {
        case .dictionary(let fields):
            guard let reference = fields["$class"] else {
                let what = fields["$classname"] != nil ? "is a class description, not an object" : "has no $class"
                throw KeyedArchiveError(.missingClass, path: path, message: "object \(uid.map { "UID \($0)" } ?? "") \(what)")
            }
            let description = try archive.classDescription(reference, path: path)
            className = description.name
            classChain = description.chain
            self.fields = fields
        case .array:
            throw KeyedArchiveError(.wrongType, path: path,
                                    message: "$objects entry \(uid ?? 0) is an array, not an object or a scalar")
        default:
            className = nil
            classChain = []
            fields = [:]
        }
    }

    /// The object's keys without `$class`, sorted, so a caller can report the ones it does not know.
    package var keys: [String] { fields.keys.filter { $0 != "$class" }.sorted() }

    /// Whether the object has a value for `key` (even `$null`); never for `$class`.
    package func has(_ key: String) -> Bool { key != "$class" && fields[key] != nil }

    /// Whether the class or one of its superclasses is `name`.
    package func isKind(of name: String) -> Bool { classChain.contains(name) }

    // MARK: - Keyed values

    /// The object `key` refers to; nil when absent or `$null`.
    package func object(_ key: String) throws(KeyedArchiveError) -> ArchivedObject? {
        guard let value = fields[key] else { return nil }
        return try archive.resolve(value, path: "\(path).\(key)")
    }

    /// A string under `key`: inline, a UID to a string entry, or a UID to an `NSString`/`NSMutableString`.
    package func string(_ key: String) throws(KeyedArchiveError) -> String? {
        guard let object = try object(key) else { return nil }
        return try object.asString()
    }

    /// An integer under `key`, inline or through a UID.
    package func integer(_ key: String) throws(KeyedArchiveError) -> Int64? {
        guard let object = try object(key) else { return nil }
        guard case .integer(let integer) = object.value else { throw object.wrongType("an integer") }
        return integer
    }

    /// A boolean under `key`, inline or through a UID; the integers 0 and 1 count as booleans.
    package func bool(_ key: String) throws(KeyedArchiveError) -> Bool? {
        guard let object = try object(key) else { return nil }
        switch object.value {
        case .bool(let bool): return bool
        case .integer(0): return false
        case .integer(1): return true
        default: throw object.wrongType("a boolean")
        }
    }

    /// A number under `key` as a `Double` (a real or an integer), inline or through a UID.
    package func double(_ key: String) throws(KeyedArchiveError) -> Double? {
        guard let object = try object(key) else { return nil }
        switch object.value {
        case .real(let real): return real
        case .integer(let integer): return Double(integer)
        default: throw object.wrongType("a number")
        }
    }

    /// Data under `key`: inline, through a UID, or an `NSData`/`NSMutableData` (`NS.data`).
    package func data(_ key: String) throws(KeyedArchiveError) -> Data? {
        guard let object = try object(key) else { return nil }
        if case .data(let data) = object.value { return data }
        guard object.isKind(of: "NSData"), let inner = try object.object("NS.data"),
              case .data(let data) = inner.value else { throw object.wrongType("data") }
        return data
    }

    /// The elements of the collection `key` refers to (`NSArray`, `NSSet`,
    /// `NSOrderedSet` and their mutable subclasses: `NS.objects`).
    package func objects(_ key: String) throws(KeyedArchiveError) -> [ArchivedObject]? {
        guard let object = try object(key) else { return nil }
        return try object.asElements()
    }

    /// The entries of the dictionary `key` refers to: `NSDictionary` and
    /// `NSMutableDictionary` (`NS.keys`, `NS.objects`), and Core Data's
    /// `NSKnownKeysDictionary1` (see ``asEntries()``).
    package func entries(_ key: String) throws(KeyedArchiveError) -> [(key: ArchivedObject, value: ArchivedObject)]? {
        guard let object = try object(key) else { return nil }
        return try object.asEntries()
    }

    /// The Foundation value under `key` (see ``ArchivedValue``); nil when absent or `$null`.
    package func value(_ key: String) throws(KeyedArchiveError) -> ArchivedValue? {
        guard let value = fields[key], value != .uid(0) else { return nil }
        var decoder = ArchivedValue.Decoder(archive: archive)
        return try decoder.decode(value, path: "\(path).\(key)")
    }

    // MARK: - The object itself

    /// The object as a string: an inline string, or an `NSString`/`NSMutableString` (`NS.string`).
    package func asString() throws(KeyedArchiveError) -> String {
        if case .string(let string) = value { return string }
        guard isKind(of: "NSString"), let inner = fields["NS.string"] else { throw wrongType("a string") }
        switch inner {
        case .string(let string):
            return string
        case .uid(let uid) where uid > 0 && uid < archive.objects.count:
            if case .string(let string) = archive.objects[uid] { return string }
            fallthrough
        default:
            throw KeyedArchiveError(.wrongType, path: "\(path).NS.string",
                                    message: "expected a string, found \(inner.kindDescription)")
        }
    }

    /// The object as a collection's elements (`NS.objects` of an `NSArray`,
    /// `NSSet`, `NSOrderedSet` or a mutable subclass), in archive order.
    package func asElements() throws(KeyedArchiveError) -> [ArchivedObject] {
        guard isKind(of: "NSArray") || isKind(of: "NSSet") || isKind(of: "NSOrderedSet") else {
            throw wrongType("an array, set or ordered set")
        }
        return try references("NS.objects")
    }

    /// The object as a dictionary's entries, in archive order.
    ///
    /// `NSDictionary`/`NSMutableDictionary` pair `NS.keys` with `NS.objects`.
    /// Core Data's `NSKnownKeysDictionary1` keeps its keys in `searchMapping`
    /// (an `NSKnownKeysMappingStrategy1` whose `keys` is an array) and its values in
    /// `values`; a value equal to the `emptyToken` string marks an empty slot and is skipped.
    package func asEntries() throws(KeyedArchiveError) -> [(key: ArchivedObject, value: ArchivedObject)] {
        if className == "NSKnownKeysDictionary1" || has("searchMapping") {
            return try knownKeysEntries()
        }
        guard isKind(of: "NSDictionary") else { throw wrongType("a dictionary") }
        let keys = try references("NS.keys")
        let values = try references("NS.objects")
        guard keys.count == values.count else {
            throw KeyedArchiveError(.wrongType, path: path,
                                    message: "NS.keys has \(keys.count) entries but NS.objects has \(values.count)")
        }
        return named(zip(keys, values))
    }

    // MARK: - Internal

    /// The error for this object holding something other than `expected`.
    func wrongType(_ expected: String) -> KeyedArchiveError {
        let found = className.map { "an object of class \($0)" } ?? value.kindDescription
        return KeyedArchiveError(.wrongType, path: path, message: "expected \(expected), found \(found)")
    }

    /// The objects an inline array of UIDs under `key` refers to; `$null` elements are an error.
    private func references(_ key: String) throws(KeyedArchiveError) -> [ArchivedObject] {
        let base = "\(path).\(key)"
        guard let list = fields[key] else {
            throw KeyedArchiveError(.wrongType, path: path, message: "\(className ?? "object") has no \(key)")
        }
        guard case .array(let items) = list else {
            throw KeyedArchiveError(.wrongType, path: base, message: "expected an array of UIDs, found \(list.kindDescription)")
        }
        var result: [ArchivedObject] = []
        result.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            guard let object = try archive.resolve(item, path: "\(base)[\(index)]") else {
                throw KeyedArchiveError(.invalidReference, path: "\(base)[\(index)]",
                                        message: "a collection element refers to $null")
            }
            result.append(object)
        }
        return result
    }

    private func knownKeysEntries() throws(KeyedArchiveError) -> [(key: ArchivedObject, value: ArchivedObject)] {
        guard let mapping = try object("searchMapping") else {
            throw KeyedArchiveError(.wrongType, path: path, message: "NSKnownKeysDictionary1 has no searchMapping")
        }
        guard let keys = try mapping.objects("keys") else {
            throw KeyedArchiveError(.wrongType, path: mapping.path, message: "the mapping strategy has no keys")
        }
        guard let values = try objects("values") else {
            throw KeyedArchiveError(.wrongType, path: path, message: "NSKnownKeysDictionary1 has no values")
        }
        guard keys.count == values.count else {
            throw KeyedArchiveError(.wrongType, path: path,
                                    message: "searchMapping has \(keys.count) keys but values has \(values.count)")
        }
        let emptyToken = try string("emptyToken").map(PropertyListValue.string)
        return named(zip(keys, values).filter { $0.1.value != emptyToken })
    }

    /// Entries whose values' paths name their keys (`"….NSProperties.name"`) when the keys are strings.
    private func named(_ pairs: some Sequence<(ArchivedObject, ArchivedObject)>) -> [(key: ArchivedObject, value: ArchivedObject)] {
        pairs.map { key, value in
            var value = value
            if case .string(let name) = key.value {
                value.path = "\(path).\(name)"
            }
            return (key: key, value: value)
        }
    }
}
