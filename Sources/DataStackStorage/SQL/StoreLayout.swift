import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Core Data's table layout of a model, and the SQL that reads and writes it,
/// for a store of another database (the PostgreSQL store): the same layout
/// and the same SQL the SQLite store uses, written in its ``SQLDialect``.
///
/// The layout is Core Data's (SQLite store's `TableLayout`): entity numbers
/// (`Z_ENT`), one `Z<ENTITY>` table per inheritance tree with `Z_PK`, `Z_ENT`,
/// `Z_OPT` and a column per attribute and to-one, `Z<n>_<REL>` entity columns,
/// `Z_FOK_` ranks and `Z_<n><REL>` join tables. Values are kept in the storage
/// form both stores share (``PredicateScalar/binding(for:)``).
///
/// It is SPI: what a store built on it needs, not part of the stack's API.
///
/// ```swift
/// @_spi(StoreImplementation) import ObjectGraph
///
/// let layout = try StoreLayout(model: configuration.model, configurationName: configuration.configurationName,
///                              dialect: .postgreSQL)
/// for sql in layout.creationStatements() { try connection.execute(sql) }
/// let query = try layout.query(for: fetch)   // SQL and the values of its $1, $2…
/// ```
@_spi(StoreImplementation)
public struct StoreLayout: Sendable {
    var schema: TableLayout
    /// How history records each entity's changes (StoreLayout+History.swift).
    let history: HistoryLayout

    /// Lays out the entities of a model's configuration (all of them for nil)
    /// as Core Data lays out a new store of them. The model is validated and
    /// frozen, as a coordinator does: its layout is final from then on.
    ///
    /// - Throws: ``ObjectGraphError`` for a model that does not validate;
    ///   ``PersistentStoreError`` when the entities cannot be laid out.
    public init(model: ManagedObjectModel, configurationName: String?, dialect: any SQLDialect) throws {
        try model.freeze()
        let entities = model.entities(forConfigurationName: configurationName)
        schema = try TableLayout(entities: entities, numbers: TableLayout.coreDataNumbers(for: entities),
                                  existingColumns: nil, url: nil, dialect: dialect)
        history = HistoryLayout(schema: schema)
    }

    public var dialect: any SQLDialect { schema.dialect }

    /// The statements that create `Z_PRIMARYKEY`, `Z_METADATA`, the entity
    /// tables, join tables and indexes (not history, which a store lays out itself).
    public func creationStatements() -> [String] {
        TableLayout.bookkeepingTableStatements(dialect) + schema.creationStatements()
    }

    /// One row of `Z_PRIMARYKEY`: an entity's number, name and parent's number (0 for a root).
    public struct EntityRow: Sendable, Equatable {
        public let number: Int64
        public let name: String
        public let superNumber: Int64
    }

    /// Every entity's `Z_PRIMARYKEY` row, by number.
    public var entityRows: [EntityRow] {
        schema.primaryKeyRows().map { EntityRow(number: $0.number, name: $0.name, superNumber: $0.superNumber) }
    }

    /// The entity numbered `number`, if the layout has it.
    public func entity(numbered number: Int64) -> EntityDescription? {
        schema.entitiesByNumber[number]
    }

    /// `Z_ENT` of `entity`.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/noStore`` for an entity the layout does not hold.
    public func number(of entity: EntityDescription) throws -> Int64 {
        try schema.mapping(for: entity).number
    }

    /// The number of the root of `entity`'s tree, whose `Z_PRIMARYKEY` row hands out its primary keys.
    public func rootNumber(of entity: EntityDescription) throws -> Int64 {
        try schema.mapping(for: entity).rootNumber
    }

    /// The table holding `entity`'s rows.
    public func table(of entity: EntityDescription) throws -> String {
        try schema.mapping(for: entity).table
    }

    /// The entity tables, one per inheritance tree.
    public var tables: [String] { schema.tables.map(\.name) }

    // MARK: - Fetching

    /// The SQL of a fetch and the values of its parameters.
    public struct Query: Sendable {
        /// The statement; its parameters are `$1`, `$2`… (PostgreSQL) or `?1`… (SQLite).
        public let sql: String
        /// The parameters' values.
        public let bindings: [StoredValue]
        /// For dictionary results: the attribute read at each position of a row.
        public let dictionaryColumns: [(name: String, type: AttributeType)]
    }

    /// The SQL of a fetch: full rows (`Z_PK`, `Z_ENT`, `Z_OPT`, then the
    /// table's columns, as ``RowReader`` reads them), `Z_PK, Z_ENT` for IDs,
    /// one count, or dictionary columns — for a fetch with expressions,
    /// grouping or a having predicate, its one `SELECT … GROUP BY … HAVING`.
    ///
    /// - Throws: ``FetchPredicateError`` for a predicate or sort the dialect
    ///   cannot express; ``FetchExpressionError`` for an expression it cannot.
    public func query(for fetch: StoreFetch) throws -> Query {
        if fetch.resultType == .dictionary, let expressions = fetch.expressions {
            let select = try ExpressionSelectQuery(fetch: fetch, expressions: expressions, schema: schema)
            return Query(sql: select.sql, bindings: select.bindings.map(StoredValue.init),
                         dictionaryColumns: expressions.columns.map { ($0.name, $0.resultType) })
        }
        let select = try SelectQuery(fetch: fetch, schema: schema)
        return Query(sql: select.sql, bindings: select.bindings.map(StoredValue.init), dictionaryColumns: select.dictionaryColumns)
    }

