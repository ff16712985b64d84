import Foundation

// MARK: - Tables migrated in place

extension SQLiteMigration {
    /// A destination table whose rows can stay where they are: the same
    /// table, the same entity numbers, every column of the store kept under
    /// its name and declared type, only new columns added.
    ///
    /// Rebuilding such a table (a new table, every row copied into it, the old
    /// one dropped) costs a write of every row; `ALTER TABLE … ADD COLUMN`
    /// changes only the schema. The most common model change — a new attribute
    /// or relationship — then migrates in about the time of copying the file.
    struct InPlaceTable {
        /// The table, as the file spells it.
        let name: String
        /// The columns to add, in the destination's order.
        let addedColumns: [(name: String, declaredType: String)]
    }

    /// The in-place plan of `table`, or nil when its rows must be copied into a new table.
    static func inPlacePlan(for table: MappingModel.TableMapping, snapshot: StoreSchemaSnapshot) -> InPlaceTable? {
        guard let source = table.sourceTable, source.uppercased() == table.table.name.uppercased(),
              let stored = snapshot.columns[source],
              table.entityNumbers.allSatisfy({ $0.source == $0.destination }) else { return nil }
        // Every entity stored in the table keeps its rows: none is removed or renumbered.
        let storedEntities = Set(snapshot.entities.values.filter { $0.table?.uppercased() == source.uppercased() }.map(\.number))
        guard storedEntities == Set(table.entityNumbers.map(\.source)) else { return nil }
        // Every stored column is kept as it is; none is dropped or renamed.
        let bookkeeping: Set<String> = ["Z_PK", "Z_ENT", "Z_OPT"]
        var kept = Set<String>()
        for column in table.columns {
            guard column.source.uppercased() == column.destination.uppercased(),
                  let old = stored[column.source.uppercased()],
                  let new = table.table.columns.first(where: { $0.name.uppercased() == column.destination.uppercased() }),
                  old.declaredType.uppercased() == new.declaredType.uppercased() else { return nil }
            kept.insert(column.source.uppercased())
        }
        guard Set(stored.keys).subtracting(bookkeeping) == kept else { return nil }
        let added = table.table.columns.filter { !kept.contains($0.name.uppercased()) }
        return InPlaceTable(name: source, addedColumns: added)
    }

    /// Adds the new columns of an in-place table and drops its triggers, as a
    /// rebuilt table loses them. Its indexes are kept: ``reconcileIndexes(of:with:_:)``
    /// decides which stay.
    static func alter(_ table: InPlaceTable, _ connection: Connection) throws {
        try dropTriggers(of: table.name, connection)
        for column in table.addedColumns {
            try connection.execute("ALTER TABLE \(Connection.quotedIdentifier(table.name)) ADD COLUMN \(Connection.quotedIdentifier(column.name)) \(column.declaredType)")
        }
    }

    /// The schema's creation statements less what in-place tables already
    /// have: their `CREATE TABLE`, and indexes that exist with the same
    /// definition. Indexes of in-place tables that the schema no longer has,
    /// or has with another definition, are dropped.
    static func statementsLeft(_ statements: [String], inPlace: [InPlaceTable], _ connection: Connection) throws -> [String] {
        guard !inPlace.isEmpty else { return statements }
        let names = Set(inPlace.map { $0.name.uppercased() })
        var existing: [String: String] = [:]   // index name → SQL
        for table in inPlace {
            let indexes = try connection.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? COLLATE NOCASE AND sql IS NOT NULL")
            try indexes.bind(table.name, at: 1)
            while try indexes.step() {
                if let name = indexes.string(at: 0), let sql = indexes.string(at: 1) { existing[name.uppercased()] = sql }
            }
        }
        var left: [String] = []
        var wanted = Set<String>()
        for statement in statements {
            let words = statement.split(separator: " ", maxSplits: 5).map(String.init)
            if words.count > 2, words[1] == "TABLE", names.contains(words[2].uppercased()) { continue }
            if let index = words.firstIndex(of: "INDEX"), index + 1 < words.count {
                let name = words[index + 1].uppercased()
                wanted.insert(name)
                if existing[name] == statement { continue }
            }
            left.append(statement)
        }
        for (name, sql) in existing where !wanted.contains(name) || !statements.contains(sql) {
            try connection.execute("DROP INDEX \(Connection.quotedIdentifier(name))")
        }
        return left
    }

    static func dropTriggers(of table: String, _ connection: Connection) throws {
        let statement = try connection.prepare("SELECT name FROM sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND type = 'trigger'")
        try statement.bind(table, at: 1)
        var names: [String] = []
        while try statement.step() { if let name = statement.string(at: 0) { names.append(name) } }
        for name in names { try connection.execute("DROP TRIGGER \(Connection.quotedIdentifier(name))") }
    }
}
