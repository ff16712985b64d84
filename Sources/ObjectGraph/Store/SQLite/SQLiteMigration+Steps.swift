import Foundation

// MARK: - The steps of a migration, inside one transaction on the copy

extension SQLiteMigration {
    /// Step 1: tables that only gain columns are altered in place; the other
    /// old entity and join tables move aside (without their indexes and
    /// triggers) and the new schema is created. Returns the tables moved
    /// aside: old name → name aside.
    static func prepareTables(_ connection: Connection, snapshot: StoreSchemaSnapshot, mapping: MappingModel) throws -> [String: String] {
        // Tables that only gain columns keep their rows (SQLiteMigration+InPlace.swift).
        let inPlace = mapping.tables.compactMap { inPlacePlan(for: $0, snapshot: snapshot) }
        let inPlaceNames = Set(inPlace.map(\.name))
        for table in inPlace { try alter(table, connection) }

        // Move the other old entity and join tables aside, without their indexes and triggers.
        var renamed: [String: String] = [:]
        for table in snapshot.rootsWithTables.compactMap(\.table) + snapshot.joinTables.keys.sorted() {
            guard renamed[table] == nil, !inPlaceNames.contains(table) else { continue }
            try dropIndexesAndTriggers(of: table, connection)
            let aside = "Z_MIGRATING_" + table
            try connection.execute("ALTER TABLE \(quoted(table)) RENAME TO \(quoted(aside))")
            renamed[table] = aside
        }
        for table in mapping.schema.tables where !inPlaceNames.contains(table.name) {
            guard try !connection.tableExists(table.name) else {
                throw SQLiteError(resultCode: SQLiteError.SQLITE_ERROR,
                                  message: "the file already has a table \(table.name) that is not an entity table of the store")
            }
        }
        for statement in try statementsLeft(mapping.schema.creationStatements(), inPlace: inPlace, connection) {
            try connection.execute(statement)
        }
        return renamed
    }

    /// Step 2: the rows of each table moved aside, into its new table, with
    /// the new entity numbers; `progress` gets the fraction copied, weighed by
    /// each table's `Z_MAX` (known without counting rows).
    static func copyRows(_ connection: Connection, mapping: MappingModel, from renamed: [String: String],
                         progress: (Double) -> Void) throws {
        let total = max(1, mapping.tables.reduce(0) { $0 + Int($1.sourceMaxPrimaryKey) })
        var copied = 0
        for table in mapping.tables {
            guard let source = table.sourceTable.flatMap({ renamed[$0] }), !table.entityNumbers.isEmpty else { continue }
            let targets = ["Z_PK", "Z_ENT", "Z_OPT"] + table.columns.map { quoted($0.destination) }
            let entityCase = "CASE Z_ENT " + table.entityNumbers.map { "WHEN \($0.source) THEN \($0.destination)" }.joined(separator: " ") + " END"
            let values = ["Z_PK", entityCase, "Z_OPT"] + table.columns.map { quoted($0.source) }
            try connection.execute("""
                INSERT INTO \(quoted(table.table.name)) (\(targets.joined(separator: ", "))) \
                SELECT \(values.joined(separator: ", ")) FROM \(quoted(source)) \
                WHERE Z_ENT IN (\(table.entityNumbers.map { String($0.source) }.joined(separator: ",")))
                """)
            copied += Int(table.sourceMaxPrimaryKey)
            progress(Double(copied) / Double(total))
        }
    }

    /// Step 3: join tables keep the pairs whose two rows both still exist.
    static func copyJoins(_ connection: Connection, mapping: MappingModel, from renamed: [String: String]) throws {
        for join in mapping.joins {
            guard let source = renamed[join.sourceTable] else { continue }
            let table = join.table
            try connection.execute("""
                INSERT OR IGNORE INTO \(quoted(table.name)) (\(join.columns.map { quoted($0.destination) }.joined(separator: ", "))) \
                SELECT \(join.columns.map { quoted($0.source) }.joined(separator: ", ")) FROM \(quoted(source)) s \
                WHERE EXISTS (SELECT 1 FROM \(quoted(table.ownerTable)) o WHERE o.Z_PK = s.\(quoted(join.columns[0].source))) \
                AND EXISTS (SELECT 1 FROM \(quoted(table.memberTable)) m WHERE m.Z_PK = s.\(quoted(join.columns[1].source)))
                """)
        }
    }

    /// Step 4: defaults for new and newly required attributes.
    static func fillDefaults(_ connection: Connection, mapping: MappingModel) throws {
        for table in mapping.tables {
            for fill in table.fills where !fill.entityNumbers.isEmpty {
                let statement = try connection.prepare(
                    "UPDATE \(quoted(table.table.name)) SET \(quoted(fill.column)) = ? WHERE \(quoted(fill.column)) IS NULL AND Z_ENT IN (\(fill.entityNumbers.map(String.init).joined(separator: ",")))")
                try statement.bind(fill.value, at: 1)
                try statement.execute()
            }
        }
    }

