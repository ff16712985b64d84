@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Fetching and faulting

extension SQLiteStore {
    public func execute(_ request: StoreRequest, in context: ManagedObjectContext?) throws -> StoreResult {
        switch request {
        case .fetch(let fetch): return try execute(fetch, in: context)
        case .save(let save): return .saved(try execute(save, in: context))
        }
    }

    private func execute(_ fetch: StoreFetch, in context: ManagedObjectContext?) throws -> StoreResult {
        if fetch.resultType == .dictionary, let expressions = fetch.expressions {
            return try execute(fetch, expressions: expressions, in: context)   // SQLiteStore+ExpressionFetch.swift
        }
        let schema = try schema
        let identity = identity
        let query = try SelectQuery(fetch: fetch, schema: schema)
        return try read(for: context) { connection in
            let statement = try connection.cachedStatement(query.sql)
            // A count reads one row: without a reset its read transaction stays
            // open, and the next read on this connection sees that old snapshot.
            defer { statement.reset() }
            for (offset, value) in query.bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
            switch fetch.resultType {
            case .count:
                return .count(try statement.step() ? Int(statement.int64(at: 0)) : 0)
            case .managedObjectID:
                var decoder = RowDecoder(schema: schema, identity: identity, url: url)
                var ids: [ObjectID] = []
                while try statement.step() { ids.append(try decoder.objectID(from: statement)) }
                return .objectIDs(ids)
            case .managedObject where fetch.returnsObjectsAsFaults:
                // Rows for the row cache, most never read: kept as bytes.
                var decoder = RowDecoder(schema: schema, identity: identity, url: url)
                return .encodedNodes(try decoder.encodedNodes(from: statement))
            case .managedObject:
                var decoder = RowDecoder(schema: schema, identity: identity, url: url)
                return .nodes(try decoder.nodes(from: statement))
            case .dictionary:
                var rows = try Self.dictionaries(from: statement, columns: query.dictionaryColumns)
                try resolveExternalData(in: &rows, columns: query.externalDictionaryColumns, of: fetch.entity)
                return .dictionaries(rows)
            }
        }
    }

    public func newValues(forObjectWith objectID: ObjectID, in context: ManagedObjectContext?) throws -> IncrementalStoreNode {
        guard let node = try newValues(forObjectsWith: [objectID], in: context).first else {
            throw ObjectGraphError.objectNotFound(objectID)
        }
        return node
    }

    /// Reads many rows with one query per table (`Z_PK IN (…)`), so a batch of faults fires at once.
    public func newValues(forObjectsWith objectIDs: [ObjectID], in context: ManagedObjectContext?) throws -> [IncrementalStoreNode] {
        let schema = try schema
        return try read(for: context) { connection in try rows(of: objectIDs, schema: schema, connection: connection) }
    }

    /// The rows of these objects that exist, read on `connection`: one query
    /// per table and 500 keys (`Z_PK IN (…)`), not one per row — a save that
    /// records history reads every updated row before writing it.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/noStore`` for an ID of an entity
    ///   this store does not hold.
    func rows(of objectIDs: [ObjectID], schema: TableLayout, connection: Connection) throws -> [IncrementalStoreNode] {
        var byTable: [String: [Int64]] = [:]
        for id in objectIDs {
            guard let pk = id.primaryKey else { continue }
            byTable[try schema.mapping(for: id.entity).table, default: []].append(pk)
        }
        var decoder = RowDecoder(schema: schema, identity: identity, url: url)
        var nodes: [IncrementalStoreNode] = []
        nodes.reserveCapacity(objectIDs.count)
        for (tableName, keys) in byTable {
            guard let table = schema.table(named: tableName) else { continue }
            for start in stride(from: 0, to: keys.count, by: 500) {
                let chunk = keys[start..<min(start + 500, keys.count)]
                let placeholders = chunk.count == 1 ? "= ?" : "IN (" + Array(repeating: "?", count: chunk.count).joined(separator: ",") + ")"
                let statement = try connection.cachedStatement(
                    "SELECT \(schema.selectColumns(of: table, alias: "t0")) FROM \(table.name) t0 WHERE t0.Z_PK \(placeholders)")
                defer { statement.reset() }
                for (offset, pk) in chunk.enumerated() { try statement.bind(pk, at: Int32(offset + 1)) }
                nodes += try decoder.nodes(from: statement)
            }
        }
        return nodes
    }

    public func newValue(forRelationship relationship: RelationshipDescription, forObjectWith objectID: ObjectID,
                         in context: ManagedObjectContext?) throws -> PropertyValue {
        guard relationship.isToMany else {
            return try newValues(forObjectWith: objectID, in: context).values[relationship.index]
        }
        // Join table or inverse foreign key: SQLiteStore+Relationships.swift.
        return try toManyDestinations(relationship, of: objectID, in: context)
    }

    /// Replaces the tagged column bytes of attributes with external binary storage
    /// by their values, read from the row or from the file the column names.
    ///
    /// - Throws: ``PersistentStoreError`` naming the file when it is missing or unreadable.
    func resolveExternalData(in rows: inout [[String: PropertyValue]], columns: Set<String>, of entity: EntityDescription) throws {
        guard !columns.isEmpty else { return }
        for index in rows.indices {
            for name in columns {
                guard case .data(let column)? = rows[index][name] else { continue }
                rows[index][name] = .data(try externalStorage.value(fromColumn: column, describing: "\(entity.name).\(name) of a fetched row"))
            }
        }
    }

    /// The rows a statement returns, each as its columns' values by name, read as their types.
    static func dictionaries(from statement: Statement, columns: [(name: String, type: AttributeType)]) throws -> [[String: PropertyValue]] {
        var rows: [[String: PropertyValue]] = []
        while try statement.step() {
            var row: [String: PropertyValue] = [:]
            for (position, column) in columns.enumerated() {
                row[column.name] = statement.attributeValue(at: Int32(position), type: column.type)
            }
            rows.append(row)
        }
        return rows
    }
}
