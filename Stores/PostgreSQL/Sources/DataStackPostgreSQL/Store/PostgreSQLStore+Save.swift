import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Saving

extension PostgreSQLStore {
    /// Writes a save in one transaction: deletes, updates and locked rows
    /// checked against their versions (every conflict gathered, then thrown
    /// together), inserts under keys from `Z_PRIMARYKEY`, join-table rows,
    /// then — with history — one history transaction, numbered last, and its
    /// `NOTIFY`. Any error rolls everything back: a save stands whole or not
    /// at all, on this machine and every other.
    func execute(_ request: SaveChangesRequest, in context: ManagedObjectContext?) throws -> SaveResult {
        try requireObjectSaves()
        let layout = try layout
        let (identifier, tracksHistory) = stateLock.withLock { (state.identifier, state.tracksHistory) }
        let author = context?.transactionAuthor
        let contextName = context?.name
        return try withConnection { connection in
            try connection.transaction {
                let temporaries = request.insertedObjects.map(\.objectID).filter(\.isTemporaryID)
                let permanentIDs = Dictionary(uniqueKeysWithValues: zip(temporaries, try permanentIDs(for: temporaries, connection)))
                let permanent: (ObjectID) -> ObjectID = { permanentIDs[$0] ?? $0 }

                var conflicts: [MergeConflict] = []
                for node in request.deletedObjects {
                    let statement = try layout.delete(node)
                    if try run(statement, connection).affectedRowCount == 0 {
                        conflicts.append(try conflict(for: node, layout: layout, connection))
                    }
                }
                for node in request.updatedObjects {
                    if try run(try layout.update(node, permanent: permanent), for: [node], connection).affectedRowCount == 0 {
                        conflicts.append(try conflict(for: node, layout: layout, connection))
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
                var insertedByEntity: [ObjectIdentifier: (entity: EntityDescription, nodes: [IncrementalStoreNode], keys: [Int64])] = [:]
                for node in request.insertedObjects {
                    guard let key = permanent(node.objectID).primaryKey else { continue }
                    let entity = node.objectID.entity
                    insertedByEntity[ObjectIdentifier(entity), default: (entity, [], [])].nodes.append(node)
                    insertedByEntity[ObjectIdentifier(entity)]?.keys.append(key)
                }
                for (entity, nodes, keys) in insertedByEntity.values {
                    for (statement, rows) in try layout.insertStatements(nodes, of: entity, primaryKeys: keys, permanent: permanent) {
                        try run(statement, for: Array(rows), connection)
                    }
                }
                for statement in layout.relationshipStatements(for: request, permanent: permanent) {
                    _ = try run(statement, connection)
                }
                var result = SaveResult(permanentIDs: permanentIDs)
                if tracksHistory {
                    result.historyTokens = [try recordHistory(of: request, permanent: permanent, author: author, contextName: contextName,
                                                              storeIdentifier: identifier, layout: layout, connection)]
                }
                return result
            }
        }
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
