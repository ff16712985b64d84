import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Full-text search indexes (PostgreSQLSearchIndex.swift)

extension PostgreSQLStore {
    /// Rebuilds every full-text index of the store from its rows, in one
    /// transaction: drops the side tables and triggers, creates them as the
    /// model asks, and indexes every row.
    ///
    /// The store keeps its indexes in step by itself and builds them when it
    /// opens a database without them; this repairs an index after rows were
    /// changed by SQL outside DataStack (which cannot tokenize as the store does).
    /// It changes no object and records no history.
    ///
    /// - Throws: ``ObjectGraph/PersistentStoreError``: `.readOnly` for a store
    ///   added read-only, or the server's failure; the database is then unchanged.
    public func rebuildSearchIndex() throws {
        if isReadOnly { throw PersistentStoreError.readOnly(url: reportedURL) }
        var layout = try layout
        try withConnection { connection in
            try connection.transaction {
                _ = try connection.execute("SELECT pg_advisory_xact_lock(hashtext('datastack.schema'))")
                try Self.replaceSearchIndexes(of: &layout, rebuildingAll: true, readOnly: false, connection)
            }
        }
        stateLock.withLock { state.layout = layout }
    }

    /// Brings the database's search indexes in step with the model when the
    /// store opens, inside the opening transaction (under its advisory lock, so
    /// of several machines opening at once one builds): builds what is missing
    /// or differs, and everything after a migration, which rebuilds tables. A
    /// read-only store that finds an index missing makes searches through it throw.
    static func synchronizeSearchIndexes(of layout: inout StoreLayout, migrated: Bool, readOnly: Bool,
                                         _ connection: PostgreSQLConnection) throws {
        try replaceSearchIndexes(of: &layout, rebuildingAll: migrated, readOnly: readOnly, connection)
    }

    private static func replaceSearchIndexes(of layout: inout StoreLayout, rebuildingAll: Bool, readOnly: Bool,
                                             _ connection: PostgreSQLConnection) throws {
        let wanted = layout.searchIndexes.map(PostgreSQLSearchIndex.init)
        let catalog = PostgreSQLSearchIndex.catalogTable
        var recorded: [String: String] = [:]
        if try tableExists(catalog.lowercased(), connection) {
            let rows = try connection.execute("SELECT ZTABLE, ZDEFINITION FROM \(catalog)")
            for row in 0..<rows.rowCount {
                if let table = rows.string(row: row, column: 0) { recorded[table] = rows.string(row: row, column: 1) ?? "" }
            }
        } else if wanted.isEmpty {
            return
        }
        let stale = wanted.filter { rebuildingAll || recorded[$0.index.table] != $0.definition }
        let unwanted = recorded.keys.filter { table in !wanted.contains { $0.index.table == table } }
        guard !stale.isEmpty || !unwanted.isEmpty else { return }
        if readOnly {
            for index in stale {
                layout.markSearchIndexUnavailable(table: index.index.table, reason: """
                    the store's full-text index of \(index.index.table) is missing or built for other attributes; the store is \
                    open read-only, so it can't build it: open it for writing once, or call rebuildSearchIndex()
                    """)
            }
            return
        }
        _ = try connection.execute("CREATE TABLE IF NOT EXISTS \(catalog) (ZTABLE TEXT PRIMARY KEY, ZDEFINITION TEXT NOT NULL)")
        for table in unwanted {
            try dropSearchIndex(of: table, connection)
            _ = try connection.execute("DELETE FROM \(catalog) WHERE ZTABLE = $1", [.text(table)])
        }
        guard !stale.isEmpty else { return }
        for statement in PostgreSQLSearchIndex.functionStatements { _ = try connection.execute(statement) }
        for index in stale {
            try dropSearchIndex(of: index.index.table, connection)
            for statement in index.creationStatements { _ = try connection.execute(statement) }
            try index.rebuild(connection)
            _ = try connection.execute("""
                INSERT INTO \(catalog) (ZTABLE, ZDEFINITION) VALUES ($1, $2) ON CONFLICT (ZTABLE) DO UPDATE SET ZDEFINITION = EXCLUDED.ZDEFINITION
                """, [.text(index.index.table), .text(index.definition)])
        }
    }

    /// Drops an index's side table and, if its entity table still exists, its trigger.
    private static func dropSearchIndex(of table: String, _ connection: PostgreSQLConnection) throws {
        _ = try connection.execute("DROP TABLE IF EXISTS \(PostgreSQLSearchIndex.sideTable(of: table))")
        if try tableExists(table.lowercased(), connection) {
            _ = try connection.execute("DROP TRIGGER IF EXISTS ds_search_forget ON \(table)")
        }
    }

    /// Re-indexes the rows of `keys` (of any entities) in their tables' indexes,
    /// inside the caller's transaction: what a save or batch wrote.
    func reindexSearch(_ keys: [(entity: EntityDescription, key: Int64)], layout: StoreLayout,
                       _ connection: PostgreSQLConnection) throws {
        guard !layout.searchIndexes.isEmpty, !keys.isEmpty else { return }
        var byTable: [String: (index: StoreLayout.SearchIndex, keys: [Int64])] = [:]
        var indexByEntity: [ObjectIdentifier: StoreLayout.SearchIndex?] = [:]
        for (entity, key) in keys {
            let index: StoreLayout.SearchIndex?
            if let known = indexByEntity[ObjectIdentifier(entity)] {
                index = known
            } else {
                index = try layout.searchIndex(of: entity)
                indexByEntity[ObjectIdentifier(entity)] = index
            }
            guard let index else { continue }
            byTable[index.table, default: (index, [])].keys.append(key)
        }
        for (_, entry) in byTable.sorted(by: { $0.key < $1.key }) {
            do {
                try PostgreSQLSearchIndex(entry.index).reindex(keys: entry.keys, connection)
            } catch let error as PostgreSQLSearchIndexError {
                throw PersistentStoreError(.ioFailure, url: reportedURL, message: error.message, underlying: error)
            }
        }
    }
}
