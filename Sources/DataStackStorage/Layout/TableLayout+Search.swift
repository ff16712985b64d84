import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// One full-text index of the SQLite store: an FTS5 table over the indexed
/// String columns of one entity table, kept in step with it by triggers.
///
/// The FTS5 table is an *external-content* table (`content='ZCOMPANY'`): it
/// holds the index only, and reads the texts from the entity table, so no text
/// is stored twice. Its name, `DS_SEARCH_<TABLE>`, cannot clash with Core
/// Data's tables, which all start with `Z`, `A` or `Y`.
///
/// Triggers on the entity table keep the index in step for every writer of
/// the file, in the writer's transaction: batch updates and deletes, another
/// program, even Apple's Core Data, whose SQLite has FTS5. The `unicode61`
/// tokenizer with `remove_diacritics 2` is built into FTS5, so any SQLite with
/// FTS5 can write the file; a tokenizer of our own would make it unwritable
/// elsewhere. ``SearchTokenizer`` tokenizes exactly as it does.
///
/// The store's own saves and batch inserts index their inserted and deleted
/// rows in bulk instead (``SearchIndexMaintenance``), one statement per table,
/// because FTS5 writes its pending entries out at every statement of a
/// transaction that touched it: a trigger indexing one row per `INSERT` cost
/// 18 times the insert, and one statement per save costs about what indexing
/// itself costs. They set ``writerTable``'s flag inside their transaction,
/// which the insert and delete triggers' `WHEN` reads to stand aside; no other
/// connection ever sees it set. Updates stay with their trigger, which fires
/// only for rows whose indexed values changed: a save rewrites every column
/// of the rows it updates, most of them (a price, a count) not indexed.
///
/// Related SQLite documentation: <https://www.sqlite.org/fts5.html#external_content_tables>
package struct SearchIndexLayout: Sendable, Hashable {
    /// The FTS5 table: `DS_SEARCH_<TABLE>`.
    package let name: String
    /// The entity table it indexes.
    package let table: String
    /// The indexed columns, in the entity table's order.
    package let columns: [String]

    /// The FTS5 table's name for an entity table.
    static func name(forTable table: String) -> String { "DS_SEARCH_" + table }

    /// The one-row table whose flag the store's own writers set inside their
    /// transaction while they index in bulk: the triggers then stand aside.
    package static let writerTable = "DS_SEARCH_WRITER"

    /// Creates ``writerTable`` with its flag down, when it is missing.
    package static let writerTableStatements = [
        "CREATE TABLE IF NOT EXISTS \(writerTable) (Z_PK INTEGER PRIMARY KEY, ZBULK INTEGER)",
        "INSERT OR IGNORE INTO \(writerTable) (Z_PK, ZBULK) VALUES (1, 0)",
    ]

    /// Raises (1) or lowers (0) the flag, inside the caller's transaction.
    package static let setWriterFlagSQL = "UPDATE \(writerTable) SET ZBULK = ?1 WHERE Z_PK = 1"

    /// The FTS5 table and its three triggers, exactly as `sqlite_master` keeps
    /// them: the store compares them with the file's to see that the index is in step.
    package var creationStatements: [String] {
        let list = columns.joined(separator: ", ")
        let newValues = columns.map { "new." + $0 }.joined(separator: ", ")
        let oldValues = columns.map { "old." + $0 }.joined(separator: ", ")
        let changed = columns.map { "old.\($0) IS NOT new.\($0)" }.joined(separator: " OR ")
        let unflagged = "(SELECT ZBULK FROM \(Self.writerTable) WHERE Z_PK = 1) IS NOT 1"
        let insert = "INSERT INTO \(name) (rowid, \(list)) VALUES (new.Z_PK, \(newValues));"
        // An external-content index forgets a row by being told the values it indexed.
        let remove = "INSERT INTO \(name) (\(name), rowid, \(list)) VALUES ('delete', old.Z_PK, \(oldValues));"
        return [
            // columnsize=0: no table of token counts per row, which only FTS5's own ranking
            // reads (ours runs in Swift, ``SearchQuery/relevance(of:)``); a fifth less to write per row.
            "CREATE VIRTUAL TABLE \(name) USING fts5(\(list), content='\(table)', content_rowid='Z_PK', columnsize=0, tokenize='unicode61 remove_diacritics 2')",
            "CREATE TRIGGER \(name)_INSERT AFTER INSERT ON \(table) WHEN \(unflagged) BEGIN \(insert) END",
            "CREATE TRIGGER \(name)_DELETE AFTER DELETE ON \(table) WHEN \(unflagged) BEGIN \(remove) END",
            // Not set aside by the flag: a save writes every column of an updated row, and only
            // the trigger knows cheaply which rows' indexed values changed (the rest cost nothing).
            "CREATE TRIGGER \(name)_UPDATE AFTER UPDATE OF \(list) ON \(table) WHEN \(changed) BEGIN \(remove) \(insert) END",
        ]
    }

    /// Forgets the rows whose keys are in the JSON array `?1`, with the values
    /// they hold now: run before they change or go.
    package var removeRowsSQL: String {
        let list = columns.joined(separator: ", ")
        return "INSERT INTO \(name) (\(name), rowid, \(list)) SELECT 'delete', Z_PK, \(list) FROM \(table) WHERE Z_PK IN (SELECT value FROM json_each(?1))"
    }

    /// Indexes the rows whose keys are in the JSON array `?1`, as they are now.
    package var addRowsSQL: String {
        let list = columns.joined(separator: ", ")
        return "INSERT INTO \(name) (rowid, \(list)) SELECT Z_PK, \(list) FROM \(table) WHERE Z_PK IN (SELECT value FROM json_each(?1))"
    }

    /// Indexes the rows with keys from `?1` through `?2`.
    package var addKeyRangeSQL: String {
        let list = columns.joined(separator: ", ")
        return "INSERT INTO \(name) (rowid, \(list)) SELECT Z_PK, \(list) FROM \(table) WHERE Z_PK BETWEEN ?1 AND ?2"
    }

    /// The names `creationStatements` create, in their order.
    package var objectNames: [String] { [name, name + "_INSERT", name + "_DELETE", name + "_UPDATE"] }

    /// The condition true for the row at `alias` when `columns` of it match
    /// the FTS5 expression in the parameter `query`: FTS5's column filter
    /// limits the match to those columns.
    static func matchSQL(index: String, alias: String, columns: [String], query: String) -> String {
        "\(alias).Z_PK IN (SELECT rowid FROM \(index) WHERE \(index) MATCH '{\(columns.joined(separator: " "))} : (' || \(query) || ')')"
    }

    /// Reads every row of the entity table into the (empty or stale) index.
    package var rebuildStatement: String { "INSERT INTO \(name) (\(name)) VALUES ('rebuild')" }
}

