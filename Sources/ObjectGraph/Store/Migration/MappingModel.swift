import Foundation

/// How the rows of an existing store become rows of the current model: Core
/// Data's inferred mapping model (`NSMappingModel.inferredMappingModel(forSourceModel:destinationModel:)`),
/// inferred here from the store's own schema (``StoreSchemaSnapshot``) rather
/// than from the source model, which is usually not at hand.
///
/// What it infers:
/// - entities matched by name, or by the destination's `renamingIdentifier`
///   (the entity's name in the store, as in Core Data); entities of the model
///   that the store lacks are added (empty), entities the model lacks are
///   removed with their rows;
/// - properties matched by column (`Z` + the name, or + the
///   `renamingIdentifier`); new attributes are filled with their default value,
///   removed ones dropped; an attribute that became required gets its default
///   where the store has NULL;
/// - to-one relationships added (a NULL foreign key) or kept, with their rank
///   in an ordered inverse (`Z_FOK_…`); keys pointing at rows that no longer
///   exist are cleared;
/// - many-to-many join tables found under the store's entity numbers and
///   relationship names, and copied into the tables the new numbering names.
///
/// - an attribute whose type changed within one column type, for stores
///   written here (which record the model that wrote them): widened at once
///   (Integer 16 → 32 → 64, Boolean → an integer, Float → Double, URI →
///   String, UUID → Binary Data); an integer narrowed only when every stored
///   value fits the new type (one count over the column).
///
/// What it refuses, before anything is written, naming the entity and the
/// property: a column whose SQLite type differs from the attribute's type, a
/// type change within one column type other than those above, an integer
/// narrowed below a stored value, a to-one that became to-many, a required
/// attribute or relationship without a default over rows that have no value,
/// and entities that move between inheritance hierarchies.
struct MappingModel {
    /// Where one destination table's rows come from.
    struct TableMapping {
        /// The destination table.
        let table: SQLiteSchema.Table
        /// The source table (as the file spells it), or nil for a table that starts empty.
        let sourceTable: String?
        /// `Z_MAX` of the source root: at least the number of its rows, and
        /// known without reading them, so progress is weighed by it.
        let sourceMaxPrimaryKey: Int64
        /// Source `Z_ENT` → destination `Z_ENT`, for the entities whose rows are copied.
        fileprivate(set) var entityNumbers: [(source: Int64, destination: Int64)] = []
        /// Destination column ← source column.
        fileprivate(set) var columns: [(destination: String, source: String)] = []
        /// Values written where a column is NULL, for rows of some entities.
        fileprivate(set) var fills: [Fill] = []
        /// The table's to-one foreign keys, cleaned after copying.
        fileprivate(set) var toOnes: [ToOne] = []
    }

    /// A default value written into NULL cells of a column.
    struct Fill {
        let column: String
        let value: PropertyValue
        /// Destination `Z_ENT` of the rows to fill.
        let entityNumbers: [Int64]
    }

    /// A to-one foreign key of a destination table.
    struct ToOne {
        let column: String
        /// The column holding the destination row's `Z_ENT`, when the destination has subentities.
        let entityColumn: String?
        let destinationTable: String
        let destinationNumbers: [Int64]
        /// Whether values were copied from the store (else the column is new and NULL).
        let isCopied: Bool
    }

    /// Where one destination join table's rows come from.
    struct JoinMapping {
        /// The destination join table.
        let table: SQLiteSchema.JoinTable
        /// The source join table, as the file spells it.
        let sourceTable: String
        /// Destination column ← source column.
        let columns: [(destination: String, source: String)]
    }

    /// The destination's layout.
    let schema: SQLiteSchema
    /// The destination's entity numbers.
    let numbers: [String: Int64]
    /// One entry per destination table.
    private(set) var tables: [TableMapping] = []
    /// One entry per destination join table that has rows to copy.
    private(set) var joins: [JoinMapping] = []

