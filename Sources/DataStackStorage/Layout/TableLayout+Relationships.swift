import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Join tables: many-to-many relationships in Core Data's layout
//
// A many-to-many relationship pair lives in one join table, as Core Data keeps it:
//
//     Author(Z_ENT 1).books <<->> Book(Z_ENT 2).authors
//     CREATE TABLE Z_1BOOKS ( Z_1AUTHORS INTEGER, Z_2BOOKS INTEGER, PRIMARY KEY (Z_1AUTHORS, Z_2BOOKS) )
//     CREATE INDEX Z_1BOOKS_Z_2BOOKS_INDEX ON Z_1BOOKS (Z_2BOOKS, Z_1AUTHORS)
//
// - The table is `Z_<n><REL>`, named from the side whose entity has the lower
//   `Z_ENT` (n = that entity's number, REL = its relationship): here the "primary"
//   relationship, `books`.
// - A column `Z_<n><REL>` holds primary keys of entity n, REL being the relationship
//   whose (declared) destination is n: `Z_2BOOKS` holds books, `Z_1AUTHORS` authors.
//   The first column holds the primary relationship's owners, the second its
//   destinations; the index is on (second, first).
// - An ordered side adds `Z_FOK_<its destination column without Z_>`: the rank of the
//   destination in the owner's ordered relationship (`Z_FOK_2BOOKS` for ordered `books`).
//
// Where Core Data is unclear, and what is done here:
// - A reflexive relationship (both sides on one entity) has two candidate names and
//   the fixtures show no rule (kik: `Z_6BANSINVERSE` and `Z_6ADMINSINVERSE` but
//   `Z_6MEMBERS`; DuckDuckGo: `Z_1FAVORITES` for favorites/favoriteFolders). For an
//   existing file the candidate that exists in the file is used. A new file takes
//   the relationship whose upper-cased name sorts last (this matches three of the four
//   reflexive tables in the fixtures).
// - A to-many without an inverse: no example of its layout was found. It is stored in
//   a join table `Z_<n><REL>` (n = the declaring entity) whose destination column is
//   `Z_<m><REL>` (m = the destination) and whose owner column is `Z_<n>INVERSE_<REL>`.
//   An existing file may name the owner column otherwise: a two-column table with the
//   expected name and destination column is accepted whatever its other column is called.
extension TableLayout {
    /// One join table.
    package struct JoinTable: Sendable {
        package let name: String
        /// The relationship the table is named after. Its side writes the rows at save.
        let relationship: RelationshipDescription
        /// The other side, if the relationship has an inverse.
        let inverse: RelationshipDescription?
        /// The first column: owners of `relationship` (destinations of `inverse`).
        package let ownerColumn: String
        /// The second column: destinations of `relationship`.
        package let memberColumn: String
        /// `Z_FOK_<member column>`: the rank of a destination in an ordered `relationship`.
        let memberOrderColumn: String?
        /// `Z_FOK_<owner column>`: the rank of an owner in an ordered `inverse`.
        let ownerOrderColumn: String?
        /// The entity tables the two columns point into.
        package let ownerTable: String
        package let memberTable: String
    }

    /// Which side of a join table a relationship is.
    package struct JoinSide: Sendable {
        /// Position in ``TableLayout/joinTables``.
        let tableIndex: Int
        /// Whether the relationship is the table's ``JoinTable/relationship``.
        let isPrimary: Bool
    }

    /// A relationship's path through its join table.
    package struct JoinPath {
        package let table: JoinTable
        /// Whether the relationship is the one that names the table (and writes its rows).
        package let isPrimary: Bool
        /// The column holding the relationship's owner.
        package var sourceColumn: String { isPrimary ? table.ownerColumn : table.memberColumn }
        /// The column holding the relationship's destinations.
        package var destinationColumn: String { isPrimary ? table.memberColumn : table.ownerColumn }
        /// The column holding a destination's rank in the owner's ordered relationship.
        package var orderColumn: String? { isPrimary ? table.memberOrderColumn : table.ownerOrderColumn }
        /// The entity table of the destinations.
        var destinationTable: String { isPrimary ? table.memberTable : table.ownerTable }
    }

