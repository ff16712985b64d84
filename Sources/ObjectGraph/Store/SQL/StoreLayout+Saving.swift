import Foundation

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

    /// The inserts of new rows of one entity — version 1, the nodes' values,
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
        let perRow = statements.insertColumnCount
        let largest = min(256, 65_535 / perRow)
        var result: [(statement: Statement, nodes: ArraySlice<IncrementalStoreNode>)] = []
        var start = 0
        while start < nodes.count {
            let remaining = nodes.count - start
            let rows = [256, 64, 16, 4, 1].first { $0 <= min(remaining, largest) } ?? 1
            var values: [StoredValue] = []
            values.reserveCapacity(rows * perRow)
            var tuples: [String] = []
            for index in start..<(start + rows) {
                values += [.integer(primaryKeys[index]), .integer(mapping.number), .integer(1)]
                values += columnValues(of: nodes[index], mapping: mapping, permanent: permanent)
                let first = (index - start) * perRow
                tuples.append("(" + (1...perRow).map { dialect.placeholder(first + $0) }.joined(separator: ", ") + ")")
            }
            result.append((Statement(sql: statements.insertPrefix + tuples.joined(separator: ", "), values: values),
                           nodes[start..<(start + rows)]))
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

    /// The join-table rows a save writes: for each inserted or updated object
    /// whose many-to-many relationship the context loaded, its rows replaced
    /// by the members it has now (on the side that names the table); for each
    /// deleted object, its rows in every join table it can be in.
    ///
    /// Ordered many-to-many relationships (`Z_FOK_` ranks) are the SQLite
    /// store's only; ``unsupportedFeatures`` names them.
    public func relationshipStatements(for request: SaveChangesRequest, permanent: (ObjectID) -> ObjectID) -> [Statement] {
        guard !schema.joinTables.isEmpty else { return [] }
        let one = dialect.placeholder(1)
        let memberList = keyList(parameter: 2)
        var statements: [Statement] = []
        for node in request.insertedObjects + request.updatedObjects where node.objectID.entity.hasRelationships {
            guard let owner = permanent(node.objectID).primaryKey else { continue }
            for case let relationship as RelationshipDescription in node.objectID.entity.slotProperties where relationship.isToMany {
                guard case .objects(let ids) = node.values[relationship.index],
                      let path = schema.joinPath(for: relationship), path.isPrimary else { continue }
                var seen = Set<Int64>()
                let members = ids.compactMap { permanent($0).primaryKey }.filter { seen.insert($0).inserted }
                let table = path.table.name
                statements.append(Statement(sql: "DELETE FROM \(table) WHERE \(path.sourceColumn) = \(one)", values: [.integer(owner)]))
                guard !members.isEmpty else { continue }
                statements.append(Statement(
                    sql: "INSERT INTO \(table) (\(path.sourceColumn), \(path.destinationColumn)) SELECT \(one), m FROM (\(memberList)) AS members(m)",
                    values: [.integer(owner), keyArray(members)]))
            }
        }
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

    /// What of the model this layout's statements do not keep, for a store
    /// to refuse at open rather than lose: ordered relationships' ranks.
    public var unsupportedFeatures: [String] {
        schema.mappings.values.map(\.entity).sorted { $0.name < $1.name }.flatMap { entity in
            entity.properties.compactMap { property -> String? in
                guard let relationship = property as? RelationshipDescription, relationship.isOrdered, !relationship.isTransient else { return nil }
                return "\(entity.name).\(relationship.name) is an ordered relationship"
            }
        }
    }

    /// A row's column values in the entity statement's order: each written
    /// slot, then the entity columns of to-ones whose destination has subentities.
    private func columnValues(of node: IncrementalStoreNode, mapping: SQLiteSchema.EntityMapping,
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
