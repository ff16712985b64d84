@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Reading relationships

extension SQLiteStore: RelationshipPrefetchingStore, UniquenessCheckingStore {
    /// The destinations of a to-many relationship of one row: from its join table
    /// (many-to-many), or from the destination's foreign key (one-to-many), in
    /// `Z_FOK_` order for an ordered relationship.
    func toManyDestinations(_ relationship: RelationshipDescription, of objectID: ObjectID,
                            in context: ManagedObjectContext?) throws -> PropertyValue {
        guard objectID.primaryKey != nil else { return .objects([]) }
        return .objects(try read(for: context) { try toManyDestinations(relationship, of: [objectID], connection: $0)[objectID] ?? [] })
    }

    /// The destinations of a to-many relationship of several rows, by owner
    /// (owners without any left out), as ``toManyDestinations(_:of:)`` orders
    /// them: one query per 500 owners, on `connection`.
    func toManyDestinations(_ relationship: RelationshipDescription, of owners: [ObjectID],
                            connection: Connection) throws -> [ObjectID: [ObjectID]] {
        let schema = try schema
        let identity = identity
        var ownerByKey: [Int64: ObjectID] = [:]
        for id in owners { if let pk = id.primaryKey { ownerByKey[pk] = id } }
        var destinations: [ObjectID: [ObjectID]] = [:]
        var scopes = ObjectIDScopeCache(store: identity)
        try readToMany(relationship, owners: ownerByKey.keys.sorted(), columns: "t0.Z_PK, t0.Z_ENT", ownerPosition: 2,
                       schema: schema, connection: connection) { statement, owner in
            let number = statement.int64(at: 1)
            guard let entity = schema.entitiesByNumber[number], let owner = ownerByKey[owner] else {
                throw unreadableDestination(relationship, key: statement.int64(at: 0), entity: number)
            }
            destinations[owner, default: []].append(scopes.objectID(of: entity, primaryKey: statement.int64(at: 0)))
        }
        return destinations
    }

    public func prefetch(_ relationship: RelationshipDescription, forObjectsWith objectIDs: [ObjectID]) throws -> RelationshipPrefetch {
        let schema = try schema
        let identity = identity
        guard relationship.isToMany, let destination = relationship.destinationEntity,
              let mapping = schema.mappings[ObjectIdentifier(destination)],
              let table = schema.table(named: mapping.table) else { return RelationshipPrefetch() }
        var ownerByKey: [Int64: ObjectID] = [:]
        for id in objectIDs { if let pk = id.primaryKey { ownerByKey[pk] = id } }
        return try read { connection in
            var decoder = RowDecoder(schema: schema, identity: identity, url: url)
            var result = RelationshipPrefetch()
            try readToMany(relationship, owners: ownerByKey.keys.sorted(), columns: schema.selectColumns(of: table, alias: "t0"),
                           ownerPosition: Int32(3 + table.columns.count), schema: schema, connection: connection) { statement, owner in
                let node = try decoder.node(from: statement)
                guard let owner = ownerByKey[owner] else {
                    throw unreadableDestination(relationship, key: statement.int64(at: 0), entity: statement.int64(at: 1))
                }
                result.destinations[owner, default: []].append(node.objectID)
                result.nodes.append(node)
            }
            return result
        }
    }

