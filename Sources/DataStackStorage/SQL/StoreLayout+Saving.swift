import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - The statements of a save
//
// Each entity's INSERT, UPDATE and DELETE are the SQLite store's own
// (`EntityStatements`), written in the layout's dialect, with the values bound
// in the same order and storage form.
@_spi(StoreImplementation)
extension StoreLayout {
    /// A statement and the values of its parameters, in order.
    public struct Statement: Sendable {
        public let sql: String
        public let values: [StoredValue]
    }

    /// The inserts of new rows of one entity (``EntityStatements/insertSQL(rows:)``:
    /// the entity's number and version 1 in the text) — the nodes' values,
    /// to-ones by the key of the ID `permanent` gives for theirs (a temporary ID
    /// of an object inserted by the same save has a permanent one by then) —
    /// many rows a statement (`VALUES
    /// (…), (…)`): a store across a network pays a round trip per statement,
    /// not per row. Statements hold 256, 64, 16, 4 or 1 rows (fewer when a row
    /// has many columns, to stay under 65,535 parameters), so a store that
    /// prepares them keeps at most five per entity.
    ///
    /// - Parameters:
    ///   - nodes: new objects, all of `entity`.
    ///   - primaryKeys: each node's primary key, in the same order.
    /// - Returns: each statement with the nodes whose rows it writes.
    public func insertStatements(_ nodes: [IncrementalStoreNode], of entity: EntityDescription, primaryKeys: [Int64],
                                 permanent: (ObjectID) -> ObjectID) throws -> [(statement: Statement, nodes: ArraySlice<IncrementalStoreNode>)] {
        let mapping = try schema.mapping(for: entity)
        let statements = mapping.statements
        let perRow = statements.insertParametersPerRow
        let largest = min(256, 65_535 / perRow)
        var result: [(statement: Statement, nodes: ArraySlice<IncrementalStoreNode>)] = []
        var start = 0
        while start < nodes.count {
            let remaining = nodes.count - start
            let rows = [256, 64, 16, 4, 1].first { $0 <= min(remaining, largest) } ?? 1
            var values: [StoredValue] = []
            values.reserveCapacity(rows * perRow)
            for index in start..<(start + rows) {
                values.append(.integer(primaryKeys[index]))
                values += columnValues(of: nodes[index], mapping: mapping, permanent: permanent)
            }
            result.append((Statement(sql: statements.insertSQL(rows: rows), values: values), nodes[start..<(start + rows)]))
            start += rows
        }
        return result
    }

    /// The update of a row read at `node.version`: it writes version + 1 and
    /// changes nothing when the row's version is no longer that (a conflict the
    /// store reports, as the SQLite store does, when no row was changed).
    public func update(_ node: IncrementalStoreNode, permanent: (ObjectID) -> ObjectID) throws -> Statement {
        let mapping = try schema.mapping(for: node.objectID.entity)
        let values: [StoredValue] = [.integer(node.version + 1)] + columnValues(of: node, mapping: mapping, permanent: permanent)
            + [.integer(node.objectID.primaryKey ?? 0), .integer(node.version)]
        return Statement(sql: mapping.statements.updateSQL, values: values)
    }

