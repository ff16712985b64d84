import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// What an existing store file holds, read from the file itself: the entities
/// of `Z_PRIMARYKEY` and the columns of their tables.
///
/// Migration infers its mapping from this, because the model that wrote a
/// store is usually not at hand: Core Data's version hashes differ from ours,
/// so the store's `NSStoreModelVersionHashes` cannot pick a model version.
package struct StoreSchemaSnapshot {
    /// One row of `Z_PRIMARYKEY`.
    struct Entity: Sendable {
        /// `Z_ENT`.
        let number: Int64
        /// `Z_NAME`: the entity's name when the store was written (Core Data
        /// sometimes keeps an old name after renaming an entity).
        let name: String
        /// `Z_SUPER`, 0 for a root.
        let superNumber: Int64
        /// `Z_MAX`: the last primary key handed out (roots only).
        let maxPrimaryKey: Int64
        /// `Z_ENT` of the root of its hierarchy.
        fileprivate(set) var rootNumber: Int64
        /// The root's table as the file spells it; nil when the file has none.
        fileprivate(set) var table: String?
    }

    /// A column as the file declares it.
    struct Column: Sendable {
        let name: String
        let declaredType: String
    }

    /// The entities by `Z_ENT`.
    private(set) var entities: [Int64: Entity] = [:]
    /// The entities by `Z_NAME`.
    private(set) var entitiesByName: [String: Entity] = [:]
    /// The columns of each entity table, by upper-cased column name.
    private(set) var columns: [String: [String: Column]] = [:]
    /// Every table of the file, by upper-cased name.
    private(set) var tableNames: [String: String] = [:]
    /// The many-to-many join tables (`Z_<n><RELATIONSHIP>`) as the file spells
    /// them, with their upper-cased column names.
    private(set) var joinTables: [String: Set<String>] = [:]
    /// The store's metadata.
    let metadata: StoreMetadata

    /// `Z_ENT` numbers from this value up belong to Core Data's persistent
    /// history (`ACHANGE`, `ATRANSACTION`), not to the model.
    static let firstHistoryEntityNumber: Int64 = 16000

    /// Reads the snapshot of the store in `database`, whose metadata is `metadata`.
    package init(database: some MigratingDatabase, metadata: StoreMetadata) throws {
        self.metadata = metadata
        for name in try database.tableNames() { tableNames[name.uppercased()] = name }
        try database.query("SELECT Z_ENT, Z_NAME, Z_SUPER, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT", []) { row in
            let number = try row.int64(at: 0)
            guard number < Self.firstHistoryEntityNumber, let name = row.string(at: 1) else { return }
            entities[number] = Entity(number: number, name: name, superNumber: row.isNull(at: 2) ? 0 : try row.int64(at: 2),
                                      maxPrimaryKey: row.isNull(at: 3) ? 0 : try row.int64(at: 3), rootNumber: number, table: nil)
        }
        let renamed = Self.staleNames(entities: entities.values.map(\.name), metadata: metadata)
        for number in Array(entities.keys) {
            var root = number
            var steps = 0
            while let parent = entities[root]?.superNumber, parent != 0, entities[parent] != nil, steps < entities.count {
                root = parent
                steps += 1
            }
            entities[number]?.rootNumber = root
            if let rootName = entities[root]?.name {
                entities[number]?.table = tableNames[("Z" + rootName).uppercased()]
            }
        }
        for entity in entities.values {
            entitiesByName[entity.name] = entity
            if let current = renamed[entity.name] { entitiesByName[current] = entity }
            guard let table = entity.table, columns[table] == nil else { continue }
            var byName: [String: Column] = [:]
            for column in try database.columns(in: table) {
                byName[column.name.uppercased()] = Column(name: column.name, declaredType: column.declaredType.uppercased())
            }
            columns[table] = byName
        }
        for name in tableNames.values where Self.isJoinTableName(name) {
            joinTables[name] = Set(try database.columns(in: name).map { $0.name.uppercased() })
        }
    }

    /// Core Data can leave an entity's old name in `Z_PRIMARYKEY` after renaming
    /// it in a migration, while `NSStoreModelVersionHashes` has the new name. When
    /// exactly one name differs between the two, the old name maps to the new.
    private static func staleNames(entities names: [String], metadata: StoreMetadata) -> [String: String] {
        guard let hashes = ManagedObjectModel.versionHashes(in: metadata) else { return [:] }
        let keyNames = Set(names), hashNames = Set(hashes.keys)
        let stale = keyNames.subtracting(hashNames), current = hashNames.subtracting(keyNames)
        guard stale.count == 1, current.count == 1, let old = stale.first, let new = current.first else { return [:] }
        return [old: new]
    }

    /// Whether a table name has the form of a join table: `Z_`, digits, then a name.
    static func isJoinTableName(_ name: String) -> Bool {
        let characters = Array(name.uppercased().utf8)
        guard characters.count > 3, characters[0] == UInt8(ascii: "Z"), characters[1] == UInt8(ascii: "_") else { return false }
        var index = 2
        while index < characters.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(characters[index]) { index += 1 }
        return index > 2 && index < characters.count
    }

    /// The join table (as the file spells it) holding both columns, if there is one.
    func joinTable(named name: String, with columns: [String]) -> String? {
        guard let actual = tableNames[name.uppercased()], let real = joinTables[actual] else { return nil }
        return columns.allSatisfy { real.contains($0.uppercased()) } ? actual : nil
    }

    /// The roots whose table the file has.
    var rootsWithTables: [Entity] {
        entities.values.filter { $0.number == $0.rootNumber && $0.table != nil }.sorted { $0.number < $1.number }
    }

    /// `FROM <table> WHERE Z_ENT IN (<numbers>)`: the rows of some entities,
    /// the clause every count of a migration reads.
    static func rows(of table: String, entityNumbers: [Int64], _ dialect: any SQLDialect) -> String {
        "FROM \(dialect.quotedIdentifier(table)) WHERE Z_ENT IN (\(entityNumbers.map(String.init).joined(separator: ",")))"
    }

    /// Counts the rows of some entities in a table, optionally only those where a column is NULL.
    static func countRows(in table: String, entityNumbers: [Int64], whereNull column: String?,
                          database: some MigratingDatabase) throws -> Int {
        guard !entityNumbers.isEmpty else { return 0 }
        var sql = "SELECT count(*) " + rows(of: table, entityNumbers: entityNumbers, database.dialect)
        if let column { sql += " AND \(database.dialect.quotedIdentifier(column)) IS NULL" }
        return Int(try database.integer(sql) ?? 0)
    }
}

