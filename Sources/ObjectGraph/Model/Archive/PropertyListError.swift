import Foundation

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
public struct PropertyListError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure. A struct rather than an enum so kinds can be added
    /// without breaking exhaustive switches.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: UInt8
        let name: String

        /// The data does not start with `bplist00`, or is too short for a trailer.
        public static let notBinaryPropertyList = Code(raw: 1, name: "notBinaryPropertyList")
        /// The trailer's sizes, counts or offsets are impossible for the data's length.
        public static let invalidTrailer = Code(raw: 2, name: "invalidTrailer")
        /// An offset, a length or a reference points outside the data or the object table.
        public static let outOfBounds = Code(raw: 3, name: "outOfBounds")
        /// An object has an unknown marker, or a marker with an impossible size.
        public static let invalidObject = Code(raw: 4, name: "invalidObject")
        /// An object is well formed but has no ``PropertyListValue`` (null, fill,
        /// a 128-bit integer beyond `Int64`, a non-string dictionary key).
        public static let unsupportedValue = Code(raw: 5, name: "unsupportedValue")
        /// A container contains itself, directly or through other containers.
        public static let cycle = Code(raw: 6, name: "cycle")
        /// Containers are nested deeper than the reader's limit, or the shared
        /// containers would expand into far more values than the data holds.
        public static let tooComplex = Code(raw: 7, name: "tooComplex")

        /// The code's name, as written in Swift (`"unsupportedClass"`).
        public var description: String { name }

        /// Codes are equal when they are the same kind of failure.
        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.raw == rhs.raw }
        /// Hashes the kind of failure.
        public func hash(into hasher: inout Hasher) { hasher.combine(raw) }

        /// Matches an error of this code: `catch PropertyListError.Code.cycle`.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? PropertyListError)?.code == code
        }
    }

    /// The kind of failure.
    public var code: Code
    /// What is wrong, naming the byte offset and the object index when known.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// `binary property list: <message>`.
    public var description: String { "binary property list: \(message)" }
}
