import Foundation

// MARK: - Batch update and delete

extension SQLiteStore: BatchRequestStore {
    /// Runs a batch request in one `BEGIN IMMEDIATE` transaction: the rows it
    /// touches are read first (they cannot move once the write lock is held),
    /// then written with one statement per table and chunk of 500 keys — an
    /// `UPDATE … SET …, Z_OPT = Z_OPT + 1 WHERE Z_PK IN (…)` or a
    /// `DELETE … WHERE Z_PK IN (…)` — and, with persistent history, recorded
    /// as one transaction by the same code a save records with, before the
    /// transaction commits. Any error rolls all of it back.
    package func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges {
        let schema = try schema
        let history = state.withLock { $0.history }
        let author = context?.transactionAuthor
        let contextName = context?.name
        return try write { connection in
            let record = BatchHistory(layout: history, author: author, contextName: contextName)
            switch request {
            case .update(let update):
                let before = try matchedRows(update.fetch, schema: schema, connection: connection)
                guard !before.isEmpty else { return BatchChanges() }
                try batchUpdate(update, rows: before, schema: schema, connection: connection)
                // The written columns are what history records, so the rows need not be read back.
                let token = try record.write(SaveChangesRequest(updatedObjects: before), before: before,
                                             writtenSlots: Set(update.values.map(\.attribute.index)), store: self,
                                             schema: schema, connection: connection)
                return BatchChanges(updatedObjectIDs: before.map(\.objectID), historyToken: token)
            case .delete(let delete):
                let matched: [IncrementalStoreNode]
                switch delete {
                case .matching(let fetch): matched = try matchedRows(fetch, schema: schema, connection: connection)
                case .objectIDs(let ids): matched = try rows(ids, schema: schema, connection: connection)
                }
                let plan = try BatchDeletePlan(matched: matched,
                                               rows: { try rows($0, schema: schema, connection: connection) },
                                               toMany: { relationship, id in
                                                   guard case .objects(let ids) = try toManyDestinations(relationship, of: id) else { return [] }
                                                   return ids
                                               })
                guard !plan.deleted.isEmpty else { return BatchChanges() }
                try batchDelete(plan, schema: schema, connection: connection)
                let token = try record.write(SaveChangesRequest(updatedObjects: plan.clearedRows, deletedObjects: plan.deleted),
                                             before: plan.deleted + plan.cleared.map(\.row), store: self, schema: schema,
                                             connection: connection)
                return plan.changes(historyToken: token)
            case .insert(let insert): return try batchInsert(insert, history: history, author: author, contextName: contextName, schema: schema, connection: connection)
            }
        }
    }

    // MARK: Reading inside the transaction

    /// The rows a fetch matches, read on the writer connection.
    private func matchedRows(_ fetch: StoreFetch, schema: SQLiteSchema, connection: Connection) throws -> [IncrementalStoreNode] {
        let query: SelectQuery
        do {
            query = try SelectQuery(fetch: fetch, schema: schema)
        } catch {
            throw BatchRequestError.predicateDoesNotCompile(predicate: fetch.predicate?.description ?? "", entity: fetch.entity.name,
                                                           reason: "\(error)")
        }
        let statement = try connection.cachedStatement(query.sql)
        defer { statement.reset() }
        for (offset, value) in query.bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        var decoder = RowDecoder(schema: schema, identity: identity)
        var nodes: [IncrementalStoreNode] = []
        while try statement.step() {
            if let node = decoder.node(from: statement) { nodes.append(node) }
        }
        return nodes
    }

    /// The rows of these IDs that exist, in the order given.
    private func rows(_ ids: [ObjectID], schema: SQLiteSchema, connection: Connection) throws -> [IncrementalStoreNode] {
        let found = try currentRows(of: ids, schema: schema, connection: connection)
        return ids.compactMap { found[$0] }
    }

    // MARK: Writing