    /// Reads the destination rows of a to-many relationship of the owners
    /// `keys`, 500 owners a query, from its join table (many-to-many) or the
    /// destination's foreign key (one-to-many): `columns` of each row (alias
    /// `t0`), then at `ownerPosition` its owner's key; by owner, then in the
    /// relationship's order (`Z_FOK_` or the join table's for an ordered one,
    /// else by key). Reads nothing for a relationship kept in neither place.
    private func readToMany(_ relationship: RelationshipDescription, owners keys: [Int64], columns: String, ownerPosition: Int32,
                            schema: TableLayout, connection: Connection,
                            _ row: (_ statement: Statement, _ owner: Int64) throws -> Void) throws {
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = keys[start..<min(start + 500, keys.count)]
            let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            guard let query = schema.toManySelect(relationship, columns: columns, ownersIn: placeholders) else { return }
            let statement = try connection.cachedStatement(query)
            defer { statement.reset() }
            for (offset, key) in chunk.enumerated() { try statement.bind(key, at: Int32(offset + 1)) }
            while try statement.step() { try row(statement, statement.int64(at: ownerPosition)) }
        }
    }

    /// The error for a destination row this model cannot read: a failed read, never a missing member.
    private func unreadableDestination(_ relationship: RelationshipDescription, key: Int64, entity number: Int64) -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: url, message: """
            \(relationship.entity?.name ?? "?").\(relationship.name) leads to row \(key) of entity number \(number), \
            which the model does not have
            """)
    }

    public func objectIDs(of entity: EntityDescription, matching keys: [String], values: [[PropertyValue]]) throws -> [ObjectID?] {
        let schema = try schema
        let identity = identity
        let sql = try schema.rowLookupSQL(entity, keys: keys)
        return try read { connection in
            let statement = try connection.cachedStatement(sql)
            var decoder = RowDecoder(schema: schema, identity: identity, url: url)
            return try values.map { tuple -> ObjectID? in
                guard tuple.count == keys.count, !tuple.contains(where: \.isNull) else { return nil }
                statement.reset()
                for (offset, value) in tuple.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
                defer { statement.reset() }
                guard try statement.step() else { return nil }
                return try decoder.objectID(from: statement)
            }
        }
    }
}

// MARK: - Writing relationships at save

extension SQLiteStore {
    /// Writes what the rows themselves do not hold, inside the save's transaction,
    /// after its inserts and updates: the join-table rows of many-to-many
    /// relationships (from the side that names the table), the `Z_FOK_` ranks of
    /// ordered relationships (Core Data's steps of 1024), and the removal of
    /// deleted rows from every join table.
    ///
    /// Only to-many slots that the context loaded (`.objects`) are written; an
    /// unloaded one (`.null`) has not changed. Rows are compared with what the
    /// file holds, so only differences are written.
    func writeRelationships(of request: SaveChangesRequest, schema: TableLayout, permanentIDs: [ObjectID: ObjectID],
                            connection: Connection) throws {
        func key(_ id: ObjectID) -> Int64? { (permanentIDs[id] ?? id).primaryKey }
        // Most saves relate nothing: then there is nothing to collect either.
        var related: [IncrementalStoreNode] = []
        for node in request.insertedObjects where node.objectID.entity.hasRelationships { related.append(node) }
        for node in request.updatedObjects where node.objectID.entity.hasRelationships { related.append(node) }
        let inserted = related.isEmpty ? [] : Set(request.insertedObjects.map(\.objectID))
        // Membership and order of the naming side first, so the other side's order finds its rows.
        for primaryPass in [true, false] where !related.isEmpty {
            for node in related {
                guard let owner = key(node.objectID) else { continue }
                for case let relationship as RelationshipDescription in node.objectID.entity.slotProperties where relationship.isToMany {
                    guard case .objects(let ids) = node.values[relationship.index] else { continue }
                    var seen = Set<Int64>()
                    let members = ids.compactMap(key).filter { seen.insert($0).inserted }
                    if let path = schema.joinPath(for: relationship) {
                        guard path.isPrimary == primaryPass else { continue }
                        if primaryPass {
                            try writeJoinRows(path, owner: owner, members: members, isNewOwner: inserted.contains(node.objectID), connection: connection)
                        } else if path.orderColumn != nil {
                            try writeJoinRanks(path, owner: owner, members: members, connection: connection)
                        }
                    } else if primaryPass, let orderColumn = schema.orderColumn(forOrdered: relationship),
                              let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity,
                              let mapping = schema.mappings[ObjectIdentifier(destination)],
                              let foreignKey = mapping.columns[inverse.index]?.name {
                        try writeForeignKeyRanks(table: mapping.table, foreignKey: foreignKey, orderColumn: orderColumn,
                                                 owner: owner, members: members, connection: connection)
                    }
                }
            }
        }
        guard !schema.joinTables.isEmpty else { return }
        for node in request.deletedObjects {
            guard let pk = node.objectID.primaryKey else { continue }
            for (table, column) in schema.joinColumns(holding: node.objectID.entity) {
                try run("DELETE FROM \(table) WHERE \(column) = ?", [pk], connection)
            }
        }
    }