    /// The updates of rows of one entity read at their nodes' versions. For a
    /// dialect that ``SQLDialect/updatesRowsInBatches``, many rows a statement
    /// (`UPDATE … FROM (VALUES …) RETURNING Z_PK`, batched as
    /// ``insertStatements(_:of:primaryKeys:permanent:)``): each row is written
    /// only if its version is still the node's, and the statement returns the
    /// keys of the rows it wrote — a node whose key is missing is a conflict.
    /// Other dialects get one ``update(_:permanent:)`` per node, which returns
    /// nothing (check the changed-row count instead).
    public func updateStatements(_ nodes: [IncrementalStoreNode], of entity: EntityDescription,
                                 permanent: (ObjectID) -> ObjectID) throws -> [(statement: Statement, nodes: ArraySlice<IncrementalStoreNode>)] {
        guard dialect.updatesRowsInBatches else {
            return try nodes.indices.map { (try update(nodes[$0], permanent: permanent), nodes[$0...$0]) }
        }
        let mapping = try schema.mapping(for: entity)
        let writable = mapping.statements.writable
        // new Z_OPT, the written columns, then the key and the version read.
        var names = ["Z_OPT"] + writable.map(\.column.name) + writable.compactMap(\.entityColumn)
        var types = [dialect.keyType] + writable.map { slot -> String in
            guard case .attribute(let type) = slot.column.kind else { return dialect.keyType }
            return dialect.columnType(declared: TableLayout.declaredType(of: type))
        } + writable.compactMap { $0.entityColumn.map { _ in dialect.keyType } }
        names += ["DS_KEY", "DS_VERSION"]
        types += [dialect.keyType, dialect.keyType]
        let perRow = names.count
        let largest = min(256, 65_535 / perRow)
        let assignments = (["Z_OPT"] + writable.map(\.column.name) + writable.compactMap(\.entityColumn))
            .map { "\($0) = v.\($0)" }.joined(separator: ", ")
        var result: [(statement: Statement, nodes: ArraySlice<IncrementalStoreNode>)] = []
        var start = 0
        while start < nodes.count {
            let rows = [256, 64, 16, 4, 1].first { $0 <= min(nodes.count - start, largest) } ?? 1
            var values: [StoredValue] = []
            var tuples: [String] = []
            for index in start..<(start + rows) {
                let node = nodes[index]
                values += [.integer(node.version + 1)] + columnValues(of: node, mapping: mapping, permanent: permanent)
                    + [.integer(node.objectID.primaryKey ?? 0), .integer(node.version)]
                let first = (index - start) * perRow
                // Typed placeholders: a VALUES list takes its column types from them.
                tuples.append("(" + types.indices.map { dialect.typedPlaceholder(first + $0 + 1, type: types[$0]) }.joined(separator: ", ") + ")")
            }
            let sql = "UPDATE \(mapping.table) AS t SET \(assignments) FROM (VALUES \(tuples.joined(separator: ", "))) "
                + "AS v(\(names.joined(separator: ", "))) WHERE t.Z_PK = v.DS_KEY AND t.Z_OPT = v.DS_VERSION RETURNING t.Z_PK"
            result.append((Statement(sql: sql, values: values), nodes[start..<(start + rows)]))
            start += rows
        }
        return result
    }

    /// The delete of a row read at `node.version`; changes nothing when the version moved on.
    public func delete(_ node: IncrementalStoreNode) throws -> Statement {
        let mapping = try schema.mapping(for: node.objectID.entity)
        return Statement(sql: mapping.statements.deleteSQL, values: [.integer(node.objectID.primaryKey ?? 0), .integer(node.version)])
    }

    /// The version (`Z_OPT`) of the row whose key is the one parameter.
    public func versionQuery(for entity: EntityDescription) throws -> String {
        let table = try schema.mapping(for: entity).table
        return "SELECT Z_OPT FROM \(table) WHERE Z_PK = \(dialect.placeholder(1))"
    }

