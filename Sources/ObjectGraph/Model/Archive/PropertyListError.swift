import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// A binary property list that cannot be read: what is wrong, and at which byte
/// offset or object index.
///
/// ```swift
/// do {
///     _ = try BinaryPropertyList.decode(bytes)
/// } catch {
///     print(error)   // binary property list: object 7 at offset 212: reference 90 past the last object (41)
/// }
/// ```
///
/// The reader never traps on bad input: every failure comes back as this error.
public struct PropertyListError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = PropertyListError
        /// The code's name, as written in Swift (`"unsupportedClass"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The data does not start with `bplist00`, or is too short for a trailer.
        public static let notBinaryPropertyList = Code("notBinaryPropertyList")
        /// The trailer's sizes, counts or offsets are impossible for the data's length.
        public static let invalidTrailer = Code("invalidTrailer")
        /// An offset, a length or a reference points outside the data or the object table.
        public static let outOfBounds = Code("outOfBounds")
        /// An object has an unknown marker, or a marker with an impossible size.
        public static let invalidObject = Code("invalidObject")
        /// An object is well formed but has no ``PropertyListValue`` (null, fill,
        /// a 128-bit integer beyond `Int64`, a non-string dictionary key).
        public static let unsupportedValue = Code("unsupportedValue")
        /// A container contains itself, directly or through other containers.
        public static let cycle = Code("cycle")
        /// Containers are nested deeper than the reader's limit, or the shared
        /// containers would expand into far more values than the data holds.
        public static let tooComplex = Code("tooComplex")
    }

    /// The kind of failure.
    public var code: Code
    /// What is wrong, naming the byte offset and the object index when known.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// `binary property list: <message>`.
    public var description: String { "binary property list: \(message)" }
}
