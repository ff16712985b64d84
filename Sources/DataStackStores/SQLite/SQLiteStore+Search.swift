@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

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
    /// one records the indexes it cannot read, so that searches through them throw.
    func synchronizeSearchIndexes(_ connection: Connection) throws {
        guard let layouts = state.withLock({ $0.schema })?.searchIndexLayouts() else { return }
        var file = try SearchIndexFile(connection)
        if !file.isInStep(with: layouts), !isReadOnly {
            try connection.inWriteTransaction {
                try Self.replaceSearchIndexes(with: layouts, on: connection, rebuildingAll: false)
            }
            file = try SearchIndexFile(connection)
        }
        let unavailable = file.unreadableIndexes(of: layouts).mapValues { problem in
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
        let file = try SearchIndexFile(connection)
        if layouts.isEmpty {
            try connection.execute("DROP TABLE IF EXISTS \(SearchIndexLayout.writerTable)")
        } else {
            for statement in SearchIndexLayout.writerTableStatements { try connection.execute(statement) }
        }
        for layout in layouts where rebuildingAll || !file.holds(layout) {
            for name in layout.objectNames.reversed() { try file.drop(name, on: connection) }
            for statement in layout.creationStatements { try connection.execute(statement) }
            try connection.execute(layout.rebuildStatement)
        }
        for name in file.names(notIn: layouts) { try file.drop(name, on: connection) }
    }
}

/// Our full-text tables and triggers as one read of `sqlite_master` finds them
/// (the FTS5 tables' shadow tables left out), compared with the layouts the
/// model asks for.
private struct SearchIndexFile {
    private struct Object {
        var isTrigger: Bool
        var sql: String
    }

    private var objects: [String: Object] = [:]
    private var hasWriterTable = false

    init(_ connection: Connection) throws {
        let statement = try connection.prepare("""
            SELECT type, name, sql FROM sqlite_master
            WHERE name = '\(SearchIndexLayout.writerTable)'
               OR (name LIKE 'DS\\_SEARCH\\_%' ESCAPE '\\' AND (type = 'trigger' OR sql LIKE 'CREATE VIRTUAL TABLE%'))
            """)
        while try statement.step() {
            guard let name = statement.string(at: 1) else { continue }
            if name == SearchIndexLayout.writerTable {
                hasWriterTable = true
            } else {
                objects[name] = Object(isTrigger: statement.string(at: 0) == "trigger", sql: statement.string(at: 2) ?? "")
            }
        }
    }

    /// Whether the file has `layout`'s table and triggers exactly as it creates them.
    func holds(_ layout: SearchIndexLayout) -> Bool {
        zip(layout.objectNames, layout.creationStatements).allSatisfy { objects[$0]?.sql == $1 }
    }

    /// Whether writers find everything they need and nothing the model no longer asks for.
    func isInStep(with layouts: [SearchIndexLayout]) -> Bool {
        layouts.allSatisfy(holds) && names(notIn: layouts).isEmpty && hasWriterTable == !layouts.isEmpty
    }

    /// For each layout whose FTS5 table is missing or indexes other columns,
    /// why: searches cannot read it. (Triggers only matter to writers.)
    func unreadableIndexes(of layouts: [SearchIndexLayout]) -> [String: String] {
        var problems: [String: String] = [:]
        for layout in layouts {
            guard let table = objects[layout.name] else {
                problems[layout.name] = "\(layout.name) for \(layout.table) does not exist"
                continue
            }
            if table.sql != layout.creationStatements[0] {
                problems[layout.name] = "\(layout.name) for \(layout.table) does not index the columns \(layout.columns.joined(separator: ", ")) as the model asks"
            }
        }
        return problems
    }

    /// Our tables and triggers that no layout names.
    func names(notIn layouts: [SearchIndexLayout]) -> [String] {
        let wanted = Set(layouts.flatMap(\.objectNames))
        return objects.keys.filter { !wanted.contains($0) }
    }

    /// Drops one of our tables or triggers, if the file has it.
    func drop(_ name: String, on connection: Connection) throws {
        guard let object = objects[name] else { return }
        try connection.execute("DROP \(object.isTrigger ? "TRIGGER" : "TABLE") IF EXISTS \(Connection.quotedIdentifier(name))")
    }
}
