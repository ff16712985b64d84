import Foundation

/// An `NSKeyedArchiver` archive, read without Foundation's unarchiver.
///
/// ```swift
/// let archive = try KeyedArchive(data: inflatedModelCache)
/// let model = try archive.topObject()                       // ArchivedObject, class NSManagedObjectModel
/// for entity in try model?.entries("NSEntities") ?? [] { … }
/// ```
///
/// A keyed archive is a binary property list with four keys: `$archiver`
/// (`"NSKeyedArchiver"`), `$version` (`100000`), `$top` (a dictionary of named
/// roots, usually `"root"`) and `$objects`, a flat table whose entry 0 is the
/// string `"$null"`. Objects are dictionaries whose `$class` UID names a class
/// description (`$classname`, `$classes`); strings, numbers and data sit in the
/// table inline, and everything refers to everything else by UID.
///
/// Core Data writes this format for its model cache (`Z_MODELCACHE`, after raw
/// DEFLATE) and, through `NSKeyedUnarchiveFromData` and
/// `NSSecureUnarchiveFromData`, for transformable attributes. Foundation on
/// Linux cannot walk it (see ``BinaryPropertyList``), so this type does.
///
/// The initializer checks only the envelope; objects are checked as they are
/// reached, and every failure names the path by which the object was reached.
///
/// ## Topics
/// - ``init(data:)``
/// - ``ArchivedValue``
public struct KeyedArchive: Sendable {
    /// The `$objects` table.
    package let objects: [PropertyListValue]
    /// The `$top` dictionary.
    package let top: [String: PropertyListValue]

    /// Reads an archive's envelope.
    ///
    /// - Throws: ``KeyedArchiveError`` with ``KeyedArchiveError/Code-swift.struct/invalidPropertyList``
    ///   when the bytes are not a binary property list, ``KeyedArchiveError/Code-swift.struct/notKeyedArchive``
    ///   when `$archiver`, `$version`, `$top` or `$objects` is missing or wrong.
    public init(data: Data) throws(KeyedArchiveError) {
        let root: PropertyListValue
        do {
            root = try BinaryPropertyList.decode(data)
        } catch {
            throw KeyedArchiveError(.invalidPropertyList, path: "", message: error.message)
        }
        try self.init(propertyList: root)
    }

    /// Reads the envelope of an archive already decoded as a property list.
    package init(propertyList root: PropertyListValue) throws(KeyedArchiveError) {
        func invalid(_ message: String) -> KeyedArchiveError {
            KeyedArchiveError(.notKeyedArchive, path: "", message: message)
        }
        guard case .dictionary(let envelope) = root else {
            throw invalid("the property list is \(root.kindDescription), not an archive's dictionary")
        }
        guard envelope["$archiver"] == .string("NSKeyedArchiver") else {
            throw invalid("$archiver is \(envelope["$archiver"].map { "\($0)" } ?? "missing"), not \"NSKeyedArchiver\"")
        }
        guard case .integer(let version) = envelope["$version"], version == 100_000 else {
            throw invalid("$version is \(envelope["$version"].map { "\($0)" } ?? "missing"), not 100000")
        }
        guard case .dictionary(let top) = envelope["$top"] else {
            throw invalid("$top is \(envelope["$top"]?.kindDescription ?? "missing"), not a dictionary")
        }
        guard case .array(let objects) = envelope["$objects"] else {
            throw invalid("$objects is \(envelope["$objects"]?.kindDescription ?? "missing"), not an array")
        }
        guard objects.first == .string("$null") else {
            throw invalid("$objects[0] is not \"$null\"")
        }
        self.objects = objects
        self.top = top
    }

    /// The names of the archive's roots (`$top`'s keys), sorted.
    package var topKeys: [String] { top.keys.sorted() }

    /// The object stored under a `$top` key; nil when the key is absent or refers to `$null`.
    ///
    /// - Throws: ``KeyedArchiveError`` when the reference is past the end of
    ///   `$objects` or the object has no class.
    package func topObject(forKey key: String = "root") throws(KeyedArchiveError) -> ArchivedObject? {
        guard let value = top[key] else { return nil }
        return try resolve(value, path: key)
    }

    /// The root value (`$top.root`) as a Foundation value.
    package func rootValue() throws(KeyedArchiveError) -> ArchivedValue {
        guard let value = top["root"] else {
            throw KeyedArchiveError(.notKeyedArchive, path: "", message: "$top has no \"root\" (keys: \(topKeys.joined(separator: ", ")))")
        }
        var decoder = ArchivedValue.Decoder(archive: self)
        return try decoder.decode(value, path: "root")
    }

    // MARK: - Resolving references

    /// The object a value refers to: a UID's `$objects` entry (nil for UID 0,
    /// `$null`), or the value itself when it is an inline scalar.
    ///
    /// - Throws: ``KeyedArchiveError`` when the UID is past the end of `$objects`,
    ///   the value is an inline array or dictionary, or the entry is an object without a class.
    package func resolve(_ value: PropertyListValue, path: String) throws(KeyedArchiveError) -> ArchivedObject? {
        switch value {
        case .uid(let uid):
            guard uid != 0 else { return nil }
            guard uid < objects.count else {
                throw KeyedArchiveError(.invalidReference, path: path,
                                        message: "UID \(uid) is past the end of $objects (\(objects.count) entries)")
            }
            return try ArchivedObject(archive: self, uid: uid, value: objects[uid], path: path)
        case .array, .dictionary:
            throw KeyedArchiveError(.invalidReference, path: path,
                                    message: "expected a UID or an inline scalar, found \(value.kindDescription)")
        default:
            return try ArchivedObject(archive: self, uid: nil, value: value, path: path)
        }
    }

    /// The class name and superclass chain of the class description a `$class` value refers to.
    func classDescription(_ reference: PropertyListValue, path: String) throws(KeyedArchiveError) -> (name: String, chain: [String]) {
        guard case .uid(let uid) = reference else {
            throw KeyedArchiveError(.missingClass, path: path,
                                    message: "$class is \(reference.kindDescription), not a UID")
        }
        guard uid > 0, uid < objects.count else {
            throw KeyedArchiveError(.invalidReference, path: path,
                                    message: "$class UID \(uid) is not an entry of $objects (1 to \(objects.count - 1))")
        }
        guard case .dictionary(let description) = objects[uid], case .string(let name) = description["$classname"] else {
            throw KeyedArchiveError(.missingClass, path: path,
                                    message: "$class UID \(uid) is not a class description with a $classname")
        }
        var chain: [String] = []
        if case .array(let classes) = description["$classes"] {
            chain = classes.compactMap(\.stringValue)
        }
        if chain.first != name { chain.insert(name, at: 0) }
        return (name, chain)
    }
}
