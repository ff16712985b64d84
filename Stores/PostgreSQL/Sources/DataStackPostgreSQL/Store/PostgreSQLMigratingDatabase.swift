import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// A PostgreSQL connection as ``DataStackStorage/SchemaMigration`` reads and
/// rewrites it, inside the transaction the store opened for the migration.
///
/// PostgreSQL's DDL is transactional, so unlike SQLite's file (copied,
/// migrated, renamed over the original) the store migrates in place: a
/// failure rolls every table back as it was.
struct PostgreSQLMigratingDatabase: MigratingDatabase {
    let connection: PostgreSQLConnection

    var dialect: any SQLDialect { PostgreSQLDialect() }

    func execute(_ sql: String, _ arguments: [StoredValue]) throws {
        _ = try connection.execute(sql, arguments.map(PostgreSQLValue.init))
    }

    func query(_ sql: String, _ arguments: [StoredValue], eachRow body: (any StoredRow) throws -> Void) throws {
        for row in try connection.execute(sql, arguments.map(PostgreSQLValue.init)).rows { try body(row) }
    }

    func tableNames() throws -> [String] {
        let result = try connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return (0..<result.rowCount).compactMap { result.string(row: $0, column: 0) }
    }

    func columns(in table: String) throws -> [(name: String, declaredType: String)] {
        let result = try connection.execute("""
            SELECT column_name, upper(data_type) FROM information_schema.columns \
            WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position
            """, [.text(table)])
        return (0..<result.rowCount).compactMap { row in
            result.string(row: row, column: 0).map { ($0, result.string(row: row, column: 1) ?? "") }
        }
    }

    func indexes(on table: String) throws -> [(name: String, sql: String)] {
        let result = try connection.execute("""
            SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
            WHERE i.indrelid = $1::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
            """, [.text(dialect.quotedIdentifier(table))])
        return (0..<result.rowCount).compactMap { row in
            guard let name = result.string(row: row, column: 0), let sql = result.string(row: row, column: 1) else { return nil }
            return (name, sql)
        }
    }

    /// The layout creates no triggers here; a rebuilt table's indexes, and the
    /// constraint behind its primary key, go, because index names belong to
    /// the schema and its replacement takes them (`zitem_pkey`…).
    func dropDependents(of table: String, keepingIndexes: Bool) throws {
        guard !keepingIndexes else { return }
        let quotedTable = dialect.quotedIdentifier(table)
        let constraints = try connection.execute("SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass", [.text(quotedTable)])
        for row in 0..<constraints.rowCount {
            guard let name = constraints.string(row: row, column: 0) else { continue }
            _ = try connection.execute("ALTER TABLE \(quotedTable) DROP CONSTRAINT \(Self.quoted(name))")
        }
        for index in try indexes(on: table) {
            _ = try connection.execute("DROP INDEX \(Self.quoted(index.name))")
        }
    }

    /// A name as the catalog spells it, quoted as it is.
    static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