extension TableLayout {
    /// The full-text indexes the model asks for: one per entity table with
    /// attributes indexed for search (``AttributeDescription/isSearchIndexed``)
    /// in any of its entities.
    package func searchIndexLayouts() -> [SearchIndexLayout] {
        tables.compactMap { searchIndexes[$0.name] }
    }

    /// ``searchIndexLayouts()`` by entity table, built once with the schema.
    static func searchIndexes(tables: [Table], mappings: [ObjectIdentifier: EntityMapping]) -> [String: SearchIndexLayout] {
        var layouts: [String: SearchIndexLayout] = [:]
        for table in tables {
            var indexed: Set<String> = []
            for entity in table.root.selfAndDescendants {
                guard let mapping = mappings[ObjectIdentifier(entity)] else { continue }
                for attribute in entity.searchIndexedAttributes {
                    if let column = mapping.columns[attribute.index] { indexed.insert(column.name) }
                }
            }
            guard !indexed.isEmpty else { continue }
            layouts[table.name] = SearchIndexLayout(name: SearchIndexLayout.name(forTable: table.name), table: table.name,
                                                    columns: table.columns.map(\.name).filter(indexed.contains))
        }
        return layouts
    }

    /// ``SearchIndexLayout/matchSQL(index:alias:columns:query:)`` over the
    /// searched attributes' columns, or an error naming why the file's index can't serve.
    package func searchMatchSQL(for attributes: [AttributeDescription], alias: String, query: String, search: SearchQuery) throws -> String {
        var table: String?
        var columns: [String] = []
        for attribute in attributes {
            guard let entity = attribute.entity, let column = try mapping(for: entity).columns[attribute.index] else {
                throw ObjectGraphError.unknownKey(attribute.name, entity: attribute.entity?.name ?? "?")
            }
            table = try mapping(for: entity).table
            if !columns.contains(column.name) { columns.append(column.name) }
        }
        guard let table else { throw PredicateProblem("MATCHES[search] needs an attribute indexed for search") }
        let index = SearchIndexLayout.name(forTable: table)
        if let reason = unavailableSearchIndexes[index] { throw PredicateProblem(reason) }
        let described = SQLSearch(table: table, indexedColumns: searchIndexes[table]?.columns ?? columns, columns: columns,
                                  alias: alias, query: search, parameter: query)
        if let sql = try dialectWrites({ try dialect.searchMatch(described) }) { return sql }
        return SearchIndexLayout.matchSQL(index: index, alias: alias, columns: columns, query: query)
    }

    /// What a relevance sort by the column `column` of `table` at `alias` orders by
    /// (``SQLDialect/searchRelevance(_:)``), or nil when the store has no full-text index.
    package func searchRelevanceSQL(table: String, column: String, alias: String, query: SearchQuery, parameter: String) throws -> String? {
        if let reason = unavailableSearchIndexes[SearchIndexLayout.name(forTable: table)] { throw PredicateProblem(reason) }
        let described = SQLSearch(table: table, indexedColumns: searchIndexes[table]?.columns ?? [column], columns: [column],
                                  alias: alias, query: query, parameter: parameter)
        return try dialectWrites { try dialect.searchRelevance(described) }
    }

    /// Runs dialect code, turning what it throws into the predicate's problem.
    private func dialectWrites<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let problem as PredicateProblem {
            throw problem
        } catch {
            throw PredicateProblem(String(describing: error))
        }
    }
}