    /// The join table of a many-to-many relationship (or a to-many without inverse), if it has one.
    package func joinPath(for relationship: RelationshipDescription) -> JoinPath? {
        guard let side = joinSides[ObjectIdentifier(relationship)] else { return nil }
        return JoinPath(table: joinTables[side.tableIndex], isPrimary: side.isPrimary)
    }

    /// `Z_FOK_<INVERSE>`, the rank column of an ordered to-many kept by its inverse's foreign key.
    package func orderColumn(forOrdered relationship: RelationshipDescription) -> String? {
        guard relationship.isToMany, relationship.isOrdered, let inverse = relationship.inverseRelationship,
              !inverse.isToMany else { return nil }
        return orderColumns[ObjectIdentifier(inverse)]
    }

    /// Whether a relationship is stored in a join table: a to-many whose inverse is
    /// to-many too, or a to-many without an inverse.
    package static func usesJoinTable(_ relationship: RelationshipDescription) -> Bool {
        guard relationship.isToMany, !relationship.isTransient else { return false }
        return relationship.inverseRelationship?.isToMany ?? true
    }

    /// The relationship of a pair that names the join table, in the order to try:
    /// the side on the entity with the lower `Z_ENT`, or for equal numbers both
    /// sides, the preferred (upper-cased name sorting last) first.
    package static func joinTableCandidates(for relationship: RelationshipDescription, numbers: [String: Int64]) -> [RelationshipDescription] {
        guard let inverse = relationship.inverseRelationship,
              let own = relationship.entity.flatMap({ numbers[$0.name] }),
              let other = inverse.entity.flatMap({ numbers[$0.name] }) else { return [relationship] }
        if own != other { return [own < other ? relationship : inverse] }
        if relationship === inverse { return [relationship] }
        return [relationship, inverse].sorted { $0.name.uppercased() > $1.name.uppercased() }
    }

    /// Maps the join tables; for an existing file checks them against its tables.
    /// Returns the problems found.
    mutating func mapJoinTables(entities: [EntityDescription], numbers: [String: Int64],
                                existingColumns: [String: Set<String>]?) -> [String] {
        var problems: [String] = []
        var existing: [String: (name: String, columns: Set<String>)] = [:]
        for (table, columns) in existingColumns ?? [:] {
            existing[table.uppercased()] = (table, Set(columns.map { $0.uppercased() }))
        }
        let tableOfEntity = Dictionary(uniqueKeysWithValues: mappings.values.map { (ObjectIdentifier($0.entity), $0.table) })
        var done = Set<ObjectIdentifier>()
        let ordered = entities.sorted { (numbers[$0.name] ?? 0) < (numbers[$1.name] ?? 0) }
        for entity in ordered {
            for case let relationship as RelationshipDescription in entity.properties where Self.usesJoinTable(relationship) {
                guard !done.contains(ObjectIdentifier(relationship)) else { continue }
                done.insert(ObjectIdentifier(relationship))
                if let inverse = relationship.inverseRelationship { done.insert(ObjectIdentifier(inverse)) }
                let candidates = Self.joinTableCandidates(for: relationship, numbers: numbers)
                var chosen: (primary: RelationshipDescription, table: JoinTable)?
                for primary in candidates {
                    guard let table = Self.joinTable(named: primary, numbers: numbers, tables: tableOfEntity) else { continue }
                    if existingColumns == nil { chosen = (primary, table); break }
                    guard let real = existing[table.name.uppercased()] else { continue }
                    if let matched = Self.match(table, to: real) { chosen = (primary, matched); break }
                }
                guard let chosen else {
                    let names = candidates.compactMap { Self.joinTable(named: $0, numbers: numbers, tables: tableOfEntity)?.name }
                    if !names.isEmpty {
                        problems.append("\(entity.name).\(relationship.name) has no join table \(names.joined(separator: " or "))")
                    }
                    continue
                }
                let index = joinTables.count
                joinTables.append(chosen.table)
                joinSides[ObjectIdentifier(chosen.primary)] = JoinSide(tableIndex: index, isPrimary: true)
                if let inverse = chosen.primary.inverseRelationship, inverse !== chosen.primary {
                    joinSides[ObjectIdentifier(inverse)] = JoinSide(tableIndex: index, isPrimary: false)
                }
            }
        }
        return problems
    }

