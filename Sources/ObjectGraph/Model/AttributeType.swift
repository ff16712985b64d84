import Foundation

/// The type of an attribute (Core Data: `NSAttributeType`).
///
/// Each case fixes how a value is held in memory (``PropertyValue``) and how the
/// SQLite store writes it, following Core Data's file format:
///
/// | type | in memory | SQLite column |
/// |---|---|---|
/// | ``integer16``, ``integer32``, ``integer64`` | `.integer` | `INTEGER` |
/// | ``boolean`` | `.bool` | `INTEGER` 0/1 |
/// | ``double``, ``float`` | `.double` | `FLOAT` |
/// | ``decimal`` | `.decimal` | `DECIMAL` (a double, as Core Data stores it) |
/// | ``string`` | `.string` | `VARCHAR` |
/// | ``date`` | `.date` | `TIMESTAMP`, seconds since 2001-01-01 |
/// | ``binaryData`` | `.data` | `BLOB` |
/// | ``uuid`` | `.uuid` | `BLOB`, 16 bytes |
/// | ``uri`` | `.uri` | `VARCHAR` |
/// | ``transformable`` | `.data` (the encoded value) | `BLOB` |
public enum AttributeType: String, Sendable, Hashable, CaseIterable {
    case integer16
    case integer32
    case integer64
    case double
    case float
    case decimal
    case boolean
    case string
    case date
    case binaryData
    case uuid
    case uri
    /// A `Codable` value, encoded as a property list when stored.
    case transformable

    /// Core Data's numeric code for the type (`NSAttributeType`), used in version hashes.
    package var coreDataCode: Int {
        switch self {
        case .integer16: 100
        case .integer32: 200
        case .integer64: 300
        case .decimal: 400
        case .double: 500
        case .float: 600
        case .string: 700
        case .boolean: 800
        case .date: 900
        case .binaryData: 1000
        case .uuid: 1100
        case .uri: 1200
        case .transformable: 1800
        }
    }

    /// The type with Core Data's numeric code (`NSAttributeType`), as compiled
    /// models store it; nil for codes with no type here (0 undefined, 2000
    /// object ID, 2100 composite, or anything unknown).
    package init?(coreDataCode: Int) {
        guard let type = Self.allCases.first(where: { $0.coreDataCode == coreDataCode }) else { return nil }
        self = type
    }

    /// Core Data's codes that name a type this engine does not store, by name for messages.
    package static let unsupportedCodeNames: [Int: String] = [0: "Undefined (0)", 2000: "Object ID (2000)", 2100: "Composite (2100)"]

    /// Whether a value of the given kind may be stored in an attribute of this type.
    package func accepts(_ value: PropertyValue) -> Bool {
        switch (self, value) {
        case (_, .null): true
        case (.integer16, .integer), (.integer32, .integer), (.integer64, .integer): true
        case (.double, .double), (.float, .double): true
        case (.decimal, .decimal): true
        case (.boolean, .bool): true
        case (.string, .string): true
        case (.date, .date): true
        case (.binaryData, .data), (.transformable, .data): true
        case (.uuid, .uuid): true
        case (.uri, .uri): true
        default: false
        }
    }

    /// The range an integer attribute can hold.
    package var integerRange: ClosedRange<Int64>? {
        switch self {
        case .integer16: Int64(Int16.min)...Int64(Int16.max)
        case .integer32: Int64(Int32.min)...Int64(Int32.max)
        case .integer64: Int64.min...Int64.max
        default: nil
        }
    }
}
