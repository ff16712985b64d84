import Foundation

/// One property's value as an object, a row cache and a store hold it.
///
/// Objects keep their values in an array of `PropertyValue` slots indexed by the
/// entity's property index, so the save, fetch and fault paths never box values
/// in `Any`. Relationships hold object IDs, never objects, so a value can cross
/// queues and live in a coordinator's row cache.
///
/// A to-many slot that holds ``null`` has not been loaded yet: an empty to-many
/// relationship is `.objects([])`.
public enum PropertyValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case uri(URL)
    case decimal(Decimal)
    /// A to-one relationship's destination.
    case object(ObjectID)
    /// A to-many relationship's destinations; in order for an ordered relationship.
    case objects([ObjectID])

    /// Whether this is ``null``.
    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the kind of value, for error messages.
    package var kindDescription: String {
        switch self {
        case .null: "nil"
        case .integer: "an integer"
        case .double: "a floating-point number"
        case .bool: "a boolean"
        case .string: "a string"
        case .date: "a date"
        case .data: "binary data"
        case .uuid: "a UUID"
        case .uri: "a URL"
        case .decimal: "a decimal"
        case .object: "an object"
        case .objects: "a collection of objects"
        }
    }
}
