import Foundation

/// Builds the `$objects` of an `NSKeyedArchiver` archive and writes the
/// archive: what ``ArchivedValue/archived()`` and the compiled-model encoder
/// share.
///
/// The layout is what Apple's archiver writes: `$version` 100000, `$archiver`
/// `"NSKeyedArchiver"`, `$top` `{root: …}`, `$objects` starting with `"$null"`;
/// strings, numbers and data inline in `$objects` (equal ones shared); other
/// objects as dictionaries with a `$class` UID; each class description written
/// once, after the first object of its class.
///
/// Objects that refer to each other in a cycle (an entity and its model, a
/// relationship and its inverse) get their UIDs first with ``reserve()`` and
/// their contents later with ``fill(_:classChain:fields:)``.
package struct KeyedArchiveWriter {
    private(set) var objects: [PropertyListValue] = [.string("$null")]
    /// The UID of each inline scalar already written.
    private var scalarUIDs: [PropertyListValue: Int] = [:]
    /// The UID of each class description already written.
    private var classUIDs: [String: Int] = [:]

    package init() {}

    /// The archive with `root` as `$top`'s `root`.
    package func archive(root: PropertyListValue) -> Data {
        BinaryPropertyList.encode(.dictionary([
            "$version": .integer(100_000),
            "$archiver": .string("NSKeyedArchiver"),
            "$top": .dictionary(["root": root]),
            "$objects": .array(objects),
        ]))
    }

    /// An inline `$objects` entry (a string, number, boolean or data), shared
    /// with an equal one already written.
    package mutating func scalar(_ value: PropertyListValue) -> PropertyListValue {
        if let uid = scalarUIDs[value] { return .uid(uid) }
        objects.append(value)
        scalarUIDs[value] = objects.count - 1
        return .uid(objects.count - 1)
    }

    /// A string as a reference, or `$null` for nil.
    package mutating func string(_ value: String?) -> PropertyListValue {
        value.map { scalar(.string($0)) } ?? .uid(0)
    }

    /// A UID for an object whose contents come later, with ``fill(_:classChain:fields:)``.
    package mutating func reserve() -> Int {
        objects.append(.string("$null"))
        return objects.count - 1
    }

    /// Writes the contents of a reserved object of the class `classChain[0]`
    /// (its superclasses after it, ending with `NSObject`).
    package mutating func fill(_ uid: Int, classChain: [String], fields: [String: PropertyListValue]) {
        var dictionary = fields
        dictionary["$class"] = .uid(classUID(classChain))
        objects[uid] = .dictionary(dictionary)
    }

    /// An object: its UID first, then its contents (which `fields` writes), then its class.
    package mutating func object(_ classChain: [String], fields: (inout KeyedArchiveWriter) -> [String: PropertyListValue]) -> PropertyListValue {
        let uid = reserve()
        let contents = fields(&self)
        fill(uid, classChain: classChain, fields: contents)
        return .uid(uid)
    }

    /// An `NSArray` of already written objects.
    package mutating func array(_ elements: [PropertyListValue], className: String = "NSArray") -> PropertyListValue {
        object([className, "NSObject"]) { _ in ["NS.objects": .array(elements)] }
    }

    /// An `NSDictionary` of already written keys and values, in the given order.
    package mutating func dictionary(_ entries: [(key: PropertyListValue, value: PropertyListValue)]) -> PropertyListValue {
        object(["NSDictionary", "NSObject"]) { _ in
            ["NS.keys": .array(entries.map(\.key)), "NS.objects": .array(entries.map(\.value))]
        }
    }

    private mutating func classUID(_ chain: [String]) -> Int {
        let name = chain.first ?? "NSObject"
        if let uid = classUIDs[name] { return uid }
        objects.append(.dictionary([
            "$classname": .string(name),
            "$classes": .array(chain.map(PropertyListValue.string)),
        ]))
        classUIDs[name] = objects.count - 1
        return objects.count - 1
    }
}
