import Foundation
@testable import ObjectGraph

/// A model declared from a Core Data store's schema alone, so that the history
/// of stores Apple's apps wrote (Notes, Screen Time, knowledgeC), which ship no
/// model file, can be read through the API.
///
/// What the schema tells, and so what the model holds:
/// - the entities and their inheritance, from `Z_PRIMARYKEY` (`Z_ENT`, `Z_NAME`,
///   `Z_SUPER`), without the history's own entities 16001–16003;
/// - one property per column of each root entity's table `Z<ROOT>` (after
///   `Z_PK`, `Z_ENT`, `Z_OPT`), named as the column without its `Z` and
///   lower-cased (`ZCRYPTOTAG` → `cryptotag`), so the engine maps it back to
///   that column;
/// - a column with the index Core Data gives every foreign key
///   (`<TABLE>_<COLUMN>_INDEX`), or with an entity column `Z<n>_<COLUMN>`
///   beside it, is a to-one; `n` names its destination, an entity with
///   subentities. Every other column is an attribute of the type Core Data
///   declares it with (INTEGER → Integer 64, TIMESTAMP → Date, FLOAT → Double,
///   DECIMAL → Decimal, VARCHAR → String, BLOB → Binary Data).
///
/// What the schema cannot tell, and so what the model leaves out or stands in for:
/// - which level of an inheritance tree declares a column: a shared table's
///   columns all go on its root, so every entity of that table has every
///   property of the table. Core Data's `ZCOLUMNS` slots run level by level,
///   so for an entity that shares its table the bit order here is not Apple's;
/// - to-many relationships, which have no column: their `ZCOLUMNS` bits come
///   after every to-one and attribute, past the bits this model knows;
/// - the destination of a to-one without entity column: only that it has no
///   subentities, which is all `ZCOLUMNS` needs (one bit). Such a to-one points
///   at the first entity without subentities, a stand-in: do not follow it;
/// - the case of names: Core Data sorts property names byte-wise within a
///   level, and these lower-cased names sort as the original names do without
///   regard to case;
/// - which attributes keep their value in a tombstone (Xcode's "Preserve After
///   Deletion"): the caller names them, from what it knows of the real model;
/// - transient properties (no column, and no slot in Core Data either),
///   abstract entities, optionality, indexes and constraints.
struct SchemaDerivedModel {
    let model: ManagedObjectModel
    /// For each entity, by name, the property each `ZCOLUMNS` bit stands for
    /// under the slot rule of the reference (coredata-semantics-stage2 §1.3)
    /// applied to this model: its to-ones by name, two bits for one with an
    /// entity column, then its attributes by name. Built from the columns, not
    /// by the engine's history layout, so a test decodes `ZCOLUMNS` on its own.
    let propertyOfBit: [String: [String]]
    /// For each entity with preserved attributes, by name, those attributes in
    /// `ZTOMBSTONE0`, `ZTOMBSTONE1`, … order: their order among the bits.
    let tombstoneAttributes: [String: [String]]
    /// The entities alone in their table: for them the schema fixes the bits
    /// of every to-one and attribute, as Core Data lays them out.
    let entitiesAloneInTheirTable: Set<String>