    /// The relationship rows a save writes, after its inserts and updates:
    /// for each inserted or updated object whose many-to-many relationship the
    /// context loaded, its join-table rows replaced by the members it has now
    /// (on the side that names the table); the `Z_FOK_` ranks of ordered
    /// relationships, in Core Data's steps of 1024 (in the join table, or in
    /// the destination's column for an ordered one-to-many); for each deleted
    /// object, its rows in every join table it can be in.
    ///
    /// Members are ranked in one statement per relationship of an object:
    /// the key array (``keyArray(_:)``) with each key's position.
    public func relationshipStatements(for request: SaveChangesRequest, permanent: (ObjectID) -> ObjectID) -> [Statement] {
        guard !schema.joinTables.isEmpty || !schema.orderColumns.isEmpty else { return [] }
        let one = dialect.placeholder(1)
        let memberList = keyList(parameter: 2)
        let ranked = "(\(rankedKeyList(parameter: 2))) AS members"
        var statements: [Statement] = []
        // Ranks kept by the side that does not name a join table need its rows: written after them.
        var laterRanks: [Statement] = []
        for node in request.insertedObjects + request.updatedObjects where node.objectID.entity.hasRelationships {
            guard let owner = permanent(node.objectID).primaryKey else { continue }
            for case let relationship as RelationshipDescription in node.objectID.entity.slotProperties where relationship.isToMany {
                guard case .objects(let ids) = node.values[relationship.index] else { continue }
                var seen = Set<Int64>()
                let members = ids.compactMap { permanent($0).primaryKey }.filter { seen.insert($0).inserted }
                let values: [StoredValue] = [.integer(owner), keyArray(members)]
                if let path = schema.joinPath(for: relationship) {
                    let table = path.table.name
                    if !path.isPrimary {
                        guard let order = path.orderColumn, !members.isEmpty else { continue }
                        laterRanks.append(Statement(sql: """
                            UPDATE \(table) SET \(order) = members.ord * 1024 FROM \(ranked) \
                            WHERE \(table).\(path.sourceColumn) = \(one) AND \(table).\(path.destinationColumn) = members.m
                            """, values: values))
                        continue
                    }
                    // Rows of members that stay are kept, not rewritten: they hold the other side's rank too.
                    statements.append(Statement(sql: """
                        DELETE FROM \(table) WHERE \(path.sourceColumn) = \(one) AND \(path.destinationColumn) NOT IN (\(memberList))
                        """, values: values))
                    guard !members.isEmpty else { continue }
                    let pair = "\(path.sourceColumn), \(path.destinationColumn)"
                    if let order = path.orderColumn {
                        statements.append(Statement(sql: """
                            INSERT INTO \(table) (\(pair), \(order)) SELECT \(one), members.m, members.ord * 1024 FROM \(ranked) \
                            WHERE TRUE ON CONFLICT (\(pair)) DO UPDATE SET \(order) = excluded.\(order)
                            """, values: values))
                    } else {
                        statements.append(Statement(sql: """
                            INSERT INTO \(table) (\(pair)) SELECT \(one), m FROM (\(memberList)) AS members(m) WHERE TRUE ON CONFLICT DO NOTHING
                            """, values: values))
                    }
                } else if let order = schema.orderColumn(forOrdered: relationship), !members.isEmpty,
                          let inverse = relationship.inverseRelationship, let destination = relationship.destinationEntity,
                          let mapping = schema.mappings[ObjectIdentifier(destination)],
                          let foreignKey = mapping.columns[inverse.index]?.name {
                    let table = mapping.table
                    laterRanks.append(Statement(sql: """
                        UPDATE \(table) SET \(order) = members.ord * 1024 FROM \(ranked) \
                        WHERE \(table).Z_PK = members.m AND \(table).\(foreignKey) = \(one)
                        """, values: values))
                }
            }
        }
        statements += laterRanks
        for node in request.deletedObjects {
            guard let key = node.objectID.primaryKey else { continue }
            for (table, column) in schema.joinColumns(holding: node.objectID.entity) {
                statements.append(Statement(sql: "DELETE FROM \(table) WHERE \(column) = \(one)", values: [.integer(key)]))
            }
        }
        return statements
    }

    /// The error for a row a uniqueness constraint's unique index refused: the
    /// entity's (or its tree's) constraint, naming the objects of the refused
    /// statement (for a statement of several rows, the culprit is one of them).
    public static func uniquenessViolation(by objectIDs: [ObjectID]) -> ObjectGraphError {
        guard let entity = objectIDs.first?.entity else { return .uniquenessConflict([]) }
        let constraint = (entity.rootEntity.selfAndDescendants.first { candidate in
            entity.isKind(of: candidate) && !candidate.uniquenessConstraints.isEmpty
        })?.uniquenessConstraints.first ?? []
        return .uniquenessConflict([
            UniquenessConflict(entityName: entity.name, constraint: constraint, objectIDs: objectIDs, databaseObjectID: nil),
        ])
    }

    /// A row's column values in the entity statement's order: each written
    /// slot, then the entity columns of to-ones whose destination has subentities.
    private func columnValues(of node: IncrementalStoreNode, mapping: TableLayout.EntityMapping,
                              permanent: (ObjectID) -> ObjectID) -> [StoredValue] {
        var values: [StoredValue] = []
        var entityColumns: [StoredValue] = []
        for slot in mapping.statements.writable {
            let value = node.values[slot.slot]
            if case .object(let id) = value {
                let target = permanent(id)
                values.append(.integer(target.primaryKey ?? -1))
                if slot.entityColumn != nil {
                    entityColumns.append(schema.mappings[ObjectIdentifier(target.entity)].map { .integer($0.number) } ?? .null)
                }
            } else {
                values.append(StoredValue(value))
                if slot.entityColumn != nil { entityColumns.append(.null) }
            }
        }
        return values + entityColumns
    }
}
