import Foundation

/// One key to order fetch results by (Core Data: `NSSortDescriptor` in a fetch request).
///
/// ```swift
/// FetchSort(key: "price", ascending: false)
/// FetchSort(key: "company.name", caseInsensitive: true)   // through a to-one relationship
/// ```
///
/// Nil sorts before every value, as in SQLite and Core Data.
///
/// A relevance sort orders by how well an attribute indexed for search
/// matches a ``SearchQuery`` (``SearchQuery/relevance(of:)``), most relevant
/// first; pair it with a `MATCHES[search]` predicate, and break its ties with
/// a sort by value:
///
/// ```swift
/// let query = try SearchQuery("apple pie")
/// request.predicate = try FetchPredicate(format: "name MATCHES[search] %@", query.text)
/// request.sortDescriptors = [FetchSort(key: "name", relevanceTo: query), FetchSort(key: "name")]
/// ```
public struct FetchSort: Sendable, Hashable {
    /// The key path to sort by: an attribute, possibly reached through to-one relationships.
    public var key: String
    /// Whether smaller values come first. The default is true.
    public var ascending: Bool
    /// Whether strings compare without regard to case (`caseInsensitiveCompare:`). The default is false.
    public var caseInsensitive: Bool

    /// For a relevance sort, the query whose relevance orders; nil for a sort by the key's value.
    public var relevanceQuery: SearchQuery?

    public init(key: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    /// Orders by the relevance of the attribute at `key` (a String attribute
    /// indexed for search, possibly through to-one relationships) to `query`:
    /// most relevant first, unless `ascending`. Objects that don't match have
    /// relevance 0. Saved objects, unsaved ones and the in-memory store's are
    /// ranked by the same Swift code (in SQL, a function the store installs).
    public init(key: String, relevanceTo query: SearchQuery, ascending: Bool = false) {
        self.init(key: key, ascending: ascending)
        self.relevanceQuery = query
    }

    /// The value the sort orders by, from the value at its key path: the value
    /// itself, or for a relevance sort the relevance of its text.
    package func sortValue(_ value: PropertyValue) -> PropertyValue {
        guard let relevanceQuery else { return value }
        guard case .string(let text) = value else { return .double(0) }
        return .double(relevanceQuery.relevance(of: [text]))
    }

    /// The key path split at its dots.
    package var keyPath: [String] { key.split(separator: ".").map(String.init) }
}
