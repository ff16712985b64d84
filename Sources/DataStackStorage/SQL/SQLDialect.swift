import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The SQL language a store speaks: what the predicate compiler, the fetch
/// select and the layout's statements write where databases differ.
///
/// One compiler and one table layout serve every SQL store (``FetchPredicate``'s
/// SQL, sorts, the select of a fetch, Core Data's tables); a dialect answers
/// only the spellings. Every store keeps values in the same storage form
/// (``PredicateScalar/binding(for:)``: dates as seconds since 2001, booleans
/// as 0/1, UUIDs as 16 bytes), so a predicate means the same on each.
///
/// ``SQLiteDialect`` is Core Data's own. A requirement with a default takes
/// SQLite's spelling, except the capabilities (``storesExternalBinaryData``,
/// ``updatesRowsInBatches``), which are off unless a dialect says so. A store for another database (the PostgreSQL store in
/// `Stores/PostgreSQL` is one) implements the rest in its own package and
/// passes its dialect to ``StoreLayout/init(model:configurationName:dialect:)``.
///
/// A requirement that cannot write what it is asked (an operator the database
/// lacks) throws an error whose description says why; the compiler reports it
/// as the predicate's ``FetchPredicateError``.
@_spi(StoreImplementation) public protocol SQLDialect: Sendable {
    // MARK: Parameters

    /// The placeholder of parameter `number` (from 1), as `?1` or `$1`.
    func placeholder(_ number: Int) -> String
    /// The placeholder of parameter `number` in a statement whose parameters
    /// are numbered in the order they appear (the layout's inserts and updates).
    func orderedPlaceholder(_ number: Int) -> String
    /// The placeholder of parameter `number` with the value bound to it, for a
    /// database whose planner cannot always infer a parameter's type (`$1 = $2`).
    func parameter(_ number: Int, boundTo value: PropertyValue) -> String
    /// The placeholder of parameter `number`, converted to the column type `type`.
    func typedPlaceholder(_ number: Int, type: String) -> String
    /// What a nil value is written as instead of a parameter, for a database
    /// that infers the type of the keyword `NULL` where not that of a parameter;
    /// nil to bind nil as a parameter.
    var nullLiteral: String? { get }

    // MARK: Truth

    /// The constant true.
    var trueLiteral: String { get }
    /// The constant false.
    var falseLiteral: String { get }
    /// `condition` is true (not false, not NULL), as a value that is never NULL.
    func isTrue(_ condition: String) -> String
    /// `condition` is false or NULL.
    func isNotTrue(_ condition: String) -> String

    // MARK: Types and tables

    /// The declared type of a column Core Data declares `declared` (`INTEGER`,
    /// `VARCHAR`, `TIMESTAMP`, `FLOAT`, `DECIMAL`, `BLOB`, `VARCHAR(255)`),
    /// holding the storage form every store shares.
    func columnType(declared: String) -> String
    /// The declared type of primary keys, foreign keys and `Z_ENT`/`Z_OPT`.
    var keyType: String { get }
    /// A column of a `CREATE UNIQUE INDEX` (a uniqueness constraint's), as
    /// the database declares it: Core Data's `COLLATE BINARY ASC` in SQLite.
    func uniqueIndexColumn(_ column: String) -> String
    /// An identifier as the database keeps it when written unquoted (folded
    /// to lower case, for example), so that a quoted one names the same thing.
    func unquotedIdentifierFolding(_ name: String) -> String
    /// Whether binary attributes marked to be stored outside the row are kept
    /// in files beside the store (Core Data's external storage) rather than in it.
    var storesExternalBinaryData: Bool { get }
    /// Whether a save updates many rows of an entity in one statement, each
    /// written only if its version is still the one read (`UPDATE … FROM
    /// (VALUES …) … RETURNING`), rather than one statement per row.
    var updatesRowsInBatches: Bool { get }

    // MARK: Key lists