    /// Makes the join table hold exactly `members` for `owner`, ranked if ordered.
    private func writeJoinRows(_ path: TableLayout.JoinPath, owner: Int64, members: [Int64], isNewOwner: Bool,
                               connection: Connection) throws {
        let source = path.sourceColumn
        let destination = path.destinationColumn
        let table = path.table.name
        let existing = isNewOwner ? [:] : try ranks(
            "SELECT \(destination), \(path.orderColumn ?? "NULL") FROM \(table) WHERE \(source) = ?", owner, connection)
        let wanted = Set(members)
        for member in existing.keys where !wanted.contains(member) {
            try run("DELETE FROM \(table) WHERE \(source) = ? AND \(destination) = ?", [owner, member], connection)
        }
        for (position, member) in members.enumerated() {
            let rank = Int64(position + 1) * 1024
            if let orderColumn = path.orderColumn {
                if existing[member] == nil {
                    try run("INSERT OR REPLACE INTO \(table) (\(source), \(destination), \(orderColumn)) VALUES (?, ?, ?)",
                            [owner, member, rank], connection)
                } else if let current = existing[member], current != rank {
                    try run("UPDATE \(table) SET \(orderColumn) = ? WHERE \(source) = ? AND \(destination) = ?",
                            [rank, owner, member], connection)
                }
            } else if existing[member] == nil {
                try run("INSERT OR IGNORE INTO \(table) (\(source), \(destination)) VALUES (?, ?)", [owner, member], connection)
            }
        }
    }

    /// Ranks the rows of the side of a join table that does not name it (its members were written by the other side).
    private func writeJoinRanks(_ path: TableLayout.JoinPath, owner: Int64, members: [Int64], connection: Connection) throws {
        guard let orderColumn = path.orderColumn else { return }
        let table = path.table.name
        let existing = try ranks("SELECT \(path.destinationColumn), \(orderColumn) FROM \(table) WHERE \(path.sourceColumn) = ?",
                                 owner, connection)
        for (position, member) in members.enumerated() {
            let rank = Int64(position + 1) * 1024
            guard let current = existing[member], current != rank else { continue }
            try run("UPDATE \(table) SET \(orderColumn) = ? WHERE \(path.sourceColumn) = ? AND \(path.destinationColumn) = ?",
                    [rank, owner, member], connection)
        }
    }

    /// Ranks the members of an ordered one-to-many in their `Z_FOK_<INVERSE>` column.
    private func writeForeignKeyRanks(table: String, foreignKey: String, orderColumn: String, owner: Int64, members: [Int64],
                                      connection: Connection) throws {
        let existing = try ranks("SELECT Z_PK, \(orderColumn) FROM \(table) WHERE \(foreignKey) = ?", owner, connection)
        for (position, member) in members.enumerated() {
            let rank = Int64(position + 1) * 1024
            guard let current = existing[member], current != rank else { continue }
            try run("UPDATE \(table) SET \(orderColumn) = ? WHERE Z_PK = ?", [rank, member], connection)
        }
    }

    /// The first column of each row, with the second (nil when NULL).
    private func ranks(_ sql: String, _ argument: Int64, _ connection: Connection) throws -> [Int64: Int64?] {
        let statement = try connection.cachedStatement(sql)
        try statement.bind(argument, at: 1)
        defer { statement.reset() }
        var result: [Int64: Int64?] = [:]
        while try statement.step() {
            result[statement.int64(at: 0)] = statement.isNull(at: 1) ? Int64?.none : statement.int64(at: 1)
        }
        return result
    }

    private func run(_ sql: String, _ arguments: [Int64], _ connection: Connection) throws {
        let statement = try connection.cachedStatement(sql)
        for (offset, value) in arguments.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        try statement.execute()
    }
}
