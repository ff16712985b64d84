import Foundation
import DataStack

/// How values appear in the output: readable text, or JSON values.
///
/// In JSON a date is an ISO 8601 string in UTC with fractional seconds,
/// binary data is base64, a UUID and a URI are strings, a decimal is a
/// number (Core Data stores it as a double), an object is its URI
/// (`x-coredata://<STORE-UUID>/<Entity>/p<PK>`) and a to-many is an array of URIs.
enum ValueFormat {
    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// A date as ISO 8601, in UTC with milliseconds.
    static func date(_ date: Date) -> String {
        dateStyle.format(date)
    }

    /// An object ID as text: `KikChat p3`.
    static func text(_ id: ObjectID) -> String {
        "\(id.entityName) p\(id.primaryKey.map(String.init) ?? "?")"
    }

    /// A value as readable text: strings quoted, nil as `nil`, data as its size and first bytes.
    static func text(_ value: PropertyValue) -> String {
        switch value {
        case .null: "nil"
        case .integer(let number): String(number)
        case .double(let number): String(number)
        case .bool(let flag): String(flag)
        case .string(let string): quoted(string)
        case .date(let date): self.date(date)
        case .data(let data): bytes(data)
        case .uuid(let uuid): uuid.uuidString
        case .uri(let url): url.absoluteString
        case .decimal(let decimal): "\(decimal)"
        case .object(let id): text(id)
        case .objects(let ids): "[" + ids.map(text).joined(separator: ", ") + "]"
        }
    }

    /// A value as a JSON value for `JSONSerialization`.
    static func json(_ value: PropertyValue) -> Any {
        switch value {
        case .null: NSNull()
        case .integer(let number): Int(truncatingIfNeeded: number)
        case .double(let number): number.isFinite ? number as Any : String(number)
        case .bool(let flag): flag
        case .string(let string): string
        case .date(let date): self.date(date)
        case .data(let data): data.base64EncodedString()
        case .uuid(let uuid): uuid.uuidString
        case .uri(let url): url.absoluteString
        case .decimal(let decimal): NSDecimalNumber(decimal: decimal).doubleValue
        case .object(let id): id.uriRepresentation().absoluteString
        case .objects(let ids): ids.map { $0.uriRepresentation().absoluteString }
        }
    }

    /// A metadata value (from a property list) as a JSON value.
    static func json(metadata value: Any) -> Any {
        switch value {
        case let data as Data: data.base64EncodedString()
        case let date as Date: self.date(date)
        case let array as [Any]: array.map { json(metadata: $0) }
        case let dictionary as [String: Any]: dictionary.mapValues { json(metadata: $0) }
        case let string as String: string
        case let flag as Bool: flag
        case let number as Int: number
        case let number as Double: number.isFinite ? number as Any : String(number)
        default: "\(value)"
        }
    }

    /// A metadata value as readable text.
    static func text(metadata value: Any) -> String {
        switch value {
        case let data as Data: bytes(data)
        case let string as String: quoted(string)
        case let array as [Any]: "[" + array.map { text(metadata: $0) }.joined(separator: ", ") + "]"
        case let dictionary as [String: Any]:
            "{" + dictionary.keys.sorted().map { "\($0): \(text(metadata: dictionary[$0] ?? ""))" }.joined(separator: ", ") + "}"
        default: "\(value)"
        }
    }

    /// `<12 bytes 0a1b2c…>`: the size and the first 16 bytes in hex.
    static func bytes(_ data: Data) -> String {
        let hex = data.prefix(16).map { String(format: "%02x", $0) }.joined()
        return "<\(data.count) bytes\(data.isEmpty ? "" : " " + hex)\(data.count > 16 ? "…" : "")>"
    }

    /// A string in double quotes, escaped as a predicate literal.
    static func quoted(_ string: String) -> String {
        FetchExpression.constant(.string(string)).description
    }
}
