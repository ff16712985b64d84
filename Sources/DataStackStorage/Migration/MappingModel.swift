import Foundation
@_spi(StoreImplementation) import ObjectGraph

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
package struct MappingModel {
    /// Where one destination table's rows come from.
    struct TableMapping {
        /// The destination table.
        let table: TableLayout.Table
        /// The source table (as the file spells it), or nil for a table that starts empty.
        let sourceTable: String?
        /// `Z_MAX` of the source root: at least the number of its rows, and
        /// known without reading them, so progress is weighed by it.
        let sourceMaxPrimaryKey: Int64
        /// Source `Z_ENT` → destination `Z_ENT`, for the entities whose rows are copied.
        var entityNumbers: [(source: Int64, destination: Int64)] = []
        /// Destination column ← source column.
        var columns: [(destination: String, source: String)] = []
        /// Values written where a column is NULL, for rows of some entities.
        var fills: [Fill] = []
        /// The table's to-one foreign keys, cleaned after copying.
        var toOnes: [ToOne] = []
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
        let table: TableLayout.JoinTable
        /// The source join table, as the file spells it.
        let sourceTable: String
        /// Destination column ← source column.
        let columns: [(destination: String, source: String)]
    }

    /// The destination's layout.
    package let schema: TableLayout
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
    init(from source: StoreSchemaSnapshot, to entities: [EntityDescription], url: URL?, dialect: any SQLDialect, requiresValues: Bool = true,
         countRows: @escaping CountRows, countRowsOutside: CountRowsOutside? = nil) throws {
        numbers = TableLayout.coreDataNumbers(for: entities)
        schema = try TableLayout(entities: entities, numbers: numbers, existingColumns: nil, url: url, dialect: dialect)
        let sourceOf = Self.sourceEntities(of: entities, in: source)
        var problems: [String] = []
        var destinationTableOfSourceRoot: [Int64: String] = [:]
        for table in schema.tables {
            let sourceRoot: StoreSchemaSnapshot.Entity?
            switch Self.sourceRoot(of: table, sourceOf: sourceOf, in: source, taken: &destinationTableOfSourceRoot) {
            case .refused(let problem):
                problems.append(problem)
                continue
            case .startsEmpty: sourceRoot = nil
            case .root(let root): sourceRoot = root
            }
            // Each property of the table's hierarchy (MappingModel+Tables.swift).
            var inference = TableInference(table: table, schema: schema, numbers: numbers, source: source, sourceOf: sourceOf,
                                           sourceRoot: sourceRoot, requiresValues: requiresValues,
                                           countRows: countRows, countRowsOutside: countRowsOutside)
            try inference.infer()
            problems += inference.problems
            tables.append(inference.mapping)
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

    /// The number of rows of some source entity numbers in a source table,
    /// optionally only those where a column is NULL.
    typealias CountRows = (_ table: String, _ entityNumbers: [Int64], _ nullColumn: String?) throws -> Int
    /// The number of rows of some source entity numbers in a source table
    /// whose value in a column lies outside a range.
    typealias CountRowsOutside = (_ table: String, _ entityNumbers: [Int64], _ column: String, _ range: ClosedRange<Int64>) throws -> Int

    /// The store's entity each entity of the model comes from: by renaming
    /// identifier first, then by name, each store entity used once.
    private static func sourceEntities(of entities: [EntityDescription],
                                       in source: StoreSchemaSnapshot) -> [ObjectIdentifier: StoreSchemaSnapshot.Entity] {
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
        return sourceOf
    }

    /// Where a destination table's rows come from.
    private enum SourceRoot {
        /// From the hierarchy of this store entity.
        case root(StoreSchemaSnapshot.Entity)
        /// From nowhere: the table starts empty.
        case startsEmpty
        /// Entities would move between inheritance hierarchies, which cannot be inferred.
        case refused(String)
    }

    /// The root of the store's hierarchy that a destination table's entities
    /// come from: every copied entity of a table must come from one store
    /// table, and every store table go to one table. `taken`: the destination
    /// table of each store root already used.
    private static func sourceRoot(of table: TableLayout.Table, sourceOf: [ObjectIdentifier: StoreSchemaSnapshot.Entity],
                                   in source: StoreSchemaSnapshot, taken: inout [Int64: String]) -> SourceRoot {
        let hierarchy = table.root.selfAndDescendants
        let sourceRoots = Set(hierarchy.compactMap { sourceOf[ObjectIdentifier($0)] }.filter { $0.table != nil }.map(\.rootNumber))
        if sourceRoots.count > 1 {
            let names = sourceRoots.sorted().compactMap { source.entities[$0]?.name }
            return .refused("the entities of \(table.root.name)'s hierarchy come from several hierarchies in the store (\(names.joined(separator: ", "))); moving entities between inheritance hierarchies cannot be inferred")
        }
        guard let root = sourceRoots.first.flatMap({ source.entities[$0] }) else { return .startsEmpty }
        if let other = taken[root.number] {
            return .refused("the entities of \(root.name)'s hierarchy in the store are split between \(other) and \(table.name); moving entities between inheritance hierarchies cannot be inferred")
        }
        taken[root.number] = table.name
        return .root(root)
    }

    /// Finds each destination join table's rows in the store: the store's join
    /// table for the same pair of relationships (under their old names and
    /// entity numbers), whichever side named it.
    private static func joinMappings(of schema: TableLayout, from source: StoreSchemaSnapshot,
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
    static func sourceColumn(for property: PropertyDescription, destination: String,
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
    static func declaredType(of property: PropertyDescription) -> String {
        if let attribute = property as? AttributeDescription { return TableLayout.declaredType(of: attribute.type) }
        return "INTEGER"
    }

    /// Whether a store column can hold the values of a column of `expected` type.
    /// A column declared without a type holds anything.
    static func typesMatch(_ stored: String, _ expected: String) -> Bool {
        stored.isEmpty || stored == expected
    }

    static func describe(_ property: PropertyDescription) -> String {
        if let attribute = property as? AttributeDescription { return "a \(attribute.type.rawValue) attribute" }
        return "a to-one relationship"
    }
}