    /// Keys as the value of one array parameter.
    func keyArray(_ keys: [Int64]) -> StoredValue
    /// The rows of the keys in array parameter `number`, one column.
    func keyList(parameter number: Int) -> String
    /// The keys of array parameter `number`, each with its position from 1, as rows `(m, ord)`.
    func rankedKeyList(parameter number: Int) -> String
    /// A condition on a key, true when it is in array parameter `number`: `IN (…)`.
    func keyMembership(parameter number: Int) -> String
    /// The rows of the elements of a JSON array (a long `IN` list bound as one
    /// value), one column, as numbers or as text.
    func jsonArrayElements(_ array: String, asText: Bool) -> String
    /// The elements of a JSON array as a `FROM` item named `alias`, one
    /// column `value`, that a `CROSS JOIN` reads before the table it joins
    /// (a long `IN` list driving its fetch, `SelectQuery+KeyList.swift`); nil,
    /// the default, when the database has none or may read the join in
    /// another order.
    func jsonArrayTable(_ array: String, alias: String) -> String?

    // MARK: Ordering and limits

    /// `expression` ordered without regard to case.
    func caseInsensitiveOrder(_ expression: String) -> String
    /// The `LIMIT` that sets no limit, for an `OFFSET` after it.
    var noLimit: String { get }
    /// `ordering` with NULL first, as SQLite orders it.
    func nullsFirst(_ ordering: String) -> String
    /// The relevance of a full-text match of the query in parameter `query`
    /// for ordering, or nil when the database has no full-text index.
    func searchRelevance(of expression: String, query: String) -> String?

    // MARK: Full-text search

    /// The value bound for a `MATCHES[search]` query's parameter: the query's
    /// FTS5 expression for SQLite.
    func searchMatchValue(_ query: SearchQuery) throws -> String
    /// The value bound for a relevance sort's parameter: the query's text for SQLite.
    func searchRelevanceValue(_ query: SearchQuery) throws -> String
    /// The condition of a `MATCHES[search]`, for a database that searches
    /// with its own index; nil for SQLite's FTS5 tables (``SearchIndexLayout``).
    func searchMatch(_ search: SQLSearch) throws -> String?
    /// What a relevance sort orders by, for one column (``SQLSearch/columns``
    /// holds one); nil when the database has no full-text index. SQLite's is
    /// ``searchRelevance(of:query:)`` of the column.
    func searchRelevance(_ search: SQLSearch) throws -> String?

    // MARK: Values

    /// `a` divided by `b` as a real number; NULL when `b` is zero.
    func divide(_ a: String, by b: String) -> String
    /// The sum of `value` over a group, 0 (not NULL) for no rows.
    func sum(_ value: String) -> String
    /// A computed number as an integer column keeps it: truncated toward
    /// zero, as the in-memory store converts it (a batch update's `SET`).
    func truncatedToInteger(_ value: String) -> String
    /// Makes the operands of one comparison compare as the in-memory
    /// evaluator compares them, or throws when the database cannot compare them.
    func prepareComparison(_ operands: inout [SQLOperand]) throws
    /// `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE` or `MATCHES` of `left` against `right`.
    func stringTest(_ test: SQLStringTest, _ left: SQLOperand, _ right: SQLOperand, options: ComparisonOptions) throws -> String
    /// `operand` folded for `[c]`/`[d]` (not called with empty options).
    func folded(_ operand: SQLOperand, options: ComparisonOptions) throws -> SQLOperand
}

/// A full-text search of one entity table's row, as a dialect writes it
/// (``SQLDialect/searchMatch(_:)``, ``SQLDialect/searchRelevance(_:)``).
@_spi(StoreImplementation) public struct SQLSearch: Sendable {
    /// The entity table (`ZCOMPANY`).
    public let table: String
    /// Every column of the table indexed for search, in the table's order.
    public let indexedColumns: [String]
    /// The columns searched (for a relevance sort, the one it ranks by).
    public let columns: [String]
    /// The alias of the row searched (`t0`).
    public let alias: String
    /// The query.
    public let query: SearchQuery
    /// The placeholder of the parameter bound to the query's value
    /// (``SQLDialect/searchMatchValue(_:)`` or ``SQLDialect/searchRelevanceValue(_:)``).
    public let parameter: String

    package init(table: String, indexedColumns: [String], columns: [String], alias: String, query: SearchQuery, parameter: String) {
        self.table = table
        self.indexedColumns = indexedColumns
        self.columns = columns
        self.alias = alias
        self.query = query
        self.parameter = parameter
    }
}

