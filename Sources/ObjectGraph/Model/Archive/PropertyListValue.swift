import Foundation

/// One value of a property list, as ``BinaryPropertyList`` reads and writes it.
///
/// Keyed archives need `uid`, which Foundation's property list types lack; sets
/// read as `array` (the archives we read never rely on a bplist set).
package enum PropertyListValue: Sendable, Hashable {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    /// A date, stored as seconds since 2001-01-01 00:00:00 UTC.
    case date(Date)
    case data(Data)
    case string(String)
    /// A keyed archive's reference to an entry of `$objects`.
    case uid(Int)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])
}

extension PropertyListValue {
    /// The value's kind in words, for error messages ("a string", "a UID").
    package var kindDescription: String {
        switch self {
        case .bool: "a boolean"
        case .integer: "an integer"
        case .real: "a real"
        case .date: "a date"
        case .data: "data"
        case .string: "a string"
        case .uid: "a UID"
        case .array: "an array"
        case .dictionary: "a dictionary"
        }
    }

    /// The string, when the value is one.
    package var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// The dictionary, when the value is one.
    package var dictionaryValue: [String: PropertyListValue]? {
        if case .dictionary(let dictionary) = self { return dictionary }
        return nil
    }
}
