@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Batch update and delete

@_spi(StoreImplementation) extension SQLiteStore: BatchRequestStore {
    /// Runs a batch request in one `BEGIN IMMEDIATE` transaction, set-based:
    /// a batch update is one `UPDATE … AS t0 SET …, Z_OPT = Z_OPT + 1 WHERE
    /// <the fetch's condition>` — SQLite scans the table once, as for the
    /// statement written by hand — and a batch delete of an entity without
    /// delete rules one `DELETE`. With persistent history the change rows are copied from the
    /// selected rows by one `INSERT … SELECT` per entity before they are
    /// written (``BatchHistory``). A delete whose rows have delete rules, or
    /// that names its rows by ID, reads them first and follows the rules
    /// (``BatchDeletePlan``), then deletes by key, 500 keys a statement. Any
    /// error rolls all of it back.
    ///
    /// The selected rows' keys and IDs are read on a reader connection
    /// meanwhile (``BatchSelectedRows``).
    ///
    /// Values of attributes with external binary storage are written tagged
    /// inline (a batch writes no files); the files of values a batch deletes or
    /// overwrites are removed after the commit (``ExternalDataFiles``).
    public func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?) throws -> BatchChanges {
        let schema = try schema
        let files = schema.usesExternalStorage ? ExternalDataFiles() : nil
        do {
            let changes = try execute(request, in: context, schema: schema, files: files)
            files?.finish(committed: true)
            return changes
        } catch {
            files?.finish(committed: false)
            throw error
        }
    }

    private func execute(_ request: StoreBatchRequest, in context: ManagedObjectContext?, schema: TableLayout,
                         files: ExternalDataFiles?) throws -> BatchChanges {
        let history = state.withLock { $0.history }
        let author = context?.transactionAuthor
        let contextName = context?.name
        return try write { connection in
            files?.beginAttempt()   // a stale snapshot runs this closure again
            let record = BatchHistory(layout: history, author: author, contextName: contextName)
            switch request {
            case .update(let update):
                let selection = try BatchSelection(update.fetch, schema: schema)
                guard let selected = try BatchSelectedRows.read(selection, store: self, schema: schema, identity: identity) else {
                    return BatchChanges()
                }
                if let files {
                    let mapping = try schema.mapping(for: update.fetch.entity)
                    let columns = update.values.filter(\.attribute.storesExternalBinaryData).compactMap { mapping.columns[$0.attribute.index]?.name }
                    try retireExternalFiles(selectedBy: selection, columns: columns, files: files, connection: connection)
                }
                let token = try record.recordUpdates(of: selection, slots: update.values.map(\.attribute.index), store: self,
                                                     schema: schema, connection: connection)
                let rows = try batchUpdate(update, selection: selection, selected: selected, schema: schema, connection: connection)
                return BatchChanges(updatedObjectIDs: rows.ids, historyToken: token)
            case .delete(.matching(let fetch)) where !BatchDeletePlan.appliesRules(to: fetch):
                let selection = try BatchSelection(fetch, schema: schema)
                guard let selected = try BatchSelectedRows.read(selection, store: self, schema: schema, identity: identity) else {
                    return BatchChanges()
                }
                if let files {
                    try retireExternalFiles(selectedBy: selection, columns: schema.externalColumns(inTable: selection.table),
                                            files: files, connection: connection)
                }
                let token = try record.recordDeletes(of: selection, store: self, schema: schema, connection: connection)
                let rows = try batchDelete(selection, selected: selected, schema: schema, connection: connection)
                return BatchChanges(deletedObjectIDs: rows.ids, historyToken: token)
            case .delete(let delete):
                let matched: [IncrementalStoreNode]
                switch delete {
                case .matching(let fetch): matched = try matchedRows(fetch, schema: schema, connection: connection)
                case .objectIDs(let ids): matched = try rows(ids, schema: schema, connection: connection)
                }
                let plan = try BatchDeletePlan(matched: matched,
                                               rows: { try rows($0, schema: schema, connection: connection) },
                                               toMany: { try toManyDestinations($0, of: $1, connection: connection) })
                guard !plan.deleted.isEmpty else { return BatchChanges() }
                if let files {
                    for row in plan.deleted {
                        let mapping = try schema.mapping(for: row.objectID.entity)
                        if !mapping.externalSlots.isEmpty {
                            try retireExternalFiles(of: row.objectID, mapping: mapping, files: files, connection: connection)
                        }
                    }
                }
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
    private func matchedRows(_ fetch: StoreFetch, schema: TableLayout, connection: Connection) throws -> [IncrementalStoreNode] {
        let query: SelectQuery
        do {
            query = try SelectQuery(fetch: fetch, schema: schema)
        } catch {
            throw ObjectGraphError.predicateDoesNotCompile(predicate: fetch.predicate?.description ?? "", entity: fetch.entity.name,
                                                           reason: "\(error)")
        }
        let statement = try connection.cachedStatement(query.sql)
        defer { statement.reset() }
        for (offset, value) in query.bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        var decoder = RowDecoder(schema: schema, identity: identity, url: url)
        var nodes: [IncrementalStoreNode] = []
        while try statement.step() {
            nodes.append(try decoder.node(from: statement))
        }
        return nodes
    }

    /// The rows of these IDs that exist, in the order given.
    private func rows(_ ids: [ObjectID], schema: TableLayout, connection: Connection) throws -> [IncrementalStoreNode] {
        let found = try currentRows(of: ids, schema: schema, connection: connection)
        return ids.compactMap { found[$0] }
    }

    // MARK: Writing

    /// Updates the selected rows with one statement; returns them.
    private func batchUpdate(_ update: StoreBatchUpdate, selection: BatchSelection, selected: BatchSelectedRows,
                             schema: TableLayout, connection: Connection) throws -> BatchSelectedRows.Rows {
        let entity = update.fetch.entity
        let mapping = try schema.mapping(for: entity)
        // The SET list every SQL store's batches share (DataStackStorage, StoreLayout+Batch.swift):
        // integers truncated with CAST AS INTEGER, as the in-memory store does; a column with
        // external binary storage takes the value tagged inline (ExternalBinaryStorage.swift).
        let compiled = try schema.batchAssignments(update.values, of: entity, parametersBefore: selection.bindings.count)
        let bindings = selection.bindings + compiled.bindings
        let assignments = compiled.assignments
        let set = (assignments + ["Z_OPT = Z_OPT + 1"]).joined(separator: ", ")
        let statement = try connection.prepare("UPDATE \(mapping.table) AS t0 SET \(set)\(selection.whereClause)")
        for (offset, value) in bindings.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        do {
            try statement.execute()
        } catch let error as SQLiteError where error.extendedResultCode == SQLiteError.SQLITE_CONSTRAINT_UNIQUE {
            let names = Set(update.values.map(\.attribute.name))
            let constraint = entity.rootEntity.selfAndDescendants.lazy.flatMap(\.uniquenessConstraints)
                .first { !names.isDisjoint(with: $0) } ?? []
            throw ObjectGraphError.uniquenessConflict([
                UniquenessConflict(entityName: entity.name, constraint: constraint, objectIDs: Array(try selected.value().ids),
                                   databaseObjectID: nil),
            ])
        }
        let changed = connection.changes
        let rows = try selected.value()
        try rows.check(changed: changed, url: url)
        try checkRanges(of: update, in: mapping, rows: rows, connection: connection)
        return rows
    }

    /// Throws if a computed value does not fit its narrower integer attribute
    /// (16 or 32 bits), as a constant is checked not to: SQLite would keep it,
    /// and it would read back truncated to another number. Runs inside the
    /// batch's transaction, which the error rolls back.
    private func checkRanges(of update: StoreBatchUpdate, in mapping: TableLayout.EntityMapping, rows: BatchSelectedRows.Rows,
                             connection: Connection) throws {
        for (attribute, value) in update.values {
            guard let range = attribute.type.integerRange, range != Int64.min...Int64.max,
                  !value.node.isConstant, let column = mapping.columns[attribute.index]?.name else { continue }
            try rows.forEachChunk { chunk in
                let statement = try connection.prepare("""
                    SELECT \(column) FROM \(mapping.table) WHERE Z_PK IN (\(chunk.map(String.init).joined(separator: ", "))) \
                    AND \(column) NOT BETWEEN \(range.lowerBound) AND \(range.upperBound) LIMIT 1
                    """)
                if try statement.step() {
                    throw ObjectGraphError.valueOutOfRange(key: attribute.name, entity: update.fetch.entity.name,
                                                           value: String(statement.int64(at: 0)), type: attribute.type)
                }
            }
        }
    }

    /// Deletes the selected rows, and the join-table rows that name them, by
    /// their condition; returns them. For entities without delete rules.
    private func batchDelete(_ selection: BatchSelection, selected: BatchSelectedRows, schema: TableLayout,
                             connection: Connection) throws -> BatchSelectedRows.Rows {
        let keys = "SELECT t0.Z_PK FROM \(selection.table) t0\(selection.whereClause)"
        for table in schema.joinTables {
            if table.ownerTable == selection.table {
                try selection.prepare("DELETE FROM \(table.name) WHERE \(table.ownerColumn) IN (\(keys))", on: connection).execute()
            }
            if table.memberTable == selection.table {
                try selection.prepare("DELETE FROM \(table.name) WHERE \(table.memberColumn) IN (\(keys))", on: connection).execute()
            }
        }
        try selection.prepare("DELETE FROM \(selection.table) AS t0\(selection.whereClause)", on: connection).execute()
        let changed = connection.changes
        let rows = try selected.value()
        try rows.check(changed: changed, url: url)
        return rows
    }

    private func batchDelete(_ plan: BatchDeletePlan, schema: TableLayout, connection: Connection) throws {
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

    /// Runs `prefix IN (…)` for the keys, 500 at a time.
    private static func run(_ prefix: String, keys: [Int64], connection: Connection) throws {
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = keys[start..<min(start + 500, keys.count)]
            let statement = try connection.prepare(prefix + " IN (" + Array(repeating: "?", count: chunk.count).joined(separator: ",") + ")")
            var index: Int32 = 1
            for key in chunk {
                try statement.bind(key, at: index)
                index += 1
            }
            try statement.execute()
        }
    }
}