    /// The table a relationship names, as a new file would have it.
    private static func joinTable(named primary: RelationshipDescription, numbers: [String: Int64],
                                  tables: [ObjectIdentifier: String]) -> JoinTable? {
        guard let owner = primary.entity, let ownNumber = numbers[owner.name],
              let destination = primary.destinationEntity, let destinationNumber = numbers[destination.name],
              let memberTable = tables[ObjectIdentifier(destination)] else { return nil }
        let inverse = primary.inverseRelationship
        let memberColumn = "Z_\(destinationNumber)\(primary.name.uppercased())"
        var ownerColumn: String
        let ownerTable: String
        if let inverse, let inverseDestination = inverse.destinationEntity, let number = numbers[inverseDestination.name],
           let table = tables[ObjectIdentifier(inverseDestination)] {
            ownerColumn = "Z_\(number)\(inverse.name.uppercased())"
            ownerTable = table
        } else {
            guard let table = tables[ObjectIdentifier(owner)] else { return nil }
            ownerColumn = "Z_\(ownNumber)INVERSE_\(primary.name.uppercased())"
            ownerTable = table
        }
        // A relationship that is its own inverse would name both columns alike.
        if ownerColumn == memberColumn { ownerColumn += "1" }
        return JoinTable(
            name: "Z_\(ownNumber)\(primary.name.uppercased())", relationship: primary, inverse: inverse,
            ownerColumn: ownerColumn, memberColumn: memberColumn,
            memberOrderColumn: primary.isOrdered ? "Z_FOK_" + memberColumn.dropFirst(2) : nil,
            ownerOrderColumn: inverse?.isOrdered == true && inverse !== primary ? "Z_FOK_" + ownerColumn.dropFirst(2) : nil,
            ownerTable: ownerTable, memberTable: memberTable)
    }

    /// The expected table with the names the file really uses, or nil if it does not fit.
    private static func match(_ table: JoinTable, to real: (name: String, columns: Set<String>)) -> JoinTable? {
        guard real.columns.contains(table.memberColumn.uppercased()) else { return nil }
        var ownerColumn = table.ownerColumn
        if !real.columns.contains(ownerColumn.uppercased()) {
            // A to-many without inverse: accept the file's one other key column.
            let others = real.columns.filter { !$0.hasPrefix("Z_FOK_") && $0 != table.memberColumn.uppercased() }
            guard table.inverse == nil, others.count == 1, let other = others.first else { return nil }
            ownerColumn = other
        }
        let memberOrder = table.memberOrderColumn.flatMap { real.columns.contains($0.uppercased()) ? $0 : nil }
        let ownerOrder = table.ownerOrderColumn.flatMap { real.columns.contains($0.uppercased()) ? $0 : nil }
        return JoinTable(name: real.name, relationship: table.relationship, inverse: table.inverse,
                         ownerColumn: ownerColumn, memberColumn: table.memberColumn,
                         memberOrderColumn: memberOrder, ownerOrderColumn: ownerOrder,
                         ownerTable: table.ownerTable, memberTable: table.memberTable)
    }