    /// Step 5: foreign keys to rows that were not carried over are cleared;
    /// entity columns are recomputed.
    static func clearDanglingForeignKeys(_ connection: Connection, mapping: MappingModel) throws {
        for table in mapping.tables {
            for toOne in table.toOnes where toOne.isCopied {
                let name = quoted(table.table.name)
                let key = quoted(toOne.column)
                try connection.execute("""
                    UPDATE \(name) SET \(key) = NULL WHERE \(key) IS NOT NULL AND NOT EXISTS \
                    (SELECT 1 FROM \(quoted(toOne.destinationTable)) d WHERE d.Z_PK = \(name).\(key) \
                    AND d.Z_ENT IN (\(toOne.destinationNumbers.map(String.init).joined(separator: ","))))
                    """)
                if let entityColumn = toOne.entityColumn {
                    try connection.execute("""
                        UPDATE \(name) SET \(quoted(entityColumn)) = (SELECT d.Z_ENT FROM \(quoted(toOne.destinationTable)) d \
                        WHERE d.Z_PK = \(name).\(key)) WHERE \(key) IS NOT NULL
                        """)
                }
            }
        }
    }

    /// Step 6: `Z_PRIMARYKEY` with the new numbering; each root keeps its counter.
    static func rewritePrimaryKeys(_ connection: Connection, mapping: MappingModel) throws {
        try connection.execute("DELETE FROM Z_PRIMARYKEY WHERE Z_ENT < \(StoreSchemaSnapshot.firstHistoryEntityNumber)")
        var maxByRoot: [String: Int64] = [:]
        for table in mapping.tables {
            let statement = try connection.prepare("SELECT max(Z_PK) FROM \(quoted(table.table.name))")
            let highest = try statement.step() ? statement.int64(at: 0) : 0
            maxByRoot[table.table.root.name] = max(highest, table.sourceMaxPrimaryKey)
        }
        let insertKey = try connection.prepare("INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, ?)")
        for row in mapping.schema.primaryKeyRows() {
            insertKey.reset()
            try insertKey.bind(row.number, at: 1)
            try insertKey.bind(row.name, at: 2)
            try insertKey.bind(row.superNumber, at: 3)
            try insertKey.bind(row.superNumber == 0 ? maxByRoot[row.name] ?? 0 : 0, at: 4)
            try insertKey.execute()
        }
    }

    /// Step 7: the metadata keeps the store UUID and takes the new model's
    /// hashes, digest and checksum; the compiled-model cache becomes the new
    /// model's, as Core Data's migrator leaves it.
    static func writeMetadata(_ connection: Connection, snapshot: StoreSchemaSnapshot, model: ManagedObjectModel) throws {
        var metadata = snapshot.metadata
        metadata.recordModel(model)
        let identifiers = model.versionIdentifiers.sorted()
        metadata[StoreMetadataKey.modelVersionIdentifiers] = identifiers.isEmpty ? [""] : identifiers
        metadata[StoreMetadataKey.storeType] = "SQLite"
        let updateMetadata = try connection.prepare("UPDATE Z_METADATA SET Z_PLIST = ?")
        try updateMetadata.bind(try StoreMetadataCoding.encode(metadata), at: 1)
        try updateMetadata.execute()
        try SQLiteStoreFile.writeModelCache(model, connection, url: nil)
    }

    /// Step 8: the history written before the migration is deleted, and with
    /// tracking the migration records a transaction of its own, as Core Data's
    /// schema migrator does (author `com.apple.coredata.schemamigrator:
    /// lightweight migration from model with digest { … }`, no changes).
    ///
    /// Old `ACHANGE` rows name entities by their old `Z_ENT` numbers and
    /// properties by their old `ZCOLUMNS` bits, which the new model numbers
    /// differently: read with it, they would name the wrong entities and
    /// properties. Deleted, a reader holding a token from before the migration
    /// is told its history is gone (``PersistentStoreError/Code/historyExpired``)
    /// and refetches, as it must after a schema change anyway; the transaction
    /// numbers continue from where they were.
    static func restartHistory(_ connection: Connection, snapshot: StoreSchemaSnapshot, recordsMigration: Bool) throws {
        guard try connection.tableExists("ATRANSACTION") else { return }
        guard try connection.tableExists("ATRANSACTIONSTRING") else {
            // Core Data's older layout (names inline), read here but not written: with its
            // history gone nothing is left to read, and the next open with tracking makes
            // the layout saves are recorded in (numbers go on from Z_MAX).
            try connection.execute("DROP TABLE ACHANGE; DROP TABLE ATRANSACTION")
            return
        }
        try connection.execute("DELETE FROM ACHANGE; DELETE FROM ATRANSACTION; DELETE FROM ATRANSACTIONSTRING")
        guard recordsMigration else { return }
        let digest = (snapshot.metadata[StoreMetadataKey.modelVersionHashesDigest] as? String).map { " from model with digest { \($0) }" }
        _ = try SQLiteHistoryLayout.insertTransaction(
            author: "com.apple.coredata.schemamigrator: lightweight migration" + (digest ?? ""), contextName: nil,
            connection: connection, url: nil)
    }
}