    /// The full rows of `entity`'s table whose keys are in the array bound to
    /// the statement's one parameter (``keyArray(_:)``), for firing faults.
    public func rowsQuery(for entity: EntityDescription) throws -> String {
        let mapping = try schema.mapping(for: entity)
        guard let table = schema.table(named: mapping.table) else { throw ObjectGraphError.noStore(entity: entity.name) }
        return "SELECT \(schema.selectColumns(of: table, alias: "t0")) FROM \(table.name) t0 WHERE t0.Z_PK \(dialect.keyMembership(parameter: 1))"
    }

    /// The select of a to-many relationship's destinations for the owners whose
    /// keys are in the array bound to the one parameter (``keyArray(_:)``): each
    /// destination's `Z_PK`, `Z_ENT`, then its owner's key, by owner and in the
    /// relationship's order; nil for a relationship stored nowhere (transient).
    public func toManyQuery(for relationship: RelationshipDescription) -> String? {
        schema.toManySelect(relationship, columns: "t0.Z_PK, t0.Z_ENT", ownersIn: keyList(parameter: 1))
    }

    /// The full rows (as ``RowReader/node(from:)`` reads them) of a to-many
    /// relationship's destinations for the owners whose keys are in the array
    /// bound to the one parameter, each followed by its owner's key at
    /// `ownerColumn`; by owner and in the relationship's order. Nil for a
    /// relationship that is not a stored to-many.
    public func prefetchQuery(for relationship: RelationshipDescription) -> (sql: String, ownerColumn: Int)? {
        guard relationship.isToMany, let destination = relationship.destinationEntity,
              let mapping = schema.mappings[ObjectIdentifier(destination)], let table = schema.table(named: mapping.table),
              let sql = schema.toManySelect(relationship, columns: schema.selectColumns(of: table, alias: "t0"),
                                            ownersIn: keyList(parameter: 1)) else { return nil }
        return (sql, 3 + table.columns.count)
    }

    /// The `Z_PK, Z_ENT` of a row of `entity` (or a subentity) whose `keys`
    /// hold the values of parameters 1, 2…: a uniqueness constraint's lookup.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` for a key without a column.
    public func rowLookupQuery(for entity: EntityDescription, keys: [String]) throws -> String {
        try schema.rowLookupSQL(entity, keys: keys)
    }

    /// Keys as the value of one array parameter, as the dialect reads it (``SQLDialect/keyArray(_:)``).
    public func keyArray(_ keys: some Sequence<Int64>) -> StoredValue {
        dialect.keyArray(Array(keys))
    }

    /// The keys of array parameter `number` (``keyArray(_:)``), as an SQL list.
    func keyList(parameter number: Int) -> String {
        dialect.keyList(parameter: number)
    }

    /// The keys of array parameter `number`, each with its position from 1,
    /// as rows `(m, ord)`.
    func rankedKeyList(parameter number: Int) -> String {
        dialect.rankedKeyList(parameter: number)
    }

    /// A reader of rows for a store: makes the store's IDs and nodes.
    public func rowReader(storeIdentifier: String) -> RowReader {
        RowReader(schema: schema, identity: StoreIdentity.named(storeIdentifier))
    }
}

/// A parameter's value as a store binds it: the storage form both stores
/// keep (dates as seconds since 2001-01-01, booleans as 0/1, UUIDs as 16
/// bytes, URLs as text, decimals as doubles, objects as their primary keys;
/// NaN as NULL), so a database sees the same values whichever store wrote them.
@_spi(StoreImplementation)
public enum StoredValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// `value` in storage form (``PredicateScalar/binding(for:)``).
    public init(_ value: PropertyValue) {
        switch PredicateScalar.binding(for: value) {
        case .integer(let v): self = .integer(v)
        case .double(let v): self = .real(v)
        case .string(let v): self = .text(v)
        case .data(let v): self = .blob(v)
        default: self = .null
        }
    }
}

/// One row of a result, as a store's database returns it: the columns a
/// ``StoreLayout`` query selects, by position from 0.
@_spi(StoreImplementation)
public protocol StoredRow {
    func isNull(at column: Int) -> Bool
    /// - Throws: when the column holds something other than an integer.
    func int64(at column: Int) throws -> Int64
    /// - Throws: when the column holds something other than a number.
    func double(at column: Int) throws -> Double
    func string(at column: Int) -> String?
    /// - Throws: when the column holds something other than binary data.
    func data(at column: Int) throws -> Data?
    /// Calls `body` with the column's text as the database holds it (its
    /// UTF-8 bytes, unchecked), or nil for NULL: for rows kept as bytes
    /// (``RowReader/encodedNode(from:)``), with no `String` made per value.
    /// The default reads ``string(at:)``.
    func withUTF8<Result>(at column: Int, _ body: (UnsafeRawBufferPointer?) throws -> Result) rethrows -> Result
}

extension StoredRow {
    public func withUTF8<Result>(at column: Int, _ body: (UnsafeRawBufferPointer?) throws -> Result) rethrows -> Result {
        guard var text = string(at: column) else { return try body(nil) }
        return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }
}
