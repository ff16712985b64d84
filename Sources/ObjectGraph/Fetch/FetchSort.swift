import Foundation

/// One key to order fetch results by (Core Data: `NSSortDescriptor` in a fetch request).
///
/// ```swift
/// FetchSort(key: "price", ascending: false)
/// FetchSort(key: "company.name", caseInsensitive: true)   // through a to-one relationship
/// ```
///
/// Nil sorts before every value, as in SQLite and Core Data.
public struct FetchSort: Sendable, Hashable {
    /// The key path to sort by: an attribute, possibly reached through to-one relationships.
    public var key: String
    /// Whether smaller values come first. The default is true.
    public var ascending: Bool
    /// Whether strings compare without regard to case (`caseInsensitiveCompare:`). The default is false.
    public var caseInsensitive: Bool

    public init(key: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    /// The key path split at its dots.
    package var keyPath: [String] { key.split(separator: ".").map(String.init) }
}
