import Foundation

// The full-text indexes in the file (SearchIndexLayout): built when the store
// opens for writing and finds them missing or in another layout, rebuilt on
// request, and checked when the store opens read-only.
extension SQLiteStore {
    /// Rebuilds every full-text index of the store from its rows, in one
    /// transaction: drops the indexes and their triggers, creates them as the
    /// model asks, and reads every row into them.
    ///
    /// The store keeps its indexes in step by itself, and builds them when it
    /// opens a file without them (a store written by Apple's Core Data, or by
    /// a model that did not index these attributes yet). This repairs an index
    /// that was damaged or written without its triggers by another program.
    /// It also drops the indexes of attributes no longer indexed.
    ///
    /// It changes no object, so it leaves the persistent history alone, and
    /// runs on a store with history opened without history tracking too.
    ///
    /// - Throws: ``PersistentStoreError``: `.readOnly` for a read-only store,
    ///   or the SQLite failure; the file is then unchanged.
    public func rebuildSearchIndex() throws {
        let layouts = try schema.searchIndexLayouts()
        try write(changesObjects: false) { connection in
            do {
                try Self.replaceSearchIndexes(with: layouts, on: connection, rebuildingAll: true)
            } catch let error as SQLiteError {
                throw Self.storeError(error, url: url, doing: "rebuilding the search index")
            }
        }
        state.withLock { $0.schema?.unavailableSearchIndexes = [:] }
    }

    /// Brings the file's full-text indexes in step with the model when the
    /// store opens: a writable store builds what is missing or different (in
    /// one write transaction, which looks again once it holds the lock, so
    /// that two coordinators opening the file do the work once); a read-only
    /// one records what it lacks, so that searches through it throw.
    func synchronizeSearchIndexes(_ connection: Connection) throws {
        guard let layouts = state.withLock({ $0.schema })?.searchIndexLayouts() else { return }
        var differences = try Self.searchIndexDifferences(layouts, on: connection)
        if !differences.isEmpty, !isReadOnly {
            try connection.inWriteTransaction {
                try Self.replaceSearchIndexes(with: layouts, on: connection, rebuildingAll: false)
            }
            differences = [:]
        }
        // Read-only: indexes the model no longer asks for stay, unused; those it asks for and lacks refuse searches.
        differences[Self.unwantedIndexes] = nil
        let unavailable = differences.mapValues { problem in
            "the store's full-text index \(problem); the store is open read-only, so it can't build it: open it for writing once, or call rebuildSearchIndex()"
        }
        state.withLock { $0.schema?.unavailableSearchIndexes = unavailable }
    }

    /// Creates the indexes that are missing or differ from `layouts` (all of
    /// them when `rebuildingAll`) and fills them from their tables; drops
    /// indexes and triggers of ours that no layout names. Runs inside the
    /// caller's transaction.
    static func replaceSearchIndexes(with layouts: [SearchIndexLayout], on connection: Connection,
                                     rebuildingAll: Bool) throws {
        let existing = try searchIndexObjects(on: connection)
        let differences = try searchIndexDifferences(layouts, on: connection)
        let wanted = Set(layouts.flatMap(\.objectNames))
        if layouts.isEmpty {
            try connection.execute("DROP TABLE IF EXISTS \(SearchIndexLayout.writerTable)")
        } else {
            for statement in SearchIndexLayout.writerTableStatements { try connection.execute(statement) }
        }
        for layout in layouts where rebuildingAll || differences[layout.name] != nil {
            for name in layout.objectNames.reversed() where existing[name] != nil {
                try drop(name, existing[name]!, on: connection)
            }
            for statement in layout.creationStatements { try connection.execute(statement) }
            try connection.execute(layout.rebuildStatement)
        }
        for (name, object) in existing where !wanted.contains(name) {
            try drop(name, object, on: connection)
        }
    }

    /// The key of ``searchIndexDifferences(_:on:)`` for indexes and triggers of ours that no layout names.
    private static let unwantedIndexes = ""

    /// For each layout whose index the file lacks or holds in another form,
    /// what is wrong; under ``unwantedIndexes``, whether the file has indexes
    /// the model no longer asks for.
    static func searchIndexDifferences(_ layouts: [SearchIndexLayout], on connection: Connection) throws -> [String: String] {
        let existing = try searchIndexObjects(on: connection)
        var differences: [String: String] = [:]
        for layout in layouts {
            if existing[layout.name] == nil {
                differences[layout.name] = "\(layout.name) for \(layout.table) does not exist"
            } else if zip(layout.objectNames, layout.creationStatements).contains(where: { existing[$0]?.sql != $1 }) {
                differences[layout.name] = "\(layout.name) for \(layout.table) does not index the columns \(layout.columns.joined(separator: ", ")) as the model asks"
            }
        }
        let wanted = Set(layouts.flatMap(\.objectNames))
        if existing.keys.contains(where: { !wanted.contains($0) }) {
            differences[unwantedIndexes] = "has indexes the model no longer asks for"
        }
        return differences
    }

    private struct SearchIndexObject {
        var isTrigger: Bool
        var sql: String
    }

    /// Our FTS5 tables and triggers in the file, by name; the FTS5 tables' shadow tables are left out.
    private static func searchIndexObjects(on connection: Connection) throws -> [String: SearchIndexObject] {
        let statement = try connection.prepare("""
            SELECT type, name, sql FROM sqlite_master
            WHERE name LIKE 'DS\\_SEARCH\\_%' ESCAPE '\\' AND (type = 'trigger' OR sql LIKE 'CREATE VIRTUAL TABLE%')
            """)
        var objects: [String: SearchIndexObject] = [:]
        while try statement.step() {
            guard let name = statement.string(at: 1) else { continue }
            objects[name] = SearchIndexObject(isTrigger: statement.string(at: 0) == "trigger", sql: statement.string(at: 2) ?? "")
        }
        return objects
    }

    private static func drop(_ name: String, _ object: SearchIndexObject, on connection: Connection) throws {
        try connection.execute("DROP \(object.isTrigger ? "TRIGGER" : "TABLE") IF EXISTS \(Connection.quotedIdentifier(name))")
    }
}
