import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A transformable attribute's stored bytes that its transformer cannot turn
/// back into a value: a damaged keyed archive, or one holding a class that is
/// not a Foundation value (an app's own `NSCoding` class).
///
/// ```swift
/// do {
///     let tags = try note.value(forKey: "tags") as? [String]
/// } catch let error as TransformedValueError {
///     print(error)   // Note.tags of x-coredata://…/Note/p3: the stored NSKeyedUnarchiveFromData archive cannot be read: …
/// }
/// ```
///
/// An error is never data: ``ManagedObject/value(forKey:)`` throws this rather
/// than return nil or the raw bytes. The bytes stay in the object as they were
/// read, so saving the object writes them back unchanged; setting a new value
/// replaces them.
public struct TransformedValueError: CodedError, Sendable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = TransformedValueError
        /// The code's name, as written in Swift (`"unreadableArchive"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The stored bytes are a damaged keyed archive, or one holding a class
        /// that is not a Foundation value (``TransformedValueError/underlying`` says which).
        public static let unreadableArchive = Code("unreadableArchive")
    }

    /// The kind of failure.
    public var code: Code
    /// The object whose attribute was read.
    public var objectID: ObjectID
    /// The attribute's name.
    public var key: String
    /// The transformer the attribute names (`NSKeyedUnarchiveFromData` when it names none).
    public var transformerName: String
    /// Why the archive could not be read, with the path of the object inside it.
    public var underlying: KeyedArchiveError

    /// Creates an error.
    public init(objectID: ObjectID, key: String, transformerName: String, underlying: KeyedArchiveError) {
        self.code = .unreadableArchive
        self.objectID = objectID
        self.key = key
        self.transformerName = transformerName
        self.underlying = underlying
    }

    /// The attribute, the object, the transformer and why the archive cannot be read.
    public var description: String {
        "\(objectID.entity.name).\(key) of \(objectID): the stored \(transformerName) archive cannot be read: \(underlying)"
    }
}

// MARK: - Keyed-archive transformers

extension AttributeDescription {
    /// The Swift value for bytes of a transformable attribute with a keyed-archive
    /// transformer (``archivesValues``).
    ///
    /// - A keyed archive (`bplist00` whose top dictionary has `$archiver`) is
    ///   unarchived: ``ArchivedValue/foundationValue`` (`String`, `[String]`,
    ///   `[String: Any]`, `Date`, `URL`, …).
    /// - Bytes that are not a binary property list, or a property list that is not
    ///   a keyed archive, are returned as `Data`: what ``ManagedObject/setValue(_:forKey:)``
    ///   stored for a `Data` value or an `Encodable` one (``TransformableCoding``)
    ///   before keyed archives were read.
    /// - A `bplist00` that does not parse, and a keyed archive that does not
    ///   unarchive, throw ``TransformedValueError``.
    package func transformedValue(from bytes: Data, of objectID: ObjectID) throws(TransformedValueError) -> Any {
        guard bytes.starts(with: Self.binaryPropertyListHeader) else { return bytes }
        func failure(_ underlying: KeyedArchiveError) -> TransformedValueError {
            TransformedValueError(objectID: objectID, key: name,
                                  transformerName: valueTransformerName.flatMap { $0.isEmpty ? nil : $0 } ?? "NSKeyedUnarchiveFromData",
                                  underlying: underlying)
        }
        let plist: PropertyListValue
        do {
            plist = try BinaryPropertyList.decode(bytes)
        } catch {
            throw failure(KeyedArchiveError(.invalidPropertyList, path: "", message: error.message))
        }
        guard case .dictionary(let envelope) = plist, envelope["$archiver"] != nil else { return bytes }
        do {
            return try KeyedArchive(propertyList: plist).rootValue().foundationValue
        } catch {
            throw failure(error)
        }
    }

    /// The bytes to store for a Swift value given to a transformable attribute with
    /// a keyed-archive transformer; nil when the value is `Data` (stored as given,
    /// as before) or not a Foundation value (an `Encodable` type, stored with
    /// ``TransformableCoding``).
    ///
    /// Core Data would archive an `NSData` too; `Data` stays raw here so that
    /// bytes read from a column can be written back as they were, and so that
    /// code storing its own encoding keeps working.
    package func archivedBytes(for value: Any) -> Data? {
        if value is Data || value is [UInt8] { return nil }
        return ArchivedValue(value)?.archived()
    }

    private static let binaryPropertyListHeader = Data("bplist00".utf8)
}