    private func batchUpdate(_ update: StoreBatchUpdate, rows: [IncrementalStoreNode], schema: SQLiteSchema,
                             connection: Connection) throws {
        let mapping = try schema.mapping(for: update.fetch.entity)
        var bindings: [PropertyValue] = []
        var assignments: [String] = []
        for (attribute, value) in update.values {
            guard let column = mapping.columns[attribute.index]?.name else {
                throw ObjectGraphError.unknownKey(attribute.name, entity: update.fetch.entity.name)
            }
            // Columns are qualified by the table's own name, as an UPDATE's SET may write them.
            // Constants are bound as a save binds them.
            let compiled = try value.sql(for: update.fetch.entity, schema: schema, rootAlias: mapping.table,
                                         parametersBefore: bindings.count)
            assert(compiled.joins.isEmpty, "the context refuses key paths through relationships")
            bindings += compiled.bindings
            // SQLite keeps a real in an integer column; truncate it, as the in-memory store does.
            let sql = attribute.type.integerRange != nil ? "CAST(\(compiled.sql) AS INTEGER)" : compiled.sql
            assignments.append("\(column) = \(sql)")
        }
        let set = (assignments + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
        let keys = rows.compactMap(\.objectID.primaryKey)
        do {
            try Self.run("UPDATE \(mapping.table) SET \(set) WHERE Z_PK", keys: keys, bindings: bindings, connection: connection)
            try checkRanges(of: update, in: mapping, keys: keys, connection: connection)
        } catch let error as SQLiteError where error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE {
            let entity = update.fetch.entity
            let names = Set(update.values.map(\.attribute.name))
            let constraint = entity.rootEntity.selfAndDescendants.lazy.flatMap(\.uniquenessConstraints)
                .first { !names.isDisjoint(with: $0) } ?? []
            throw ObjectGraphError.uniquenessConflict([
                UniquenessConflict(entityName: entity.name, constraint: constraint, objectIDs: rows.map(\.objectID), databaseObjectID: nil),
            ])
        }
    }

    /// Throws if a computed value does not fit its narrower integer attribute
    /// (16 or 32 bits), as a constant is checked not to: SQLite would keep it,
    /// and it would read back truncated to another number. Runs inside the
    /// batch's transaction, which the error rolls back.
    private func checkRanges(of update: StoreBatchUpdate, in mapping: SQLiteSchema.EntityMapping, keys: [Int64],
                             connection: Connection) throws {
        for (attribute, value) in update.values {
            guard let range = attribute.type.integerRange, range != Int64.min...Int64.max,
                  !value.node.isConstant, let column = mapping.columns[attribute.index]?.name else { continue }
            for start in stride(from: 0, to: keys.count, by: 500) {
                let chunk = keys[start..<min(start + 500, keys.count)].map(String.init).joined(separator: ", ")
                let statement = try connection.prepare("""
                    SELECT \(column) FROM \(mapping.table) WHERE Z_PK IN (\(chunk)) \
                    AND \(column) NOT BETWEEN \(range.lowerBound) AND \(range.upperBound) LIMIT 1
                    """)
                if try statement.step() {
                    throw ObjectGraphError.valueOutOfRange(key: attribute.name, entity: update.fetch.entity.name,
                                                           value: String(statement.int64(at: 0)), type: attribute.type)
                }
            }
        }
    }

    private func batchDelete(_ plan: BatchDeletePlan, schema: SQLiteSchema, connection: Connection) throws {
        // Cleared to-ones: rows clearing the same columns share one statement.
        var clearing: [String: [Int64]] = [:]
        for (row, relationships) in plan.cleared {
            let mapping = try schema.mapping(for: row.objectID.entity)
            var columns: [String] = []
            for relationship in relationships {
                guard let column = mapping.columns[relationship.index] else { continue }
                columns.append(column.name)
                if case .toOne(let entityColumn?) = column.kind { columns.append(entityColumn) }
            }
            let set = (columns.map { "\($0) = NULL" } + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
            clearing["UPDATE \(mapping.table) SET \(set) WHERE Z_PK", default: []].append(row.objectID.primaryKey ?? 0)
        }
        for (sql, keys) in clearing { try Self.run(sql, keys: keys, connection: connection) }

        var keysByTable: [String: [Int64]] = [:]
        for row in plan.deleted {
            keysByTable[try schema.mapping(for: row.objectID.entity).table, default: []].append(row.objectID.primaryKey ?? 0)
        }
        for table in schema.joinTables {
            if let keys = keysByTable[table.ownerTable] {
                try Self.run("DELETE FROM \(table.name) WHERE \(table.ownerColumn)", keys: keys, connection: connection)
            }
            if let keys = keysByTable[table.memberTable] {
                try Self.run("DELETE FROM \(table.name) WHERE \(table.memberColumn)", keys: keys, connection: connection)
            }
        }
        for (table, keys) in keysByTable { try Self.run("DELETE FROM \(table) WHERE Z_PK", keys: keys, connection: connection) }
    }

    /// Runs `prefix IN (…)` for the keys, 500 at a time, after `bindings`.
    private static func run(_ prefix: String, keys: [Int64], bindings: [PropertyValue] = [], connection: Connection) throws {
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = keys[start..<min(start + 500, keys.count)]
            let statement = try connection.prepare(prefix + " IN (" + Array(repeating: "?", count: chunk.count).joined(separator: ",") + ")")
            var index: Int32 = 1
            for value in bindings {
                try statement.bind(value, at: index)
                index += 1
            }
            for key in chunk {
                try statement.bind(key, at: index)
                index += 1
            }
            try statement.execute()
        }
    }
}

/// A batch's history: one transaction recorded as a save's is, or nothing
/// when the store does not track history.
private struct BatchHistory {
    let layout: SQLiteHistoryLayout?
    let author: String?
    let contextName: String?

    /// Records `request` against the rows as they were before it; returns the transaction's token.
    func write(_ request: SaveChangesRequest, before: [IncrementalStoreNode], writtenSlots: Set<Int> = [], store: SQLiteStore,
               schema: SQLiteSchema, connection: Connection) throws -> PersistentHistoryToken? {
        guard let layout else { return nil }
        let rows = Dictionary(before.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        return try store.recordHistory(of: request, result: SaveResult(permanentIDs: [:]), insertedKeys: [], before: rows,
                                       writtenSlots: writtenSlots,
                                       author: author, contextName: contextName, layout: layout, schema: schema, connection: connection)
    }
}