/// Counts the rows of some entities in a store's table, and those where a
/// column is NULL: every count of a table and set of entities comes from one
/// scan of the table, made the first time one is asked for. Inferring a
/// mapping asks about most columns of a table; a scan per column would read a
/// large store several times over.
package final class StoreRowCounter<Database: MigratingDatabase> {
    private let database: Database
    private let snapshot: StoreSchemaSnapshot
    /// By table and entity numbers: the rows, and the NULLs by upper-cased column.
    private var scans: [String: (rows: Int, nulls: [String: Int])] = [:]

    package init(database: Database, snapshot: StoreSchemaSnapshot) {
        self.database = database
        self.snapshot = snapshot
    }

    /// The rows of `entityNumbers` in `table`, or only those where `column` is NULL.
    package func count(in table: String, entityNumbers: [Int64], whereNull column: String?) throws -> Int {
        guard !entityNumbers.isEmpty else { return 0 }
        let key = table.uppercased() + " " + entityNumbers.map(String.init).joined(separator: ",")
        let scan = try scans[key] ?? self.scan(table, entityNumbers)
        scans[key] = scan
        guard let column else { return scan.rows }
        if let nulls = scan.nulls[column.uppercased()] { return nulls }
        return try StoreSchemaSnapshot.countRows(in: table, entityNumbers: entityNumbers, whereNull: column, database: database)
    }

    private func scan(_ table: String, _ entityNumbers: [Int64]) throws -> (rows: Int, nulls: [String: Int]) {
        let dialect = database.dialect
        let columns = (snapshot.columns[table] ?? [:]).values.map(\.name).sorted()
        // count(*) - count(column): the NULLs, in SQL both dialects speak.
        let nullCounts = columns.map { ", count(*) - count(\(dialect.quotedIdentifier($0)))" }.joined()
        var result: (rows: Int, nulls: [String: Int]) = (0, [:])
        try database.query("SELECT count(*)\(nullCounts) " + StoreSchemaSnapshot.rows(of: table, entityNumbers: entityNumbers, dialect), []) { row in
            result.rows = Int(try row.int64(at: 0))
            for (offset, column) in columns.enumerated() { result.nulls[column.uppercased()] = Int(try row.int64(at: offset + 1)) }
        }
        return result
    }
}
