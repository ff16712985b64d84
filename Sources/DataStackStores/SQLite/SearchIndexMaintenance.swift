@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Keeps the full-text indexes in step with one save of the store, in bulk:
/// before the rows go, one statement per table forgets the rows to delete;
/// after, one indexes the rows inserted. Updated rows are left to the update
/// trigger, which indexes only those whose indexed values changed (see
/// ``SearchIndexLayout``).
///
/// FTS5 writes its pending entries out at each statement of a transaction that
/// has touched it, so indexing row by row, as the triggers do for other
/// writers, costs a segment per row. The triggers stand aside while the flag of
/// ``SearchIndexLayout/writerTable`` is raised, which happens inside the save's
/// transaction only: if the save fails, the rollback lowers it again, and no
/// other connection ever sees it raised.
///
/// A save that touches no indexed table costs nothing here. Batch inserts
/// that only insert use the same flag and index their block of keys at the
/// end (``index(_:of:on:)``); upserting ones, which may change stored rows,
/// leave the indexing to the triggers.
struct SearchIndexMaintenance {
    private let schema: TableLayout
    private let connection: Connection
    /// Keys to forget (deleted rows) and to index (inserted rows), by entity table.
    private var removals: [String: [Int64]] = [:]
    private var additions: [String: [Int64]] = [:]

    init(schema: TableLayout, connection: Connection) {
        self.schema = schema
        self.connection = connection
    }

    /// The layout of the index over `entity`'s table, if it has one.
    private func layout(of entity: EntityDescription) throws -> SearchIndexLayout? {
        guard !schema.searchIndexes.isEmpty else { return nil }
        return schema.searchIndexes[try schema.mapping(for: entity).table]
    }

    /// Notes the rows a save deletes and inserts (with their keys).
    mutating func plan(deleted: [IncrementalStoreNode], inserted: [IncrementalStoreNode], insertedKeys: [Int64]) throws {
        guard !schema.searchIndexes.isEmpty else { return }
        for node in deleted {
            if let layout = try layout(of: node.objectID.entity), let key = node.objectID.primaryKey {
                removals[layout.table, default: []].append(key)
            }
        }
        for (node, key) in zip(inserted, insertedKeys) {
            if let layout = try layout(of: node.objectID.entity) {
                additions[layout.table, default: []].append(key)
            }
        }
    }

    /// Raises the flag and forgets the rows about to go; call before writing any row.
    func beforeWritingRows() throws {
        guard !removals.isEmpty || !additions.isEmpty else { return }
        try setFlag(true)
        for (table, keys) in removals {
            try run(schema.searchIndexes[table]?.removeRowsSQL, keys)
        }
    }

    /// Indexes the inserted rows as written and lowers the flag; call after writing them.
    func afterWritingRows() throws {
        guard !removals.isEmpty || !additions.isEmpty else { return }
        for (table, keys) in additions {
            try run(schema.searchIndexes[table]?.addRowsSQL, keys)
        }
        try setFlag(false)
    }

    private func run(_ sql: String?, _ keys: [Int64]) throws {
        guard let sql else { return }
        let statement = try connection.cachedStatement(sql)
        try statement.bind("[" + keys.map(String.init).joined(separator: ",") + "]", at: 1)
        try statement.execute()
    }

    private func setFlag(_ raised: Bool) throws {
        try Self.setFlag(raised, on: connection)
    }

    /// Raises or lowers the flag that sets the triggers aside, inside the caller's transaction.
    static func setFlag(_ raised: Bool, on connection: Connection) throws {
        let statement = try connection.cachedStatement(SearchIndexLayout.setWriterFlagSQL)
        try statement.bind(Int64(raised ? 1 : 0), at: 1)
        try statement.execute()
    }

    /// Indexes the rows a batch insert added, keys `keys`, as they are now.
    static func index(_ keys: Range<Int64>, of layout: SearchIndexLayout, on connection: Connection) throws {
        guard !keys.isEmpty else { return }
        let statement = try connection.cachedStatement(layout.addKeyRangeSQL)
        try statement.bind(keys.lowerBound, at: 1)
        try statement.bind(keys.upperBound - 1, at: 2)
        try statement.execute()
    }
}
