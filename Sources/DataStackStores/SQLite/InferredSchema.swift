@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// What a Core Data store's schema tells of the model that wrote it, read from
/// the file alone: the entities of `Z_PRIMARYKEY`, each root entity's table
/// read as to-one keys and attributes, and the join tables read as
/// many-to-many pairs.
///
/// ``ManagedObjectModel/init(inferredFromSchemaOfStoreAt:)`` builds a model
/// from it; the rules, and what the schema cannot tell, are documented there.
/// Reading opens one read-only connection, runs a handful of schema queries
/// (never a query over rows) and closes it.
struct InferredSchema {
    /// An entity of `Z_PRIMARYKEY`.
    struct Entity {
        /// `Z_ENT`.
        let number: Int64
        /// `Z_NAME`.
        let name: String
        /// `Z_SUPER`: the parent's `Z_ENT`, 0 for a root entity.
        let parent: Int64
    }

    /// How a to-one's destination was found (see ``ManagedObjectModel/inferredDestinationUserInfoKey``).
    enum DestinationSource: String {
        /// The `Z<n>_<COLUMN>` entity column names it: certain.
        case entityColumn = "entity column"
        /// The column's name resembles the entity's name: a guess.
        case columnName = "column name"
        /// Nothing tells it: the destination is a stand-in.
        case none = "none"
    }

    /// A foreign-key column `Z<NAME>` of a root entity's table.
    struct ToOne {
        /// The property name: the column without its `Z`, lower-cased.
        let name: String
        /// The column, as the file spells it.
        let column: String
        /// `Z_ENT` of the destination: named by the entity column, or guessed.
        var destination: Int64 = 0
        var destinationSource = DestinationSource.none
        /// Whether the entity column `Z<n>_<COLUMN>` is beside it (n = ``destination``).
        var hasEntityColumn = false
        /// Whether `Z_FOK_<COLUMN>` is beside it: the inverse is an ordered to-many.
        var hasOrderColumn = false
    }

    /// A column of a root entity's table read as an attribute.
    struct Attribute {
        /// The property name: the column without its `Z`, lower-cased.
        let name: String
        let type: AttributeType
    }

    /// A root entity's table.
    struct Table {
        /// `Z_ENT` of the root entity.
        let root: Int64
        let name: String
        var toOnes: [ToOne]
        let attributes: [Attribute]
    }

    /// A join table `Z_<n><NAME>` read as a many-to-many pair.
    struct ManyToMany {
        let table: String
        /// The relationship the table is named after, on entity `owner`, to `destination`.
        let owner: Int64
        let name: String
        let destination: Int64
        let isOrdered: Bool
        /// Its inverse, on entity `destination`, to `inverseDestination`.
        let inverseName: String
        let inverseDestination: Int64
        let inverseIsOrdered: Bool
    }

    let url: URL
    /// The entities by `Z_ENT`, without the persistent history's (16001–16003).
    let entities: [Entity]
    /// One per root entity, in `Z_ENT` order.
    let tables: [Table]
    let manyToManys: [ManyToMany]

    /// Reads the schema of the store at `url`.
    ///
    /// - Throws: ``PersistentStoreError`` naming the file: `.cannotOpen` when
    ///   there is no file, `.notAStore` when it is not a SQLite database, has
    ///   no `Z_PRIMARYKEY`, or has tables Core Data does not lay out (a root
    ///   entity without its table, a column of a type Core Data never declares).
    init(storeAt url: URL) throws {
        self.url = url
        let connection = try SQLiteStoreFile.openExisting(url, readOnly: true)
        do {
            guard try connection.tableExists("Z_PRIMARYKEY") else {
                throw PersistentStoreError(.notAStore, url: url, message: """
                    the file is a SQLite database but not a Core Data store (no Z_PRIMARYKEY table), \
                    so no model can be inferred from it
                    """)
            }
            entities = try Self.readEntities(connection)
            let byNumber = Dictionary(uniqueKeysWithValues: entities.map { ($0.number, $0) })
            let parents = Set(entities.map(\.parent))
            var tables: [Table] = []
            for entity in entities where entity.parent == 0 {
                let reader = TableReader(connection: connection, url: url, entity: entity,
                                         entities: byNumber, entitiesWithSubentities: parents)
                tables.append(try reader.read())
            }
            self.tables = Self.guessingDestinations(of: tables, entities: entities)
            manyToManys = try Self.readJoinTables(connection, entities: byNumber)
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "reading the store's schema")
        }
    }

    private static func readEntities(_ connection: Connection) throws -> [Entity] {
        let history: Set<Int64> = [HistoryLayout.changeEntity, HistoryLayout.transactionEntity,
                                   HistoryLayout.stringEntity]
        let rows = try connection.prepare("SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
        var entities: [Entity] = []
        while try rows.step() {
            let number = rows.int64(at: 0)
            guard !history.contains(number), let name = rows.string(at: 1) else { continue }
            entities.append(Entity(number: number, name: name, parent: rows.isNull(at: 2) ? 0 : rows.int64(at: 2)))
        }
        return entities
    }

    /// The join tables: `Z_<n><NAME>` with two key columns `Z_<m><NAME>`, plus
    /// the `Z_FOK_` rank columns of ordered sides.
    ///
    /// The relationship the table is named after is on entity n; its
    /// destinations are in the column whose name part is the table's (its
    /// number m is the destination), its owners in the other column, whose
    /// name part is the inverse. A table that does not fit is left out.
    private static func readJoinTables(_ connection: Connection, entities: [Int64: Entity]) throws -> [ManyToMany] {
        let names = try connection.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z\\_%' ESCAPE '\\' ORDER BY name")
        var tables: [String] = []
        while try names.step() { if let name = names.string(at: 0) { tables.append(name) } }
        var joins: [ManyToMany] = []
        for table in tables {
            guard let named = Self.numbered(table, prefix: "Z_"), entities[named.number] != nil else { continue }
            let columns = try connection.columns(in: table).map(\.name)
            let keys = columns.filter { !$0.hasPrefix("Z_FOK_") }
            guard keys.count == 2, let first = Self.numbered(keys[0], prefix: "Z_"), let second = Self.numbered(keys[1], prefix: "Z_"),
                  entities[first.number] != nil, entities[second.number] != nil else { continue }
            let (member, owner) = first.name == named.name ? (first, second) : (second, first)
            guard member.name == named.name, owner.name != member.name else { continue }
            joins.append(ManyToMany(
                table: table, owner: named.number, name: named.name.lowercased(), destination: member.number,
                isOrdered: columns.contains("Z_FOK_\(member.number)\(member.name)"),
                inverseName: owner.name.lowercased(), inverseDestination: owner.number,
                inverseIsOrdered: columns.contains("Z_FOK_\(owner.number)\(owner.name)")))
        }
        return joins
    }

    /// `<prefix><n><NAME>` split into n and NAME, NAME a valid property name once lower-cased.
    static func numbered(_ text: String, prefix: String) -> (number: Int64, name: String)? {
        guard text.hasPrefix(prefix) else { return nil }
        let rest = text.dropFirst(prefix.count)
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        let name = String(rest.dropFirst(digits.count))
        guard let number = Int64(digits), ManagedObjectModel.isIdentifier(name.lowercased()) else { return nil }
        return (number, name)
    }
}
