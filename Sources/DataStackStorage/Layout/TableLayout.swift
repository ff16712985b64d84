import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// How a model maps onto Core Data's SQLite layout: entity numbers (`Z_ENT`),
/// one table per root entity, a column per persistent attribute and to-one
/// (plus `Z<n>_<REL>` for a destination with subentities and `Z_FOK_<REL>` for
/// the rank in an ordered inverse), and a join table `Z_<n><REL>` per
/// many-to-many relationship (TableLayout+Relationships.swift).
///
/// For a new store the mapping follows Core Data's rules; for an existing one
/// entity numbers come from its `Z_PRIMARYKEY` table and every column is
/// checked against the real schema, because Core Data renumbers entities
/// between model versions and suffixes clashing column names.
package struct TableLayout: Sendable {
    /// One entity's place in the file.
    /// A class, so that looking one up on the save and fetch paths is one
    /// retain rather than a copy of every field.
    package final class EntityMapping: Sendable {
        package let entity: EntityDescription
        /// `Z_ENT` of the entity.
        package let number: Int64
        /// `Z_ENT` of the root entity, whose `Z_PRIMARYKEY` row hands out primary keys.
        package let rootNumber: Int64
        /// The root entity's table.
        package let table: String
        /// The column of each slot; nil for transient and to-many properties.
        package let columns: [Column?]
        /// `Z_ENT` of the entity and its subentities.
        package let numbersWithDescendants: [Int64]
        /// For each slot, the position of its column in a full-row select (see
        /// ``TableLayout/selectColumns(of:)``); -1 when the slot has no column.
        let slotPositions: [Int32]
        /// For each slot, the position of a to-one's entity column; -1 when none.
        let entityPositions: [Int32]
        /// The entity's INSERT, UPDATE and DELETE, built once per store.
        package let statements: EntityStatements
        /// How a full-row select of the entity is decoded, built once per store.
        package let rowLayout: RowLayout
        /// The slots whose columns use external binary storage (ExternalBinaryStorage.swift), in slot order.
        package let externalSlots: [Int]

        /// - Parameter positions: each column's position in a full-row select of the table.
        init(entity: EntityDescription, number: Int64, rootNumber: Int64, table: String, columns: [Column?],
             numbersWithDescendants: [Int64], positions: [String: Int32], dialect: any SQLDialect) {
            self.entity = entity
            self.number = number
            self.rootNumber = rootNumber
            self.table = table
            self.columns = columns
            self.numbersWithDescendants = numbersWithDescendants
            let slotPositions = columns.map { $0.flatMap { positions[$0.name] } ?? -1 }
            let entityPositions = columns.map { column -> Int32 in
                guard case .toOne(let entityColumn?)? = column?.kind else { return -1 }
                return positions[entityColumn] ?? -1
            }
            self.slotPositions = slotPositions
            self.entityPositions = entityPositions
            let properties = entity.slotProperties
            // External binary storage is a file beside the store, where the dialect keeps one.
            let externalSlots = !dialect.storesExternalBinaryData ? [] : columns.indices.filter { slot in
                columns[slot] != nil && (properties[slot] as? AttributeDescription)?.storesExternalBinaryData == true
            }
            self.externalSlots = externalSlots
            statements = EntityStatements(table: table, columns: columns, entityNumber: number, externalSlots: Set(externalSlots), dialect: dialect)
            rowLayout = RowLayout(entity: entity, columns: columns, slotPositions: slotPositions, entityPositions: entityPositions,
                                  externalSlots: Set(externalSlots))
        }
    }

    /// A property's column(s).
    package struct Column: Sendable, Hashable {
        package enum Kind: Sendable, Hashable {
            case attribute(AttributeType)
            /// A foreign key (`Z<REL>`), plus the destination's `Z_ENT` column when it has subentities.
            case toOne(entityColumn: String?)
        }
        package let name: String
        package let kind: Kind
    }

    /// A root entity's table and all the columns its hierarchy uses.
    package struct Table: Sendable {
        package let name: String
        let root: EntityDescription
        package var columns: [(name: String, declaredType: String)]
        let holdsSeveralEntities: Bool
    }

    /// The SQL the statements are written in: SQLite's for the SQLite store,
    /// another store's when ``StoreLayout`` lays the same model out there.
    package private(set) var dialect: any SQLDialect = SQLiteDialect()
    package private(set) var mappings: [ObjectIdentifier: EntityMapping] = [:]
    /// Whether any entity has an attribute with external binary storage: saves then track files.
    package private(set) var usesExternalStorage = false
    package private(set) var entitiesByNumber: [Int64: EntityDescription] = [:]
    /// The entity tables, one per root entity (join tables are in ``joinTables``).
    private(set) var tables: [Table] = []
    /// The many-to-many join tables (and those of to-manys without an inverse).
    /// See TableLayout+Relationships.swift.
    package var joinTables: [JoinTable] = []
    /// Each join-table relationship's view of its table, by relationship.
    var joinSides: [ObjectIdentifier: JoinSide] = [:]
    /// The full-text index of each entity table that has one, by table (TableLayout+Search.swift).
    package private(set) var searchIndexes: [String: SearchIndexLayout] = [:]
    /// Full-text indexes the file lacks or has in another layout, by index
    /// name, with why: searches through them throw. Set by the store after
    /// looking at the file (SQLiteStore+Search.swift); empty once it is in step.
    package var unavailableSearchIndexes: [String: String] = [:]
    /// `Z_FOK_<INVERSE>` of each to-one whose inverse is an ordered to-many, by the
    /// to-one relationship: the sort key of the row in its owner's ordered relationship.
    private(set) var orderColumns: [ObjectIdentifier: String] = [:]

    /// The mapping of an entity of the model.
    package func mapping(for entity: EntityDescription) throws -> EntityMapping {
        guard let mapping = mappings[ObjectIdentifier(entity)] else {
            throw ObjectGraphError.noStore(entity: entity.name)
        }
        return mapping
    }

    /// Core Data's numbering: depth first over the inheritance trees, siblings
    /// (and roots) sorted by name without regard to case, from 1.
    package static func coreDataNumbers(for entities: [EntityDescription]) -> [String: Int64] {
        var numbers: [String: Int64] = [:]
        var next: Int64 = 1
        func visit(_ entity: EntityDescription) {
            numbers[entity.name] = next
            next += 1
            for child in entity.subentities.sorted(by: Self.caseInsensitiveOrder) { visit(child) }
        }
        for root in entities.filter({ $0.superentity == nil }).sorted(by: Self.caseInsensitiveOrder) { visit(root) }
        return numbers
    }

    private static func caseInsensitiveOrder(_ a: EntityDescription, _ b: EntityDescription) -> Bool {
        a.name.lowercased() < b.name.lowercased()
    }

    /// Maps `entities` with the given entity numbers.
    ///
    /// - Parameter existingColumns: the real columns per table, for an existing store;
    ///   a missing table or column throws ``PersistentStoreError/Code/incompatibleModel``.
    package init(entities: [EntityDescription], numbers: [String: Int64], existingColumns: [String: Set<String>]?, url: URL?,
         dialect: any SQLDialect = SQLiteDialect()) throws {
        self.dialect = dialect
        var problems = entities.filter { numbers[$0.name] == nil }.map { "entity \($0.name) has no row in Z_PRIMARYKEY" }
        if !problems.isEmpty { throw Self.incompatible(problems, url: url) }
        for root in entities.filter({ $0.superentity == nil }).sorted(by: Self.caseInsensitiveOrder) {
            problems += mapTable(of: root, numbers: numbers, existingColumns: existingColumns)
        }
        problems += mapJoinTables(entities: entities, numbers: numbers, existingColumns: existingColumns)
        usesExternalStorage = mappings.values.contains { !$0.externalSlots.isEmpty }
        searchIndexes = Self.searchIndexes(tables: tables, mappings: mappings)
        if !problems.isEmpty { throw Self.incompatible(problems, url: url) }
    }

    /// Lays out the table of a root entity and maps every entity of its
    /// hierarchy onto it; returns what an existing store's table lacks.
    private mutating func mapTable(of root: EntityDescription, numbers: [String: Int64],
                                   existingColumns: [String: Set<String>]?) -> [String] {
        let tableName = "Z" + root.name.uppercased()
        let realColumns = existingColumns?[tableName]
        if existingColumns != nil && realColumns == nil {
            return ["the store has no table \(tableName) for entity \(root.name)"]
        }
        let hierarchy = Self.depthFirst(root)
        var columns = TableColumns(table: tableName, realColumns: realColumns, numbers: numbers)
        for entity in hierarchy {
            for property in entity.properties where !property.isTransient { columns.add(property, of: entity) }
        }
        orderColumns.merge(columns.orderColumns) { _, new in new }
        let table = Table(name: tableName, root: root, columns: columns.inCoreDataOrder, holdsSeveralEntities: hierarchy.count > 1)
        tables.append(table)
        mapEntities(hierarchy, onto: table, columnByProperty: columns.columnByProperty, numbers: numbers)
        return columns.problems
    }

    /// Maps each entity of a hierarchy onto its root's table: the column of
    /// each slot and its position in a full-row select.
    private mutating func mapEntities(_ hierarchy: [EntityDescription], onto table: Table,
                                      columnByProperty: [ObjectIdentifier: Column], numbers: [String: Int64]) {
        // Positions in `SELECT Z_PK, Z_ENT, Z_OPT, <table columns>`.
        var positions: [String: Int32] = [:]
        for (offset, column) in table.columns.enumerated() { positions[column.name] = Int32(offset + 3) }
        let rootNumber = numbers[table.root.name] ?? 0
        for entity in hierarchy {
            let columns = entity.slotProperties.map { columnByProperty[ObjectIdentifier($0)] }
            let number = numbers[entity.name] ?? 0
            let mapping = EntityMapping(
                entity: entity, number: number, rootNumber: rootNumber, table: table.name, columns: columns,
                numbersWithDescendants: entity.selfAndDescendants.compactMap { numbers[$0.name] }, positions: positions,
                dialect: dialect)
            mappings[ObjectIdentifier(entity)] = mapping
            entitiesByNumber[number] = entity
        }
    }

    package static func incompatible(_ problems: [String], url: URL?) -> PersistentStoreError {
        PersistentStoreError(.incompatibleModel, url: url,
                             message: "the store does not match the model: " + problems.joined(separator: "; "))
    }

    static func depthFirst(_ entity: EntityDescription) -> [EntityDescription] {
        [entity] + entity.subentities.sorted(by: caseInsensitiveOrder).flatMap(depthFirst)
    }

    static func declaredType(of type: AttributeType) -> String {
        switch type {
        case .integer16, .integer32, .integer64, .boolean: "INTEGER"
        case .date: "TIMESTAMP"
        case .double, .float: "FLOAT"
        case .decimal: "DECIMAL"
        case .string, .uri: "VARCHAR"
        case .binaryData, .uuid, .transformable: "BLOB"
        }
    }

    /// Core Data's column groups: integers and keys, dates, numbers, strings, blobs.
    private static func group(of type: AttributeType) -> Int {
        switch type {
        case .integer16, .integer32, .integer64, .boolean: 0
        case .date: 1
        case .double, .float, .decimal: 2
        case .string, .uri: 3
        case .binaryData, .uuid, .transformable: 4
        }
    }

    /// The table of an entity, with every column its hierarchy uses.
    package func table(named name: String) -> Table? {
        tables.first { $0.name == name }
    }

    /// `Z_PK, Z_ENT, Z_OPT` and every column of the table, qualified with `alias`:
    /// the select list whose positions `slotPositions` refer to.
    package func selectColumns(of table: Table, alias: String) -> String {
        (["Z_PK", "Z_ENT", "Z_OPT"] + table.columns.map(\.name)).map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    // MARK: - Creating a new file

    /// The statements that create the tables and indexes of a new store.
    package func creationStatements() -> [String] {
        var statements: [String] = []
        for table in tables {
            let key = dialect.keyType
            let columns = ["Z_PK \(key) PRIMARY KEY", "Z_ENT \(key)", "Z_OPT \(key)"]
                + table.columns.map { "\($0.name) \(dialect.columnType(declared: $0.declaredType))" }
            statements.append("CREATE TABLE \(table.name) ( \(columns.joined(separator: ", ")) )")
            if table.holdsSeveralEntities {
                statements.append("CREATE INDEX \(table.name)_Z_ENT_INDEX ON \(table.name) (Z_ENT)")
            }
        }
        for mapping in mappings.values.sorted(by: { $0.number < $1.number }) {
            let entity = mapping.entity
            for (index, column) in mapping.columns.enumerated() {
                guard let column, entity.slotProperties[index].entity === entity, case .toOne = column.kind else { continue }
                statements.append("CREATE INDEX \(mapping.table)_\(column.name)_INDEX ON \(mapping.table) (\(column.name))")
            }
        }
        statements += declaredIndexes().map { $0.creationStatement(dialect) }
        statements += joinTableCreationStatements()
        return statements
    }

    /// `Z_PRIMARYKEY` (each entity's number, name, parent and last primary
    /// key) and `Z_METADATA` (the metadata's property list), in Core Data's
    /// declarations as the dialect types them.
    package static func bookkeepingTableStatements(_ dialect: any SQLDialect) -> [String] {
        let key = dialect.keyType
        return ["CREATE TABLE Z_PRIMARYKEY (Z_ENT \(key) PRIMARY KEY, Z_NAME \(dialect.columnType(declared: "VARCHAR")), "
                    + "Z_SUPER \(key), Z_MAX \(key))",
                "CREATE TABLE Z_METADATA (Z_VERSION \(key) PRIMARY KEY, Z_UUID \(dialect.columnType(declared: "VARCHAR(255)")), "
                    + "Z_PLIST \(dialect.columnType(declared: "BLOB")))"]
    }

    /// The `Z_PRIMARYKEY` rows of a new store: every entity with its parent and a zero counter.
    package func primaryKeyRows() -> [(number: Int64, name: String, superNumber: Int64)] {
        mappings.values.map { mapping in
            (mapping.number, mapping.entity.name,
             mapping.entity.superentity.flatMap { mappings[ObjectIdentifier($0)]?.number } ?? 0)
        }.sorted { $0.number < $1.number }
    }
}

// MARK: - Laying out a table

extension TableLayout {
    /// The columns of one root entity's table, worked out property by property
    /// over its hierarchy: the names taken so far, since a clash gets a numeric
    /// suffix as Core Data gives it, and for an existing store what its table lacks.
    private struct TableColumns {
        let table: String
        /// The table's real columns in an existing store; nil for a new one.
        let realColumns: Set<String>?
        let numbers: [String: Int64]
        private var used: Set<String> = ["Z_PK", "Z_ENT", "Z_OPT"]
        private var columns: [(name: String, declaredType: String, group: Int)] = []
        private(set) var columnByProperty: [ObjectIdentifier: Column] = [:]
        /// `Z_FOK_<INVERSE>` by to-one relationship (``TableLayout/orderColumns``).
        private(set) var orderColumns: [ObjectIdentifier: String] = [:]
        /// The columns an existing store's table lacks, as messages.
        private(set) var problems: [String] = []

        init(table: String, realColumns: Set<String>?, numbers: [String: Int64]) {
            self.table = table
            self.realColumns = realColumns
            self.numbers = numbers
        }

        /// The columns in Core Data's order for new files: grouped by storage class.
        var inCoreDataOrder: [(name: String, declaredType: String)] {
            columns.enumerated().sorted { ($0.element.group, $0.offset) < ($1.element.group, $1.offset) }
                .map { ($0.element.name, $0.element.declaredType) }
        }

        /// Adds the column(s) of a persistent property of `entity`, if it has any in this table.
        mutating func add(_ property: PropertyDescription, of entity: EntityDescription) {
            guard let kind = kind(of: property) else { return }
            // A clash inside one table gets a numeric suffix, as Core Data gives it (`ZNAME1`).
            let name = String.firstFree("Z" + property.name.uppercased(), among: used)
            if let realColumns, !realColumns.contains(name) {
                problems.append("\(entity.name).\(property.name) has no column \(name) in \(table)")
                return
            }
            columnByProperty[ObjectIdentifier(property)] = Column(name: name, kind: kind)
            switch kind {
            case .attribute(let type):
                append(name, declaredType: TableLayout.declaredType(of: type), group: TableLayout.group(of: type))
            case .toOne(let entityColumn):
                append(name, declaredType: "INTEGER", group: 0)
                if let entityColumn {
                    if let realColumns, !realColumns.contains(entityColumn) {
                        problems.append("\(entity.name).\(property.name) has no column \(entityColumn) in \(table)")
                    }
                    append(entityColumn, declaredType: "INTEGER", group: 0)
                }
                if let relationship = property as? RelationshipDescription { addOrderColumn(for: relationship) }
            }
        }

        /// What a property keeps in the table; nil for a to-many, which keeps nothing there.
        private func kind(of property: PropertyDescription) -> Column.Kind? {
            switch property {
            case let attribute as AttributeDescription:
                return .attribute(attribute.type)
            case let relationship as RelationshipDescription where !relationship.isToMany:
                // A destination with subentities: `Z<n>_<REL>` says which entity the key is of.
                guard let destination = relationship.destinationEntity, !destination.subentities.isEmpty,
                      let number = numbers[destination.name] else { return .toOne(entityColumn: nil) }
                return .toOne(entityColumn: "Z\(number)_\(property.name.uppercased())")
            default:
                return nil
            }
        }

        /// The inverse is an ordered to-many: this row's place in it (Core Data's
        /// `Z_FOK_<INVERSE>`). A file without it still opens; its order is then the key order.
        private mutating func addOrderColumn(for relationship: RelationshipDescription) {
            guard let inverse = relationship.inverseRelationship, inverse.isToMany, inverse.isOrdered else { return }
            let orderColumn = "Z_FOK_" + relationship.name.uppercased()
            guard !used.contains(orderColumn), realColumns?.contains(orderColumn) ?? true else { return }
            append(orderColumn, declaredType: "INTEGER", group: 0)
            orderColumns[ObjectIdentifier(relationship)] = orderColumn
        }

        private mutating func append(_ name: String, declaredType: String, group: Int) {
            used.insert(name)
            columns.append((name, declaredType, group))
        }
    }
}

extension String {
    /// `base`, or `base` with the first number from 1 that no name in `taken`
    /// has: Core Data's rule for a column whose name another property took
    /// (`ZNAME1`), and ours for an inverse the schema infers.
    package static func firstFree(_ base: String, among taken: Set<String>) -> String {
        var name = base
        var suffix = 1
        while taken.contains(name) {
            name = base + String(suffix)
            suffix += 1
        }
        return name
    }
}
