import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// An `NSKeyedArchiver` archive that cannot be read: what is wrong, and the path
/// of the object where it is ("root.NSEntities[3].NSProperties.name").
///
/// ```swift
/// do {
///     let value = try ArchivedValue.unarchive(blob)
/// } catch {
///     print(error)   // keyed archive: root.NS.objects[2]: class "ColorBox" is not a Foundation value class
/// }
/// ```
///
/// A malformed property list underneath comes as ``Code-swift.struct/invalidPropertyList``
/// with the ``PropertyListError``'s message.
public struct KeyedArchiveError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = KeyedArchiveError
        /// The code's name, as written in Swift (`"unsupportedClass"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The bytes are not a binary property list (see ``PropertyListError``).
        public static let invalidPropertyList = Code("invalidPropertyList")
        /// The property list is not an `NSKeyedArchiver` archive: `$archiver`,
        /// `$version`, `$top` or `$objects` is missing or wrong.
        public static let notKeyedArchive = Code("notKeyedArchive")
        /// A UID points past the end of `$objects`, or a value that should be a
        /// reference is not one.
        public static let invalidReference = Code("invalidReference")
        /// A key holds a value of another type than the reader expects.
        public static let wrongType = Code("wrongType")
        /// An object has no `$class`, or its class description has no `$classname`.
        public static let missingClass = Code("missingClass")
        /// A value's class is not one of the Foundation value classes ``ArchivedValue`` reads.
        public static let unsupportedClass = Code("unsupportedClass")
        /// A value contains itself, nests too deep, or expands into far more values than the archive holds.
        public static let tooComplex = Code("tooComplex")
    }

    /// The kind of failure.
    public var code: Code
    /// The path of the object where reading failed, from `$top` (`"root.NS.objects[2]"`);
    /// empty for failures of the envelope.
    public var path: String
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, path: String, message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    /// `keyed archive: <path>: <message>`.
    public var description: String {
        path.isEmpty ? "keyed archive: \(message)" : "keyed archive: \(path): \(message)"
    }
}
