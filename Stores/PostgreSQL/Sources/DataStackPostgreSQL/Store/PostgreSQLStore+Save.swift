import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

// MARK: - Saving

extension PostgreSQLStore {
    /// Writes a save in one transaction: deletes, updates and locked rows
    /// checked against their versions (every conflict gathered, then thrown
    /// together), inserts under keys from `Z_PRIMARYKEY`, join-table rows,
    /// then — with history — one history transaction, numbered last, and its
    /// `NOTIFY`. Any error rolls everything back: a save stands whole or not
    /// at all, on this machine and every other.
    ///
    /// Conflicts go to the request's resolver inside the transaction (the
    /// ``ObjectGraph/SaveConflictResolver`` contract): the rows it resolves
    /// against are read `FOR UPDATE`, so no other connection moves them before
    /// this one commits — PostgreSQL locks rows, not the database. The first
    /// attempt runs bare, and a conflict rolls the whole transaction back and
    /// begins another (nothing else is in it yet); later attempts run under a
    /// savepoint, so the rows locked for them stay locked. A save that meets
    /// no conflict pays for no savepoint.
    func execute(_ request: SaveChangesRequest, in context: ManagedObjectContext?) throws -> SaveResult {
        try requireObjectSaves()
        let layout = try layout
        let (identifier, tracksHistory) = stateLock.withLock { (state.identifier, state.tracksHistory) }
        let settings = SaveSettings(layout: layout, storeIdentifier: identifier, tracksHistory: tracksHistory,
                              author: context?.transactionAuthor, contextName: context?.name)
        return try withConnection { connection in
            try connection.transaction {
                var attempts = 0
                return try request.writeResolvingConflicts(attempt: { request in
                    attempts += 1
                    if attempts > 1 { try connection.execute("SAVEPOINT datastack_save") }
                    do {
                        let result = try write(request, settings, connection)
                        if attempts > 1 { try connection.execute("RELEASE SAVEPOINT datastack_save") }
                        return result
                    } catch let error as ObjectGraphError {
                        // A conflict: the next attempt needs the transaction as it was
                        // before this one, so a rollback that fails is the save's error.
                        if attempts > 1 {
                            try connection.execute("ROLLBACK TO SAVEPOINT datastack_save")
                            try connection.execute("RELEASE SAVEPOINT datastack_save")
                        } else {
                            try connection.restartTransaction()
                        }
                        throw error
                    }
                }, currentRows: { objectIDs in
                    try rows(of: objectIDs, layout: layout, locking: true, connection)
                })
            }
        }
    }

    /// What every attempt of one save needs besides its request.
    private struct SaveSettings {
        let layout: StoreLayout
        let storeIdentifier: String
        let tracksHistory: Bool
        let author: String?
        let contextName: String?
    }