    /// Derives the model of the store at `url`.
    ///
    /// - Parameter preserving: the attributes, by root entity name, whose
    ///   values Core Data keeps in the tombstone of a deleted object.
    init(store url: URL, preserving: [String: Set<String>] = [:]) throws {
        let connection = try RawStore.open(url, readOnly: true)
        let history = [SQLiteHistoryLayout.changeEntity, SQLiteHistoryLayout.transactionEntity, SQLiteHistoryLayout.stringEntity]
        let rows = try connection.prepare("SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
        var names: [Int64: String] = [:]
        var parentOf: [Int64: Int64] = [:]
        var numbers: [Int64] = []
        while try rows.step() {
            let number = rows.int64(at: 0)
            guard !history.contains(number) else { continue }
            numbers.append(number)
            names[number] = rows.string(at: 1) ?? ""
            parentOf[number] = rows.int64(at: 2)
        }
        let parents = Set(parentOf.values)
        func root(of number: Int64) -> Int64 {
            var current = number
            while let parent = parentOf[current], parent != 0 { current = parent }
            return current
        }
        guard let standIn = numbers.first(where: { !parents.contains($0) }).flatMap({ names[$0] }) else {
            throw FixtureError("\(url.lastPathComponent): Z_PRIMARYKEY has no entity without subentities")
        }

        var entities: [Int64: EntityDescription] = [:]
        var propertyOfBit: [String: [String]] = [:]
        var tombstoneAttributes: [String: [String]] = [:]
        for number in numbers {
            guard let name = names[number] else { continue }
            guard parentOf[number] == 0 else {
                entities[number] = EntityDescription(name: name, properties: [])
                continue
            }
            let table = try Table(name, in: connection, entityNames: names, parents: parents)
            let preserved = preserving[name] ?? []
            let unknown = preserved.subtracting(table.attributes.map(\.name))
            guard unknown.isEmpty else {
                throw FixtureError("\(name) has no attribute \(unknown.sorted().joined(separator: ", ")) to preserve")
            }
            let properties: [PropertyDescription] = table.toOnes.map { toOne in
                RelationshipDescription(name: toOne.name, destination: toOne.destination ?? standIn)
            } + table.attributes.map { column in
                let attribute = AttributeDescription(name: column.name, type: column.type)
                attribute.preservesValueInHistoryOnDeletion = preserved.contains(column.name)
                return attribute
            }
            entities[number] = EntityDescription(name: name, properties: properties)
            for member in numbers where root(of: member) == number {
                guard let memberName = names[member] else { continue }
                propertyOfBit[memberName] = table.bitOrder
                tombstoneAttributes[memberName] = table.bitOrder.filter(preserved.contains)
            }
        }
        for number in numbers {
            guard let parentNumber = parentOf[number], parentNumber != 0 else { continue }
            guard let parent = entities[parentNumber], let child = entities[number] else {
                throw FixtureError("\(names[number] ?? "?"): Z_SUPER \(parentNumber) is no entity of Z_PRIMARYKEY")
            }
            parent.subentities.append(child)
        }
        model = ManagedObjectModel(entities: numbers.compactMap { entities[$0] })
        self.propertyOfBit = propertyOfBit
        self.tombstoneAttributes = tombstoneAttributes.filter { !$0.value.isEmpty }
        entitiesAloneInTheirTable = Set(numbers.filter { parentOf[$0] == 0 && !parents.contains($0) }.compactMap { names[$0] })
    }

    /// The names of the properties whose bits `columns` sets, by this model's
    /// bit order; bits past it (to-many relationships) are left out.
    func updatedProperties(of entity: String, in columns: Data) -> Set<String> {
        let order = propertyOfBit[entity] ?? []
        var names: Set<String> = []
        for (offset, byte) in columns.enumerated() {
            for bit in 0..<8 where byte & (0x80 >> bit) != 0 && offset * 8 + bit < order.count {
                names.insert(order[offset * 8 + bit])
            }
        }
        return names
    }

    /// Byte-wise order of names, as Core Data sorts the properties of a level.
    private static func byteWise(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// A root entity's table, read as the properties it stores.
    private struct Table {
        let toOnes: [(name: String, destination: String?)]
        let attributes: [(name: String, type: AttributeType)]
        /// The `ZCOLUMNS` bit order of the properties: to-ones, then attributes, each by name.
        let bitOrder: [String]

        init(_ entity: String, in connection: Connection, entityNames: [Int64: String], parents: Set<Int64>) throws {
            let table = "Z" + entity.uppercased()
            guard try connection.tableExists(table) else { throw FixtureError("entity \(entity) has no table \(table)") }
            let columns = try connection.columns(in: table).filter { !["Z_PK", "Z_ENT", "Z_OPT"].contains($0.name) }
            let indexes = Set(try connection.indexNames(on: table))
            // `Z<n>_<COLUMN>`: the entity column of the to-one `<COLUMN>` whose destination is entity n.
            var destinations: [String: String] = [:]
            var entityColumns: Set<String> = []
            for column in columns {
                guard let match = column.name.wholeMatch(of: /Z(\d+)_(.+)/), let number = Int64(match.1) else { continue }
                guard let destination = entityNames[number], parents.contains(number) else {
                    throw FixtureError("\(table).\(column.name) names entity \(number), which has no subentities")
                }
                destinations["Z" + match.2] = destination
                entityColumns.insert(column.name)
            }
            var toOnes: [(name: String, destination: String?)] = []
            var attributes: [(name: String, type: AttributeType)] = []
            for column in columns where !entityColumns.contains(column.name) {
                guard column.name.hasPrefix("Z") else { throw FixtureError("\(table).\(column.name) is not a Core Data column name") }
                let name = String(column.name.dropFirst()).lowercased()
                if indexes.contains("\(table)_\(column.name)_INDEX") || destinations[column.name] != nil {
                    toOnes.append((name, destinations[column.name]))
                } else {
                    attributes.append((name, try Self.type(declared: column.declaredType, of: "\(table).\(column.name)")))
                }
            }
            self.toOnes = toOnes
            self.attributes = attributes
            bitOrder = toOnes.sorted { SchemaDerivedModel.byteWise($0.name, $1.name) }.flatMap { toOne in
                toOne.destination == nil ? [toOne.name] : [toOne.name, toOne.name]
            } + attributes.map(\.name).sorted(by: SchemaDerivedModel.byteWise)
        }

        /// The attribute type Core Data stores in a column of this declared type.
        private static func type(declared: String, of column: String) throws -> AttributeType {
            switch declared.uppercased() {
            case "INTEGER": .integer64
            case "TIMESTAMP": .date
            case "FLOAT": .double
            case "DECIMAL": .decimal
            case "VARCHAR": .string
            case "BLOB": .binaryData
            default: throw FixtureError("\(column) is declared \(declared), a type Core Data does not declare")
            }
        }
    }
}
