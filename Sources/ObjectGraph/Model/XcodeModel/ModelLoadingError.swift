import Foundation
@_spi(DataStackInternal) import DataStackSupport

/// An Xcode model file that cannot be loaded: what is wrong, in which file, and on
/// which line.
///
/// ```swift
/// do {
///     let model = try ManagedObjectModel(contentsOf: modelURL)
/// } catch let error as ModelLoadingError where error.code == .unknownAttributeType {
///     print(error)   // /…/Model.xcdatamodel/contents:12:9: Item.price has attribute type "Money", …
/// }
/// ```
///
/// Only problems that would make the loaded model wrong are thrown: an unreadable
/// file, malformed XML, an attribute type or value that has no meaning here, a
/// reference to an entity or relationship that does not exist. Things the loader
/// understands but leaves out (fetched properties, layout, code-generation flags)
/// are reported as warnings by ``XcodeModelLoader/load(_:)`` instead.
///
/// The description contains names from the model, never attribute values other than
/// the offending one, so it can be logged.
public struct ModelLoadingError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = ModelLoadingError
        /// The code's name, as written in Swift (`"unknownAttributeType"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The file or folder does not exist or cannot be read.
        public static let unreadable = Code("unreadable")
        /// The location is not an `.xcdatamodeld`, an `.xcdatamodel` or a `contents` file.
        public static let notAModel = Code("notAModel")
        /// The `contents` file is not well-formed XML.
        public static let malformedXML = Code("malformedXML")
        /// An `attributeType` that has no ``AttributeType`` (unknown, `Undefined`,
        /// `ObjectID`, `Composite`).
        public static let unknownAttributeType = Code("unknownAttributeType")
        /// A value that cannot be read: a default that does not parse as the
        /// attribute's type, an unknown delete rule, a count that is not a number.
        public static let invalidValue = Code("invalidValue")
        /// A required XML attribute (a name, a destination) is missing.
        public static let missingValue = Code("missingValue")
        /// A name that refers to nothing: a destination or parent entity, an
        /// inverse relationship, a configuration member.
        public static let danglingReference = Code("danglingReference")
        /// The same entity or property name twice, or an inheritance cycle.
        public static let inconsistentModel = Code("inconsistentModel")
        /// An Xcode 3 `elements` file (or a binary property list where the XML
        /// `contents` should be) that is not an Xcode 3 data model: a keyed
        /// archive whose root is not an `XDPMModel` (a class model, a compiled
        /// model saved under that name), or a property list that is not a keyed
        /// archive. Xcode 3 data models themselves load; a damaged one is
        /// ``malformedArchive``.
        public static let legacyBinaryModel = Code("legacyBinaryModel")
        /// A compiled model (`.mom`, a store's `Z_MODELCACHE`) or an Xcode 3
        /// `elements` file whose keyed archive or compression is damaged, or does
        /// not have the shape of a model.
        public static let malformedArchive = Code("malformedArchive")
    }

    /// The kind of failure.
    public var code: Code
    /// The file (or folder) the problem is in.
    public var path: String
    /// The 1-based line in `path`, when the problem is inside an XML file.
    public var line: Int?
    /// The 1-based column in `line`, when the XML parser reported one.
    public var column: Int?
    /// What is wrong, in words.
    public var message: String

    public init(_ code: Code, path: String, line: Int? = nil, column: Int? = nil, message: String) {
        self.code = code
        self.path = path
        self.line = line
        self.column = column
        self.message = message
    }

    /// `path:line:column: message`, the form compilers use, so editors can jump to it.
    public var description: String {
        var location = path
        if let line {
            location += ":\(line)"
            if let column { location += ":\(column)" }
        }
        return "\(location): \(message)"
    }
}