/// A compiled value, as a dialect sees it.
@_spi(StoreImplementation) public struct SQLOperand: Sendable {
    /// The storage class families values compare within.
    public enum Family: Sendable, Hashable {
        case numeric, text, blob
    }

    /// The value's SQL.
    public var sql: String
    /// Its family; nil for NULL or when not known.
    public var family: Family?
    /// A bare column: it has an affinity, which SQLite applies to the other side.
    public var isColumn: Bool
    /// The constant nil: `==` and `!=` become `IS` and `IS NOT`.
    public var isNil: Bool

    public init(sql: String, family: Family?, isColumn: Bool = false, isNil: Bool = false) {
        self.sql = sql
        self.family = family
        self.isColumn = isColumn
        self.isNil = isNil
    }
}

/// A string comparison of a predicate: `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE`, `MATCHES`.
@_spi(StoreImplementation) public struct SQLStringTest: Hashable, Sendable, CustomStringConvertible {
    /// The operator as a predicate format writes it.
    public let description: String

    public static let beginsWith = SQLStringTest(description: "BEGINSWITH")
    public static let endsWith = SQLStringTest(description: "ENDSWITH")
    public static let contains = SQLStringTest(description: "CONTAINS")
    public static let like = SQLStringTest(description: "LIKE")
    public static let matches = SQLStringTest(description: "MATCHES")
}

// MARK: - Defaults: SQLite's spellings

@_spi(StoreImplementation) extension SQLDialect {
    public func placeholder(_ number: Int) -> String { "?\(number)" }
    public func orderedPlaceholder(_ number: Int) -> String { placeholder(number) }
    public func parameter(_ number: Int, boundTo value: PropertyValue) -> String { placeholder(number) }
    public func typedPlaceholder(_ number: Int, type: String) -> String { "CAST(\(placeholder(number)) AS \(type))" }
    public var nullLiteral: String? { nil }
    public var trueLiteral: String { "1" }
    public var falseLiteral: String { "0" }
    public func isTrue(_ condition: String) -> String { "(\(condition)) IS 1" }
    public func isNotTrue(_ condition: String) -> String { "(\(condition)) IS NOT 1" }
    public func columnType(declared: String) -> String { declared }
    public var keyType: String { "INTEGER" }
    public func uniqueIndexColumn(_ column: String) -> String { column + " COLLATE BINARY ASC" }
    public func unquotedIdentifierFolding(_ name: String) -> String { name }
    public var storesExternalBinaryData: Bool { false }
    public var updatesRowsInBatches: Bool { false }
    public func keyMembership(parameter number: Int) -> String { "IN (\(keyList(parameter: number)))" }
    public func jsonArrayTable(_ array: String, alias: String) -> String? { nil }
    public func caseInsensitiveOrder(_ expression: String) -> String { expression + " COLLATE NOCASE" }
    public var noLimit: String { "-1" }
    public func nullsFirst(_ ordering: String) -> String { ordering }
    public func searchRelevance(of expression: String, query: String) -> String? { nil }
    public func searchMatchValue(_ query: SearchQuery) throws -> String { query.fts5Expression }
    public func searchRelevanceValue(_ query: SearchQuery) throws -> String { query.text }
    public func searchMatch(_ search: SQLSearch) throws -> String? { nil }
    public func searchRelevance(_ search: SQLSearch) throws -> String? {
        searchRelevance(of: "\(search.alias).\(search.columns[0])", query: search.parameter)
    }
    public func divide(_ a: String, by b: String) -> String { "(CAST(\(a) AS REAL) / \(b))" }
    public func truncatedToInteger(_ value: String) -> String { "CAST(\(value) AS INTEGER)" }

    /// `name` as a quoted identifier naming what the layout's unquoted SQL created.
    public func quotedIdentifier(_ name: String) -> String {
        "\"" + unquotedIdentifierFolding(name).replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

@_spi(StoreImplementation) extension SQLDialect where Self == SQLiteDialect {
    /// SQLite, as Core Data writes it.
    public static var sqlite: SQLiteDialect { SQLiteDialect() }
}
