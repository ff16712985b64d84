import Foundation

/// One attribute's or to-one relationship's value as it travels between
/// replicas: what the store keeps, with a related object named by its global
/// ID (local primary keys never leave their machine).
public enum SyncValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case string(String)
    case date(Date)
    case data(Data)
    case uuid(UUID)
    case url(URL)
    /// A `Decimal`, as its exact description (`"12.50"`).
    case decimal(String)
    /// A to-one relationship's destination, by its global ID.
    case object(UUID)
}