    /// Infers the mapping from a store's schema to `entities`.
    ///
    /// - Parameters:
    ///   - requiresValues: whether a required attribute or relationship that
    ///     existing rows would have no value for (and no default) is refused.
    ///     A custom stage of a staged migration passes false: its `didMigrate`
    ///     handler fills them, and the stage checks them afterwards.
    ///   - countRows: the number of rows of the given source entity numbers
    ///     in a source table, optionally only those where a column is NULL.
    ///   - countRowsOutside: the number of those rows whose value in a column
    ///     lies outside a range, to narrow an integer attribute; without it a
    ///     narrowing is refused.
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` listing every change
    ///   that cannot be inferred.
    init(from source: StoreSchemaSnapshot, to entities: [EntityDescription], url: URL?, dialect: SQLDialect, requiresValues: Bool = true,
         countRows: (_ table: String, _ entityNumbers: [Int64], _ nullColumn: String?) throws -> Int,
         countRowsOutside: ((_ table: String, _ entityNumbers: [Int64], _ column: String, _ range: ClosedRange<Int64>) throws -> Int)? = nil) throws {
        numbers = SQLiteSchema.coreDataNumbers(for: entities)
        schema = try SQLiteSchema(entities: entities, numbers: numbers, existingColumns: nil, url: url, dialect: dialect)
        var problems: [String] = []

        // Entities: renaming identifiers first, then names, each source entity used once.
        var sourceOf: [ObjectIdentifier: StoreSchemaSnapshot.Entity] = [:]
        var claimed = Set<Int64>()
        for entity in entities {
            if let old = entity.renamingIdentifier, old != entity.name, let match = source.entitiesByName[old] {
                sourceOf[ObjectIdentifier(entity)] = match
                claimed.insert(match.number)
            }
        }
        for entity in entities where sourceOf[ObjectIdentifier(entity)] == nil {
            if let match = source.entitiesByName[entity.name], !claimed.contains(match.number) {
                sourceOf[ObjectIdentifier(entity)] = match
                claimed.insert(match.number)
            }
        }

        var destinationTableOfSourceRoot: [Int64: String] = [:]
        for table in schema.tables {
            let hierarchy = table.root.selfAndDescendants
            // Every copied entity of a destination table must come from one source table.
            let sourceRoots = Set(hierarchy.compactMap { sourceOf[ObjectIdentifier($0)] }.filter { $0.table != nil }.map(\.rootNumber))
            if sourceRoots.count > 1 {
                let names = sourceRoots.sorted().compactMap { source.entities[$0]?.name }
                problems.append("the entities of \(table.root.name)'s hierarchy come from several hierarchies in the store (\(names.joined(separator: ", "))); moving entities between inheritance hierarchies cannot be inferred")
                continue
            }
            let sourceRoot = sourceRoots.first.flatMap { source.entities[$0] }
            if let sourceRoot {
                if let other = destinationTableOfSourceRoot[sourceRoot.number] {
                    problems.append("the entities of \(sourceRoot.name)'s hierarchy in the store are split between \(other) and \(table.name); moving entities between inheritance hierarchies cannot be inferred")
                    continue
                }
                destinationTableOfSourceRoot[sourceRoot.number] = table.name
            }
            let sourceTable = sourceRoot?.table
            let sourceColumns = sourceTable.flatMap { source.columns[$0] } ?? [:]

            func sourceEntity(_ entity: EntityDescription) -> StoreSchemaSnapshot.Entity? {
                guard let match = sourceOf[ObjectIdentifier(entity)], match.rootNumber == sourceRoot?.number else { return nil }
                return match
            }
            func sourceNumbers(ofKind entity: EntityDescription) -> [Int64] {
                entity.selfAndDescendants.compactMap { sourceEntity($0)?.number }
            }
            func destinationNumbers(ofKind entity: EntityDescription) -> [Int64] {
                entity.selfAndDescendants.compactMap { numbers[$0.name] }
            }
            func rows(ofKind entity: EntityDescription, nullIn column: String? = nil) throws -> Int {
                guard let sourceTable else { return 0 }
                return try countRows(sourceTable, sourceNumbers(ofKind: entity), column)
            }

            var mapping = TableMapping(
                table: table, sourceTable: sourceTable, sourceMaxPrimaryKey: sourceRoot?.maxPrimaryKey ?? 0)
            for entity in hierarchy {
                if let match = sourceEntity(entity), let number = numbers[entity.name] {
                    mapping.entityNumbers.append((match.number, number))
                }
            }

            var usedSourceColumns = Set<String>()
            for entity in hierarchy {
                let entityMapping = try schema.mapping(for: entity)
                for property in entity.properties where !property.isTransient {
                    let label = "\(entity.name).\(property.name)"
                    if let relationship = property as? RelationshipDescription, relationship.isToMany {
                        // A to-many has no column; a to-one's foreign key under its name means it was to-one.
                        let old = "Z" + (relationship.renamingIdentifier ?? relationship.name).uppercased()
                        if let column = sourceColumns[old], column.declaredType == dialect.keyType, !usedSourceColumns.contains(old),
                           try rows(ofKind: entity) > 0 {
                            problems.append("\(label) is to-many in the model but a to-one in the store (column \(column.name)); changing a to-one relationship to to-many cannot be inferred")
                        }
                        continue
                    }
                    guard property.index >= 0, let column = entityMapping.columns[property.index] else { continue }
                    let expectedType = dialect.columnType(declared: Self.declaredType(of: property))
                    var found = Self.sourceColumn(for: property, destination: column.name, in: sourceColumns, excluding: usedSourceColumns)
                    if let candidate = found, !Self.typesMatch(candidate.declaredType, expectedType) {
                        if property is RelationshipDescription {
                            // An attribute of the same name was replaced by a relationship: Core Data
                            // matches by kind, so the attribute is removed and the relationship added.
                            found = nil
                        } else {
                            problems.append("\(label) is \(Self.describe(property)) (\(expectedType)) in the model but the store's column \(candidate.name) is \(candidate.declaredType); changing an attribute's type cannot be inferred")
                            continue
                        }
                    }
                    let attribute = property as? AttributeDescription
                    let defaultValue = attribute.map(\.defaultValue) ?? .null
                    if let found {
                        usedSourceColumns.insert(found.name.uppercased())
                        if let attribute, let sourceName = sourceEntity(entity)?.name,
                           let before = [attribute.renamingIdentifier, attribute.name].compactMap({ $0 }).lazy.compactMap({
                               ManagedObjectModel.recordedType(of: $0, entity: sourceName, in: source.metadata)
                           }).first, before != attribute.type {
                            switch Self.typeChange(from: before, to: attribute.type) {
                            case .widening:
                                break
                            case .narrowing(let range):
                                guard let sourceTable, let countRowsOutside else {
                                    problems.append("\(label) was \(before.modelEditorName) in the store and is \(attribute.type.modelEditorName) in the model; narrowing it cannot be checked here")
                                    continue
                                }
                                let outside = try countRowsOutside(sourceTable, sourceNumbers(ofKind: entity), found.name, range)
                                if outside > 0 {
                                    problems.append("\(label) was \(before.modelEditorName) in the store and is \(attribute.type.modelEditorName) in the model, but \(outside) \(entity.name) row\(outside == 1 ? " has a value" : "s have values") outside \(range.lowerBound)…\(range.upperBound)")
                                    continue
                                }
                            case .refused:
                                problems.append("\(label) was \(before.modelEditorName) in the store and is \(attribute.type.modelEditorName) in the model; changing an attribute's type that way cannot be inferred")
                                continue
                            }
                        }
                        mapping.columns.append((column.name, found.name))
                        let alreadyRequired = sourceEntity(entity).map {
                            ManagedObjectModel.wasRecordedRequired(property.renamingIdentifier ?? property.name, entity: $0.name, in: source.metadata)
                        } ?? false
                        if !property.isOptional && !alreadyRequired {
                            let empty = try rows(ofKind: entity, nullIn: found.name)
                            if empty > 0 {
                                if !defaultValue.isNull {
                                    mapping.fills.append(Fill(column: column.name, value: defaultValue, entityNumbers: destinationNumbers(ofKind: entity)))
                                } else if requiresValues {
                                    problems.append("\(label) is required but \(empty) \(entity.name) row\(empty == 1 ? " has" : "s have") no value in the store and it has no default value")
                                }
                            }
                        }
                    } else if !defaultValue.isNull {
                        mapping.fills.append(Fill(column: column.name, value: defaultValue, entityNumbers: destinationNumbers(ofKind: entity)))
                    } else if !property.isOptional && requiresValues {
                        let existing = try rows(ofKind: entity)
                        if existing > 0 {
                            let kind = property is RelationshipDescription ? "relationship" : "attribute without a default value"
                            problems.append("\(label) is a new required \(kind), and the store has \(existing) \(entity.name) row\(existing == 1 ? "" : "s") without a value for it")
                        }
                    }
                    // The row's rank in an ordered inverse (`Z_FOK_<NAME>`) follows its key.
                    if let found, let relationship = property as? RelationshipDescription,
                       let orderColumn = schema.orderColumns[ObjectIdentifier(relationship)],
                       let sourceOrder = sourceColumns["Z_FOK_" + found.name.uppercased().dropFirst()],
                       !usedSourceColumns.contains(sourceOrder.name.uppercased()) {
                        usedSourceColumns.insert(sourceOrder.name.uppercased())
                        mapping.columns.append((orderColumn, sourceOrder.name))
                    }
                    if case .toOne(let entityColumn) = column.kind, let relationship = property as? RelationshipDescription,
                       let destination = relationship.destinationEntity, let destinationMapping = try? schema.mapping(for: destination) {
                        mapping.toOnes.append(ToOne(column: column.name, entityColumn: entityColumn, destinationTable: destinationMapping.table,
                                                    destinationNumbers: destinationMapping.numbersWithDescendants, isCopied: found != nil))
                    }
                }
            }
            tables.append(mapping)
        }
        joins = Self.joinMappings(of: schema, from: source) { entity in
            entity.flatMap { sourceOf[ObjectIdentifier($0)]?.number }
        }
        if !problems.isEmpty {
            throw PersistentStoreError(.migrationFailed, url: url,
                                       message: "lightweight migration cannot infer a mapping from the store to the model, and the store was not changed: "
                                           + problems.joined(separator: "; "), isModelMismatch: true)
        }
    }

    /// Finds each destination join table's rows in the store: the store's join
    /// table for the same pair of relationships (under their old names and
    /// entity numbers), whichever side named it.
    private static func joinMappings(of schema: SQLiteSchema, from source: StoreSchemaSnapshot,
                                     sourceNumber: (EntityDescription?) -> Int64?) -> [JoinMapping] {
        var result: [JoinMapping] = []
        for join in schema.joinTables {
            let relationship = join.relationship
            let oldName = (relationship.renamingIdentifier ?? relationship.name).uppercased()
            guard let owner = sourceNumber(relationship.entity), let member = sourceNumber(relationship.destinationEntity) else { continue }
            let memberColumn = "Z_\(member)\(oldName)"
            var found: (table: String, owner: String)?
            if let inverse = join.inverse {
                let oldInverse = (inverse.renamingIdentifier ?? inverse.name).uppercased()
                guard let inverseOwner = sourceNumber(inverse.entity), let inverseMember = sourceNumber(inverse.destinationEntity) else { continue }
                var ownerColumn = "Z_\(inverseMember)\(oldInverse)"
                if ownerColumn == memberColumn { ownerColumn += "1" }
                // Named after this relationship or after its inverse; the columns are the same either way.
                for name in ["Z_\(owner)\(oldName)", "Z_\(inverseOwner)\(oldInverse)"] {
                    if let table = source.joinTable(named: name, with: [ownerColumn, memberColumn]) {
                        found = (table, ownerColumn)
                        break
                    }
                }
            } else if let table = source.joinTable(named: "Z_\(owner)\(oldName)", with: [memberColumn]) {
                let others = (source.joinTables[table] ?? []).filter { !$0.hasPrefix("Z_FOK_") && $0 != memberColumn }
                if others.count == 1, let other = others.first { found = (table, other) }
            }
            guard let found, let columns = source.joinTables[found.table] else { continue }
            var mapped = [(join.ownerColumn, found.owner), (join.memberColumn, memberColumn)]
            if let order = join.memberOrderColumn, columns.contains("Z_FOK_" + memberColumn.dropFirst(2)) {
                mapped.append((order, "Z_FOK_" + memberColumn.dropFirst(2)))
            }
            if let order = join.ownerOrderColumn, columns.contains("Z_FOK_" + found.owner.dropFirst(2)) {
                mapped.append((order, "Z_FOK_" + found.owner.dropFirst(2)))
            }
            result.append(JoinMapping(table: join, sourceTable: found.table, columns: mapped))
        }
        return result
    }

    /// The source column of a property: its renamed column first, then its own name.
    private static func sourceColumn(for property: PropertyDescription, destination: String,
                                     in columns: [String: StoreSchemaSnapshot.Column], excluding used: Set<String>) -> StoreSchemaSnapshot.Column? {
        let base = "Z" + property.name.uppercased()
        let suffix = destination.uppercased().hasPrefix(base) ? String(destination.uppercased().dropFirst(base.count)) : ""
        var candidates: [String] = []
        if let old = property.renamingIdentifier, old != property.name {
            candidates.append("Z" + old.uppercased() + suffix)
            candidates.append("Z" + old.uppercased())
        }
        candidates.append(destination.uppercased())
        for candidate in candidates where !used.contains(candidate) {
            if let column = columns[candidate] { return column }
        }
        return nil
    }

    /// What changing an attribute's type within one column type means for the stored values.
    enum TypeChange: Equatable {
        /// Every stored value is a value of the new type.
        case widening
        /// Integers: the stored values must lie in the range.
        case narrowing(ClosedRange<Int64>)
        /// The values may not mean the same under the new type.
        case refused
    }

    /// Whether values stored for an attribute of type `old` can be read as
    /// `new` without a change: widening needs nothing, an integer narrowing
    /// needs every value in range, and the rest (Double → Float, String →
    /// URI, Binary Data ↔ Transformable, …) would read values that mean
    /// something else or fail to read.
    static func typeChange(from old: AttributeType, to new: AttributeType) -> TypeChange {
        func integerRange(_ type: AttributeType) -> ClosedRange<Int64>? {
            switch type {
            case .boolean: 0...1
            case .integer16: Int64(Int16.min)...Int64(Int16.max)
            case .integer32: Int64(Int32.min)...Int64(Int32.max)
            case .integer64: Int64.min...Int64.max
            default: nil
            }
        }
        if let before = integerRange(old), let after = integerRange(new) {
            return after.contains(before.lowerBound) && after.contains(before.upperBound) ? .widening : .narrowing(after)
        }
        switch (old, new) {
        case (.float, .double), (.uri, .string), (.uuid, .binaryData): return .widening
        default: return .refused
        }
    }

    /// Counts the rows of some entities whose value in `column` lies outside
    /// `range` (NULLs are inside: they need no conversion).
    static func countRows(in table: String, entityNumbers: [Int64], column: String, outside range: ClosedRange<Int64>,
                          database: some MigratingDatabase) throws -> Int {
        guard !entityNumbers.isEmpty else { return 0 }
        let dialect = database.dialect
        let name = dialect.quotedIdentifier(column)
        let low = dialect.parameter(1, boundTo: .integer(range.lowerBound)), high = dialect.parameter(2, boundTo: .integer(range.upperBound))
        let sql = "SELECT count(*) " + StoreSchemaSnapshot.rows(of: table, entityNumbers: entityNumbers, dialect)
            + " AND \(name) IS NOT NULL AND (\(name) < \(low) OR \(name) > \(high))"
        return Int(try database.integer(sql, [.integer(range.lowerBound), .integer(range.upperBound)]) ?? 0)
    }

    /// The SQLite type Core Data declares for a property's column (which a dialect translates).
    private static func declaredType(of property: PropertyDescription) -> String {
        if let attribute = property as? AttributeDescription { return SQLiteSchema.declaredType(of: attribute.type) }
        return "INTEGER"
    }

    /// Whether a store column can hold the values of a column of `expected` type.
    /// A column declared without a type holds anything.
    private static func typesMatch(_ stored: String, _ expected: String) -> Bool {
        stored.isEmpty || stored == expected
    }

    private static func describe(_ property: PropertyDescription) -> String {
        if let attribute = property as? AttributeDescription { return "a \(attribute.type.rawValue) attribute" }
        return "a to-one relationship"
    }
}