    /// The `Z_PK, Z_ENT` of a row of `entity` (or a subentity) whose `keys`
    /// hold the values of parameters 1, 2…: the lookup of a uniqueness constraint.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` for a key without a column.
    package func rowLookupSQL(_ entity: EntityDescription, keys: [String]) throws -> String {
        let mapping = try mapping(for: entity)
        var conditions: [String] = []
        for (position, key) in keys.enumerated() {
            let property = try entity.property(forKey: key)
            guard let column = mapping.columns[property.index] else { throw ObjectGraphError.unknownKey(key, entity: entity.name) }
            conditions.append("\(column.name) = \(dialect.placeholder(position + 1))")
        }
        var sql = "SELECT Z_PK, Z_ENT FROM \(mapping.table) WHERE " + conditions.joined(separator: " AND ")
        if let table = table(named: mapping.table), table.holdsSeveralEntities {
            sql += " AND Z_ENT IN (\(mapping.numbersWithDescendants.map(String.init).joined(separator: ",")))"
        }
        return sql + " LIMIT 1"
    }

    /// The join-table columns that can hold a row of `entity` (as an owner or a
    /// member): the rows to delete with it.
    package func joinColumns(holding entity: EntityDescription) -> [(table: String, column: String)] {
        joinTables.flatMap { table -> [(table: String, column: String)] in
            var columns: [(table: String, column: String)] = []
            if let owner = table.inverse?.destinationEntity ?? table.relationship.entity, entity.isKind(of: owner) {
                columns.append((table.name, table.ownerColumn))
            }
            if let member = table.relationship.destinationEntity, entity.isKind(of: member) {
                columns.append((table.name, table.memberColumn))
            }
            return columns
        }
    }

    /// The select of a to-many relationship's destinations for the owners
    /// listed by `owners` (an SQL list: `?,?,?`, or a subquery): `columns` of
    /// each destination row (alias `t0`), then its owner's key; by owner, then
    /// in the relationship's order (`Z_FOK_` or the join table's for an ordered
    /// one, else by key). Nil for a relationship kept in neither place.
    package func toManySelect(_ relationship: RelationshipDescription, columns: String, ownersIn owners: String) -> String? {
        guard let destination = relationship.destinationEntity, let mapping = mappings[ObjectIdentifier(destination)],
              let table = table(named: mapping.table) else { return nil }
        if let path = joinPath(for: relationship) {
            let order = (path.orderColumn.map { dialect.nullsFirst("j.\($0)") + ", " } ?? "") + "j.\(path.destinationColumn)"
            return "SELECT \(columns), j.\(path.sourceColumn) FROM \(path.table.name) j JOIN \(table.name) t0"
                + " ON t0.Z_PK = j.\(path.destinationColumn) WHERE j.\(path.sourceColumn) IN (\(owners))"
                + " ORDER BY j.\(path.sourceColumn), \(order)"
        }
        guard let inverse = relationship.inverseRelationship, !inverse.isToMany,
              let foreignKey = mapping.columns[inverse.index]?.name else { return nil }
        var sql = "SELECT \(columns), t0.\(foreignKey) FROM \(table.name) t0 WHERE t0.\(foreignKey) IN (\(owners))"
        if table.holdsSeveralEntities {
            sql += " AND t0.Z_ENT IN (\(mapping.numbersWithDescendants.map(String.init).joined(separator: ",")))"
        }
        let order = orderColumn(forOrdered: relationship).map { dialect.nullsFirst("t0.\($0)") + ", " } ?? ""
        return sql + " ORDER BY t0.\(foreignKey), \(order)t0.Z_PK"
    }

    /// `CREATE TABLE` and `CREATE INDEX` for the join tables of a new file.
    func joinTableCreationStatements() -> [String] {
        joinTables.flatMap { table -> [String] in
            let columns = [table.ownerColumn, table.memberColumn] + [table.memberOrderColumn, table.ownerOrderColumn].compactMap { $0 }
            return [
                "CREATE TABLE \(table.name) ( " + columns.map { "\($0) \(dialect.keyType)" }.joined(separator: ", ")
                    + ", PRIMARY KEY (\(table.ownerColumn), \(table.memberColumn)) )",
                "CREATE INDEX \(table.name)_\(table.memberColumn)_INDEX ON \(table.name) (\(table.memberColumn), \(table.ownerColumn))",
            ]
        }
    }
}
