import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// A database a ``SchemaMigration`` reads and rewrites: what lightweight
/// migration needs of a store's database, in its ``SQLDialect``.
///
/// The SQLite store and the PostgreSQL store each give one over the
/// connection that holds the migration's transaction; every call runs inside it.
///
/// Names of tables, columns and indexes are passed and returned as the
/// database spells them (PostgreSQL folds the unquoted names the layout
/// creates to lower case); ``SQLDialect/quotedIdentifier(_:)`` quotes them.
@_spi(StoreImplementation)
public protocol MigratingDatabase {
    /// The SQL the database speaks.
    var dialect: any SQLDialect { get }

    /// Runs one statement with `arguments` bound to its parameters (`?1`, or `$1`…).
    func execute(_ sql: String, _ arguments: [StoredValue]) throws

    /// Runs a query with `arguments` bound, calling `body` with each row.
    func query(_ sql: String, _ arguments: [StoredValue], eachRow body: (any StoredRow) throws -> Void) throws

    /// The names of the database's tables (of the store's schema).
    func tableNames() throws -> [String]

    /// The columns of `table` in declaration order, with their declared types
    /// (SQLite's declarations; PostgreSQL's type names, such as `bigint`).
    func columns(in table: String) throws -> [(name: String, declaredType: String)]

    /// The indexes of `table` that a statement created (not those that back a
    /// primary key), with that statement's SQL as the database keeps it.
    func indexes(on table: String) throws -> [(name: String, sql: String)]

    /// Drops what would stop `table` being rebuilt or altered: its triggers,
    /// and unless `keepingIndexes` every index on it — the primary key's too
    /// where, as in PostgreSQL, index names are shared by the schema and the
    /// table's replacement takes them.
    func dropDependents(of table: String, keepingIndexes: Bool) throws
}

extension MigratingDatabase {
    /// The first column of the first row, as an integer; nil for no row or NULL.
    func integer(_ sql: String, _ arguments: [StoredValue] = []) throws -> Int64? {
        var value: Int64?
        try query(sql, arguments) { row in
            if value == nil, !row.isNull(at: 0) { value = try row.int64(at: 0) }
        }
        return value
    }

    func tableExists(_ name: String) throws -> Bool {
        try tableNames().contains { $0.uppercased() == name.uppercased() }
    }
}
