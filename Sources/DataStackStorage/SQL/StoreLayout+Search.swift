import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The full-text indexes the model asks for, for a store that keeps them with
/// its own machinery (the PostgreSQL store): which columns of which tables
/// hold attributes indexed for search (``AttributeDescription/isIndexedBySpotlight``
/// on a stored String attribute), as the SQLite store's FTS5 tables index them.
@_spi(StoreImplementation)
extension StoreLayout {
    /// One entity table's indexed columns.
    public struct SearchIndex: Sendable, Hashable {
        /// The entity table (`ZCOMPANY`).
        public let table: String
        /// Its columns holding attributes indexed for search, in the table's order.
        public let columns: [String]
    }

    /// Every entity table with attributes indexed for search, in the layout's table order.
    public var searchIndexes: [SearchIndex] {
        schema.searchIndexLayouts().map { SearchIndex(table: $0.table, columns: $0.columns) }
    }

    /// The index over `entity`'s table, if it has one.
    public func searchIndex(of entity: EntityDescription) throws -> SearchIndex? {
        guard let layout = schema.searchIndexes[try schema.mapping(for: entity).table] else { return nil }
        return SearchIndex(table: layout.table, columns: layout.columns)
    }

    /// Makes every search through `table`'s index throw `reason` (a read-only
    /// store that finds its index missing or stale, and cannot build it).
    public mutating func markSearchIndexUnavailable(table: String, reason: String) {
        schema.unavailableSearchIndexes[SearchIndexLayout.name(forTable: table)] = reason
    }
}
