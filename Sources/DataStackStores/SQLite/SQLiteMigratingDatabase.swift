@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A SQLite connection as a ``SchemaMigration`` reads and rewrites it.
struct SQLiteMigratingDatabase: MigratingDatabase {
    let connection: Connection

    package var dialect: any SQLDialect { SQLiteDialect() }

    func execute(_ sql: String, _ arguments: [StoredValue]) throws {
        guard !arguments.isEmpty else { return try connection.execute(sql) }
        try prepare(sql, arguments).execute()
    }

    func query(_ sql: String, _ arguments: [StoredValue], eachRow body: (any StoredRow) throws -> Void) throws {
        let statement = try prepare(sql, arguments)
        while try statement.step() { try body(Row(statement: statement)) }
    }

    func tableNames() throws -> [String] {
        let statement = try connection.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        var names: [String] = []
        while try statement.step() { if let name = statement.string(at: 0) { names.append(name) } }
        return names
    }

    func columns(in table: String) throws -> [(name: String, declaredType: String)] {
        try connection.columns(in: table).map { ($0.name, $0.declaredType) }
    }

    func indexes(on table: String) throws -> [(name: String, sql: String)] {
        try schemaObjects(of: table).filter { $0.type == "index" }.map { ($0.name, $0.sql) }
    }

    func dropDependents(of table: String, keepingIndexes: Bool) throws {
        for object in try schemaObjects(of: table) where object.type == "trigger" || !keepingIndexes {
            try connection.execute("DROP \(object.type == "trigger" ? "TRIGGER" : "INDEX") \(Connection.quotedIdentifier(object.name))")
        }
    }

    /// The indexes and triggers of `table` that a statement created (`sql` is
    /// NULL for the automatic indexes of PRIMARY KEY and UNIQUE).
    private func schemaObjects(of table: String) throws -> [(type: String, name: String, sql: String)] {
        let statement = try connection.prepare("""
            SELECT type, name, sql FROM sqlite_master \
            WHERE tbl_name = ?1 COLLATE NOCASE AND type IN ('index', 'trigger') AND sql IS NOT NULL
            """)
        try statement.bind(table, at: 1)
        var objects: [(type: String, name: String, sql: String)] = []
        while try statement.step() {
            if let type = statement.string(at: 0), let name = statement.string(at: 1), let sql = statement.string(at: 2) {
                objects.append((type, name, sql))
            }
        }
        return objects
    }

    private func prepare(_ sql: String, _ arguments: [StoredValue]) throws -> Statement {
        let statement = try connection.prepare(sql)
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            switch argument {
            case .null: try statement.bindNull(at: index)
            case .integer(let value): try statement.bind(value, at: index)
            case .real(let value): try statement.bind(value, at: index)
            case .text(let value): try statement.bind(value, at: index)
            case .blob(let value): try statement.bind(value, at: index)
            }
        }
        return statement
    }

    /// The current row of a statement.
    private struct Row: StoredRow {
        let statement: Statement
        func isNull(at column: Int) -> Bool { statement.isNull(at: Int32(column)) }
        func int64(at column: Int) throws -> Int64 { statement.int64(at: Int32(column)) }
        func double(at column: Int) throws -> Double { statement.double(at: Int32(column)) }
        func string(at column: Int) -> String? { statement.string(at: Int32(column)) }
        func data(at column: Int) throws -> Data? { statement.data(at: Int32(column)) }
    }
}
