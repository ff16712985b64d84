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
/// Inserted rows are indexed by runs of consecutive keys (`Z_PK BETWEEN`): a
/// save allocates each table's new keys as one block, so a save's inserts into a
/// table are one run, read by one range scan, where a list of keys cost a JSON
/// array, an ephemeral index of it and a seek per key (~3,000 instructions a
/// row). A save inserting many rows and updating none of an indexed table also
/// turns the connection's triggers off while it writes (``TriggerSuspension``):
/// a trigger, even one whose `WHEN` stands aside, makes every `INSERT` run a
/// sub-program and open a statement journal.
///
/// A save that touches no indexed table costs nothing here. Batch inserts
/// that only insert use the same flag and index their block of keys at the
/// end (``index(_:of:on:)``); upserting ones, which may change stored rows,
/// leave the indexing to the triggers.
struct SearchIndexMaintenance {
    private let schema: TableLayout
    private let connection: Connection
    /// Keys to forget (deleted rows), by entity table.
    private var removals: [String: [Int64]] = [:]
    /// Keys to index (inserted rows), by entity table, as runs of consecutive keys.
    private var additions: [(table: String, runs: [ClosedRange<Int64>])] = []
    /// Whether the save updates a row of an indexed table (then the update trigger must stay on).
    private var updatesIndexedRows = false
    /// Rows inserted into indexed tables.
    private var insertedCount = 0
    /// Whether this save turned the connection's triggers off (``restoreTriggers()`` turns them on).
    private var suspended = false

    /// Runs of more keys than this go to the index as a JSON list in one statement rather than a range each.
    private static let maximumRanges = 16

    init(schema: TableLayout, connection: Connection) {
        self.schema = schema
        self.connection = connection
    }

    /// The layout of the index over `entity`'s table, if it has one.
    private func layout(of entity: EntityDescription) throws -> SearchIndexLayout? {
        guard !schema.searchIndexes.isEmpty else { return nil }
        return schema.searchIndexes[try schema.mapping(for: entity).table]
    }

    /// Notes the rows a save deletes, updates and inserts (with their keys).
    mutating func plan(deleted: [IncrementalStoreNode], updated: [IncrementalStoreNode], inserted: [IncrementalStoreNode],
                       insertedKeys: [Int64]) throws {
        guard !schema.searchIndexes.isEmpty else { return }
        // Each entity's table is looked up once per run of its rows, not hashed per row.
        var table = TableOfEntity(self)
        for node in deleted {
            if let name = try table.of(node.objectID.entity), let key = node.objectID.primaryKey {
                removals[name, default: []].append(key)
            }
        }
        for node in updated where try table.of(node.objectID.entity) != nil {
            updatesIndexedRows = true
            break
        }
        var slot: Int?
        var lastEntity: ObjectIdentifier?
        for (node, key) in zip(inserted, insertedKeys) {
            let entity = ObjectIdentifier(node.objectID.entity)
            if entity != lastEntity {
                lastEntity = entity
                slot = try table.of(node.objectID.entity).map { name in
                    if let found = additions.firstIndex(where: { $0.table == name }) { return found }
                    additions.append((name, []))
                    return additions.count - 1
                }
            }
            guard let slot else { continue }
            insertedCount += 1
            if let last = additions[slot].runs.last, last.upperBound &+ 1 == key {
                additions[slot].runs[additions[slot].runs.count - 1] = last.lowerBound...key
            } else {
                additions[slot].runs.append(key...key)
            }
        }
    }

    /// Raises the flag (or turns the triggers off) and forgets the rows about
    /// to go; call before writing any row, and ``restoreTriggers()`` after, on every path.
    mutating func beforeWritingRows() throws {
        guard !removals.isEmpty || !additions.isEmpty else { return }
        if !updatesIndexedRows, insertedCount >= TriggerSuspension.minimumRows {
            suspended = try TriggerSuspension.suspend(on: connection, schema: schema)
        }
        do {
            if !suspended { try setFlag(true) }
            for (table, keys) in removals {
                try run(schema.searchIndexes[table]?.removeRowsSQL, keys)
            }
        } catch {
            restoreTriggers()
            throw error
        }
    }

    /// Indexes the inserted rows as written and lowers the flag; call after writing them.
    func afterWritingRows() throws {
        guard !removals.isEmpty || !additions.isEmpty else { return }
        for (table, runs) in additions {
            guard let layout = schema.searchIndexes[table] else { continue }
            if runs.count <= Self.maximumRanges {
                for run in runs { try Self.index(run.lowerBound..<(run.upperBound + 1), of: layout, on: connection) }
            } else {
                try run(layout.addRowsSQL, runs.flatMap { Array($0) })
            }
        }
        if !suspended { try setFlag(false) }
    }

    /// Turns the connection's triggers back on if this save turned them off;
    /// call once the rows are written, also when writing them failed.
    func restoreTriggers() {
        if suspended { TriggerSuspension.resume(on: connection) }
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

    /// The indexed table of each entity met, remembered for the entity met last.
    private struct TableOfEntity {
        let maintenance: SearchIndexMaintenance
        var last: (entity: ObjectIdentifier, table: String?)?

        init(_ maintenance: SearchIndexMaintenance) {
            self.maintenance = maintenance
        }

        mutating func of(_ entity: EntityDescription) throws -> String? {
            if let last, last.entity == ObjectIdentifier(entity) { return last.table }
            let table = try maintenance.layout(of: entity)?.table
            last = (ObjectIdentifier(entity), table)
            return table
        }
    }
}

/// Turns the writer connection's triggers off while a save inserts many rows
/// into indexed tables and updates none of them, and on again after.
///
/// The search triggers stand aside for the store's own saves (their `WHEN`
/// reads the writer flag), but a trigger on a table still makes each `INSERT`
/// into it run the trigger's program and, being a statement that may write
/// twice and joining FTS5 to it, open and close a statement journal and call
/// FTS5's savepoint methods: ~4,700 instructions a row (callgrind, the search
/// task's import), about what FTS5 spends indexing the row. With the
/// triggers off, the save indexes its inserted rows and forgets its deleted
/// ones itself, as it does anyway. It turns them off only when every trigger
/// of the file is a search index's own, so a trigger of anyone else's (Core
/// Data's, the app's) always fires.
///
/// Changing the setting expires the connection's prepared statements, which
/// SQLite prepares again when they next run (the save's, then once more the
/// next save's; a prepare costs ~7,500 instructions here, ~0.2 M a save):
/// it pays from some 50 rows on; ``minimumRows`` leaves small saves, the
/// common ones, with the flag as before.
enum TriggerSuspension {
    /// Inserted rows of indexed tables from which a save turns the triggers off.
    static let minimumRows = 1_000

    /// Turns the triggers off if every trigger of the file is a search index's; whether it did.
    static func suspend(on connection: Connection, schema: TableLayout) throws -> Bool {
        let ours = Set(schema.searchIndexLayouts().flatMap { $0.objectNames.dropFirst() })
        let statement = try connection.cachedStatement("""
            SELECT name FROM sqlite_master WHERE type = 'trigger' UNION ALL SELECT name FROM sqlite_temp_master WHERE type = 'trigger'
            """)
        defer { statement.reset() }
        while try statement.step() {
            guard let name = statement.string(at: 0), ours.contains(name) else { return false }
        }
        return !connection.setTriggersEnabled(false)
    }

    /// Turns the triggers on again.
    static func resume(on connection: Connection) {
        connection.setTriggersEnabled(true)
    }
}
