import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Tables migrated in place

extension SchemaMigration {
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
    func inPlacePlan(for table: MappingModel.TableMapping, dialect: any SQLDialect) -> InPlaceTable? {
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
                  old.declaredType.uppercased() == dialect.columnType(declared: new.declaredType).uppercased() else { return nil }
            kept.insert(column.source.uppercased())
        }
        guard Set(stored.keys).subtracting(bookkeeping) == kept else { return nil }
        let added = table.table.columns.filter { !kept.contains($0.name.uppercased()) }
            .map { (name: $0.name, declaredType: dialect.columnType(declared: $0.declaredType)) }
        return InPlaceTable(name: source, addedColumns: added)
    }

    /// Adds the new columns of an in-place table and drops its triggers, as a
    /// rebuilt table loses them. Its indexes are kept: ``statementsLeft(_:inPlace:_:)``
    /// decides which stay.
    func alter(_ table: InPlaceTable, _ database: some MigratingDatabase) throws {
        let quoted = database.dialect.quotedIdentifier
        try database.dropDependents(of: table.name, keepingIndexes: true)
        for column in table.addedColumns {
            try database.execute("ALTER TABLE \(quoted(table.name)) ADD COLUMN \(quoted(column.name)) \(column.declaredType)", [])
        }
    }

    /// The schema's creation statements less what in-place tables already
    /// have: their `CREATE TABLE`, and indexes that exist with the same
    /// definition. Indexes of in-place tables that the schema no longer has,
    /// or has with another definition, are dropped. (PostgreSQL keeps an
    /// index's SQL in its own spelling, so there every index of an in-place
    /// table is created again.)
    func statementsLeft(_ statements: [String], inPlace: [InPlaceTable], _ database: some MigratingDatabase) throws -> [String] {
        guard !inPlace.isEmpty else { return statements }
        let names = Set(inPlace.map { $0.name.uppercased() })
        var existing: [String: (name: String, sql: String)] = [:]   // by upper-cased index name
        for table in inPlace {
            for index in try database.indexes(on: table.name) { existing[index.name.uppercased()] = index }
        }
        var left: [String] = []
        var wanted = Set<String>()
        for statement in statements {
            let words = statement.split(separator: " ", maxSplits: 5).map(String.init)
            if words.count > 2, words[1] == "TABLE", names.contains(words[2].uppercased()) { continue }
            if let index = words.firstIndex(of: "INDEX"), index + 1 < words.count {
                let name = words[index + 1].uppercased()
                wanted.insert(name)
                if existing[name]?.sql == statement { continue }
            }
            left.append(statement)
        }
        for (key, index) in existing where !wanted.contains(key) || !statements.contains(index.sql) {
            try database.execute("DROP INDEX \(database.dialect.quotedIdentifier(index.name))", [])
        }
        return left
    }
}
