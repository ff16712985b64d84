import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - The steps of a migration, inside the caller's transaction

extension SchemaMigration {
    /// Step 1: tables that only gain columns are altered in place; the other
    /// old entity and join tables move aside (without their indexes and
    /// triggers) and the new schema is created. Returns the tables moved
    /// aside: old name → name aside.
    func prepareTables(_ database: some MigratingDatabase) throws -> [String: String] {
        let quoted = database.dialect.quotedIdentifier
        // Tables that only gain columns keep their rows (SchemaMigration+InPlace.swift).
        let inPlace = mapping.tables.compactMap { inPlacePlan(for: $0, dialect: database.dialect) }
        let inPlaceNames = Set(inPlace.map { $0.name.uppercased() })
        for table in inPlace { try alter(table, database) }

        // Move the other old entity and join tables aside, without their indexes and triggers.
        var renamed: [String: String] = [:]
        for table in snapshot.rootsWithTables.compactMap(\.table) + snapshot.joinTables.keys.sorted() {
            guard renamed[table] == nil, !inPlaceNames.contains(table.uppercased()) else { continue }
            try database.dropDependents(of: table, keepingIndexes: false)
            let aside = "Z_MIGRATING_" + table
            try database.execute("ALTER TABLE \(quoted(table)) RENAME TO \(quoted(aside))", [])
            renamed[table] = aside
        }
        for table in mapping.schema.tables where !inPlaceNames.contains(table.name.uppercased()) {
            guard try !database.tableExists(table.name) else {
                throw Self.failure("the store already has a table \(table.name) that is not an entity table of the store", underlying: nil, url: url)
            }
        }
        for statement in try statementsLeft(mapping.schema.creationStatements(), inPlace: inPlace, database) {
            try database.execute(statement, [])
        }
        return renamed
    }

    /// Step 2: the rows of each table moved aside, into its new table, with
    /// the new entity numbers; `progress` gets the fraction copied, weighed by
    /// each table's `Z_MAX` (known without counting rows).
    func copyRows(_ database: some MigratingDatabase, from renamed: [String: String], progress: (Double) -> Void) throws {
        let quoted = database.dialect.quotedIdentifier
        let total = max(1, mapping.tables.reduce(0) { $0 + Int($1.sourceMaxPrimaryKey) })
        var copied = 0
        for table in mapping.tables {
            guard let source = table.sourceTable.flatMap({ renamed[$0] }), !table.entityNumbers.isEmpty else { continue }
            let targets = ["Z_PK", "Z_ENT", "Z_OPT"] + table.columns.map { quoted($0.destination) }
            let entityCase = "CASE Z_ENT " + table.entityNumbers.map { "WHEN \($0.source) THEN \($0.destination)" }.joined(separator: " ") + " END"
            let values = ["Z_PK", entityCase, "Z_OPT"] + table.columns.map { quoted($0.source) }
            try database.execute("""
                INSERT INTO \(quoted(table.table.name)) (\(targets.joined(separator: ", "))) \
                SELECT \(values.joined(separator: ", ")) FROM \(quoted(source)) \
                WHERE Z_ENT IN (\(table.entityNumbers.map { String($0.source) }.joined(separator: ",")))
                """, [])
            copied += Int(table.sourceMaxPrimaryKey)
            progress(Double(copied) / Double(total))
        }
    }

    /// Step 3: join tables keep the pairs whose two rows both still exist.
    func copyJoins(_ database: some MigratingDatabase, from renamed: [String: String]) throws {
        let quoted = database.dialect.quotedIdentifier
        for join in mapping.joins {
            guard let source = renamed[join.sourceTable] else { continue }
            let table = join.table
            // A pair stored twice is kept once: the pair is the table's key.
            try database.execute("""
                INSERT INTO \(quoted(table.name)) (\(join.columns.map { quoted($0.destination) }.joined(separator: ", "))) \
                SELECT \(join.columns.map { quoted($0.source) }.joined(separator: ", ")) FROM \(quoted(source)) s \
                WHERE EXISTS (SELECT 1 FROM \(quoted(table.ownerTable)) o WHERE o.Z_PK = s.\(quoted(join.columns[0].source))) \
                AND EXISTS (SELECT 1 FROM \(quoted(table.memberTable)) m WHERE m.Z_PK = s.\(quoted(join.columns[1].source))) \
                ON CONFLICT DO NOTHING
                """, [])
        }
    }

    /// Step 4: defaults for new and newly required attributes.
    func fillDefaults(_ database: some MigratingDatabase) throws {
        let dialect = database.dialect
        for table in mapping.tables {
            for fill in table.fills where !fill.entityNumbers.isEmpty {
                let column = dialect.quotedIdentifier(fill.column)
                try database.execute("""
                    UPDATE \(dialect.quotedIdentifier(table.table.name)) SET \(column) = \(dialect.parameter(1, boundTo: fill.value)) \
                    WHERE \(column) IS NULL AND Z_ENT IN (\(fill.entityNumbers.map(String.init).joined(separator: ",")))
                    """, [StoredValue(fill.value)])
            }
        }
    }

    /// Step 5: foreign keys to rows that were not carried over are cleared;
    /// entity columns are recomputed.
    func clearDanglingForeignKeys(_ database: some MigratingDatabase) throws {
        let quoted = database.dialect.quotedIdentifier
        for table in mapping.tables {
            for toOne in table.toOnes where toOne.isCopied {
                let name = quoted(table.table.name)
                let key = quoted(toOne.column)
                try database.execute("""
                    UPDATE \(name) SET \(key) = NULL WHERE \(key) IS NOT NULL AND NOT EXISTS \
                    (SELECT 1 FROM \(quoted(toOne.destinationTable)) d WHERE d.Z_PK = \(name).\(key) \
                    AND d.Z_ENT IN (\(toOne.destinationNumbers.map(String.init).joined(separator: ","))))
                    """, [])
                if let entityColumn = toOne.entityColumn {
                    try database.execute("""
                        UPDATE \(name) SET \(quoted(entityColumn)) = (SELECT d.Z_ENT FROM \(quoted(toOne.destinationTable)) d \
                        WHERE d.Z_PK = \(name).\(key)) WHERE \(key) IS NOT NULL
                        """, [])
                }
            }
        }
    }

    /// Step 6: `Z_PRIMARYKEY` with the new numbering; each root keeps its counter.
    func rewritePrimaryKeys(_ database: some MigratingDatabase) throws {
        let dialect = database.dialect
        try database.execute("DELETE FROM Z_PRIMARYKEY WHERE Z_ENT < \(StoreSchemaSnapshot.firstHistoryEntityNumber)", [])
        var maxByRoot: [String: Int64] = [:]
        for table in mapping.tables {
            let highest = try database.integer("SELECT max(Z_PK) FROM \(dialect.quotedIdentifier(table.table.name))") ?? 0
            maxByRoot[table.table.root.name] = max(highest, table.sourceMaxPrimaryKey)
        }
        let values = [dialect.parameter(1, boundTo: .integer(0)), dialect.parameter(2, boundTo: .string("")),
                      dialect.parameter(3, boundTo: .integer(0)), dialect.parameter(4, boundTo: .integer(0))]
        let insert = "INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (\(values.joined(separator: ", ")))"
        for row in mapping.schema.primaryKeyRows() {
            try database.execute(insert, [.integer(row.number), .text(row.name), .integer(row.superNumber),
                                          .integer(row.superNumber == 0 ? maxByRoot[row.name] ?? 0 : 0)])
        }
    }
}