    /// One attempt at a save, inside the caller's transaction; throws the
    /// version conflicts it finds, or a uniqueness constraint's refusal.
    private func write(_ request: SaveChangesRequest, _ save: SaveSettings, _ connection: PostgreSQLConnection) throws -> SaveResult {
        let layout = save.layout
        let temporaries = request.insertedObjects.map(\.objectID).filter(\.isTemporaryID)
        let permanentIDs = Dictionary(uniqueKeysWithValues: zip(temporaries, try permanentIDs(for: temporaries, connection)))
        let permanent: (ObjectID) -> ObjectID = { permanentIDs[$0] ?? $0 }

        // What history compares an update with: the rows as they are before this save writes them.
        // And the deleted objects with preserved attributes: their tombstones.
        let tombstoned = save.tracksHistory && layout.tombstoneColumnCount > 0
            ? try request.deletedObjects.filter { !layout.tombstoneAttributes(ofEntityNumbered: try layout.number(of: $0.objectID.entity)).isEmpty }
            : []
        let before = save.tracksHistory && !(request.updatedObjects.isEmpty && tombstoned.isEmpty)
            ? try rowsBeforeSave(request.updatedObjects + tombstoned, layout: layout, connection) : [:]
        var conflicts: [MergeConflict] = []
        for node in request.deletedObjects {
            let statement = try layout.delete(node)
            if try run(statement, connection).affectedRowCount == 0 {
                conflicts.append(try conflict(for: node, layout: layout, connection))
            }
        }
        // Rows of one entity go many to a statement, each written only at its version;
        // the statement returns the keys it wrote, and a node whose key is missing conflicts.
        for (entity, nodes) in Self.grouped(request.updatedObjects) {
            for (statement, rows) in try layout.updateStatements(nodes, of: entity, permanent: permanent) {
                let result = try run(statement, for: Array(rows), connection)
                let written = Set(try result.rows.map { try $0.int64(at: 0) })
                for node in rows where !written.contains(node.objectID.primaryKey ?? 0) {
                    conflicts.append(try conflict(for: node, layout: layout, connection))
                }
            }
        }
        for node in request.lockedObjects {
            let current = try currentVersion(of: node.objectID, layout: layout, connection)
            if current != node.version {
                conflicts.append(MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version, persistedSnapshotVersion: current))
            }
        }
        if !conflicts.isEmpty { throw ObjectGraphError.mergeConflict(conflicts) }
        // Rows of one entity go many to a statement: a round trip per statement, not per row.
        for (entity, nodes) in Self.grouped(request.insertedObjects) {
            let keys = try nodes.map { node -> Int64 in
                guard let key = permanent(node.objectID).primaryKey else { throw ObjectGraphError.objectNotFound(node.objectID) }
                return key
            }
            for (statement, rows) in try layout.insertStatements(nodes, of: entity, primaryKeys: keys, permanent: permanent) {
                try run(statement, for: Array(rows), connection)
            }
        }
        for statement in layout.relationshipStatements(for: request, permanent: permanent) {
            _ = try run(statement, connection)
        }
        // The full-text index in the same transaction: the rows as written (deleted rows go by
        // trigger). A store without one builds no list of keys on its saves.
        if !layout.searchIndexes.isEmpty {
            try reindexSearch((request.insertedObjects + request.updatedObjects).compactMap { node in
                permanent(node.objectID).primaryKey.map { (node.objectID.entity, $0) }
            }, layout: layout, connection)
        }
        var result = SaveResult(permanentIDs: permanentIDs)
        if save.tracksHistory {
            result.historyTokens = [try recordHistory(of: request, before: before, permanent: permanent, author: save.author,
                                                      contextName: save.contextName, storeIdentifier: save.storeIdentifier,
                                                      layout: layout, connection)]
        }
        return result
    }

    /// The rows of `updated` as they are now, with the members of each
    /// to-many the save writes: one query per table, and one per relationship.
    /// Read inside the save's transaction before its updates; an update whose
    /// row moved on since is a conflict, and the save does not get to history.
    private func rowsBeforeSave(_ updated: [IncrementalStoreNode], layout: StoreLayout,
                                _ connection: PostgreSQLConnection) throws -> [ObjectID: IncrementalStoreNode] {
        var reader = layout.rowReader(storeIdentifier: identifier)
        var rows: [ObjectID: IncrementalStoreNode] = [:]
        var keysByTable: [String: (entity: EntityDescription, keys: [Int64])] = [:]
        var ownersByRelationship: [ObjectIdentifier: (relationship: RelationshipDescription, owners: [ObjectID])] = [:]
        for node in updated {
            guard let key = node.objectID.primaryKey else { continue }
            keysByTable[try layout.table(of: node.objectID.entity), default: (node.objectID.entity, [])].keys.append(key)
            for relationship in layout.relationshipsComparedByHistory(in: node) {
                ownersByRelationship[ObjectIdentifier(relationship), default: (relationship, [])].owners.append(node.objectID)
            }
        }
        for (entity, keys) in keysByTable.values {
            let result = try connection.execute(cached: try layout.rowsQuery(for: entity), [PostgreSQLValue(layout.keyArray(keys))])
            for row in result.rows {
                let node = try reader.node(from: row)
                rows[node.objectID] = node
            }
        }
        for (relationship, owners) in ownersByRelationship.values {
            guard let sql = layout.toManyQuery(for: relationship) else { continue }
            let byKey = Dictionary(owners.compactMap { id in id.primaryKey.map { ($0, id) } }, uniquingKeysWith: { first, _ in first })
            var members: [ObjectID: [ObjectID]] = [:]
            for row in try connection.execute(cached: sql, [PostgreSQLValue(layout.keyArray(byKey.keys.sorted()))]).rows {
                if let owner = byKey[try row.int64(at: 2)] { members[owner, default: []].append(try reader.objectID(from: row)) }
            }
            for owner in owners { rows[owner]?.values[relationship.index] = .objects(members[owner] ?? []) }
        }
        return rows
    }

    /// `nodes` by entity, each entity's in their order.
    private static func grouped(_ nodes: [IncrementalStoreNode]) -> [(entity: EntityDescription, nodes: [IncrementalStoreNode])] {
        var groups: [(entity: EntityDescription, nodes: [IncrementalStoreNode])] = []
        var positions: [ObjectIdentifier: Int] = [:]
        for node in nodes {
            let entity = node.objectID.entity
            if let position = positions[ObjectIdentifier(entity)] {
                groups[position].nodes.append(node)
            } else {
                positions[ObjectIdentifier(entity)] = groups.count
                groups.append((entity, [node]))
            }
        }
        return groups
    }

    @discardableResult
    private func run(_ statement: StoreLayout.Statement, for nodes: [IncrementalStoreNode] = [],
                     _ connection: PostgreSQLConnection) throws -> PostgreSQLResult {
        do {
            return try connection.execute(cached: statement.sql, statement.values.map(PostgreSQLValue.init))
        } catch let error as PostgreSQLError where error.kind == .uniqueViolation {
            guard !nodes.isEmpty else { throw error }
            // A uniqueness constraint's unique index refused a row: the same error the SQLite store throws.
            throw StoreLayout.uniquenessViolation(by: nodes.map(\.objectID))
        }
    }

    private func currentVersion(of objectID: ObjectID, layout: StoreLayout, _ connection: PostgreSQLConnection) throws -> Int64? {
        let result = try connection.execute(cached: try layout.versionQuery(for: objectID.entity), [PostgreSQLValue(objectID.primaryKey ?? 0)])
        return result.rowCount == 0 ? nil : try result.int64(row: 0, column: 0)
    }

    private func conflict(for node: IncrementalStoreNode, layout: StoreLayout, _ connection: PostgreSQLConnection) throws -> MergeConflict {
        MergeConflict(objectID: node.objectID, objectSnapshotVersion: node.version,
                      persistedSnapshotVersion: try currentVersion(of: node.objectID, layout: layout, connection))
    }
}
