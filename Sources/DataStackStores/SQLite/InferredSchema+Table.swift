@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - A root entity's table, read as to-one keys and attributes

extension InferredSchema {
    /// Reads one root entity's table `Z<ENTITY>`: every column after `Z_PK`,
    /// `Z_ENT` and `Z_OPT` becomes a to-one key, the entity column or the rank
    /// of a to-one key, or an attribute, so that no column is left unread.
    struct TableReader {
        let connection: Connection
        let url: URL
        let entity: Entity
        let entities: [Int64: Entity]
        /// `Z_ENT` of the entities that have subentities: the only destinations an entity column may name.
        let entitiesWithSubentities: Set<Int64>

        func read() throws -> Table {
            let table = "Z" + entity.name.uppercased()
            guard try connection.tableExists(table) else {
                throw notAStore("the root entity \(entity.name) of Z_PRIMARYKEY has no table \(table)")
            }
            let columns = try connection.columns(in: table).filter { !["Z_PK", "Z_ENT", "Z_OPT"].contains($0.name) }
            var entityColumns: [String: Int64] = [:]   // key column → destination named by its entity column
            var orderedKeys: Set<String> = []            // key columns with a Z_FOK_ rank beside them
            var plain: [ColumnInfo] = []
            for column in columns {
                if column.name.hasPrefix("Z_FOK_") {
                    orderedKeys.insert("Z" + column.name.dropFirst("Z_FOK_".count))
                } else if let (number, key) = Self.entityColumn(column.name) {
                    guard entitiesWithSubentities.contains(number) else {
                        throw notAStore("\(table).\(column.name) names entity \(number), which Z_PRIMARYKEY does not list with subentities")
                    }
                    entityColumns["Z" + key] = number
                } else {
                    guard column.name.hasPrefix("Z"), ManagedObjectModel.isIdentifier(Self.propertyName(of: column.name)) else {
                        throw notAStore("\(table).\(column.name) is not a column name Core Data writes")
                    }
                    plain.append(column)
                }
            }
            let plainNames = Set(plain.map(\.name))
            for key in Set(entityColumns.keys).union(orderedKeys).sorted() where !plainNames.contains(key) {
                throw notAStore("\(table) has an entity or rank column for \(key), but no column \(key)")
            }
            let keys = try indexedKeys(of: table, plain: plain).union(entityColumns.keys).union(orderedKeys)
            var toOnes: [ToOne] = []
            var attributes: [Attribute] = []
            for column in plain {
                let name = Self.propertyName(of: column.name)
                if keys.contains(column.name) {
                    var toOne = ToOne(name: name, column: column.name)
                    toOne.hasOrderColumn = orderedKeys.contains(column.name)
                    if let destination = entityColumns[column.name] {
                        toOne.destination = destination
                        toOne.destinationSource = .entityColumn
                        toOne.hasEntityColumn = true
                    }
                    toOnes.append(toOne)
                } else {
                    guard let type = Self.attributeType(declared: column.declaredType) else {
                        throw notAStore("\(table).\(column.name) is declared '\(column.declaredType)', a type Core Data never declares")
                    }
                    attributes.append(Attribute(name: name, type: type))
                }
            }
            return Table(root: entity.number, name: table, toOnes: toOnes, attributes: attributes)
        }

        /// The plain columns that hold foreign keys, told by the index Core
        /// Data gives every key: `<TABLE>_<COLUMN>_INDEX`.
        ///
        /// Stores up to about framework 600 give an attribute marked "Indexed"
        /// an index of the same name (kik: `ZKIKMESSAGE_ZINTERNALID_INDEX`,
        /// `ZKIKMESSAGE_ZSTANZAID_INDEX`). Core Data creates those indexes
        /// first, by attribute name, then the keys' in column order, so when a
        /// table has an index on a non-INTEGER column, or indexes out of
        /// column order, the keys are the trailing run of INTEGER columns in
        /// column order; and of those, a column between two unindexed INTEGER
        /// columns that sort around it by name is an attribute (Core Data
        /// sorts a level's integer attributes by name, then its keys).
        private func indexedKeys(of table: String, plain: [ColumnInfo]) throws -> Set<String> {
            let statement = try connection.prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 COLLATE NOCASE ORDER BY rowid")
            try statement.bind(table, at: 1)
            let position = Dictionary(plain.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })
            var indexed: [String] = []
            while try statement.step() {
                guard let name = statement.string(at: 0), name.hasPrefix(table + "_"), name.hasSuffix("_INDEX") else { continue }
                let column = String(name.dropFirst(table.count + 1).dropLast("_INDEX".count))
                if position[column] != nil { indexed.append(column) }
            }
            let integers = plain.filter { Self.normalized($0.declaredType) == "INTEGER" }.map(\.name)
            let isInteger = Set(integers)
            let inOrder = zip(indexed, indexed.dropFirst()).allSatisfy { (position[$0] ?? 0) < (position[$1] ?? 0) }
            if inOrder && indexed.allSatisfy(isInteger.contains) { return Set(indexed) }

            var run: [String] = []
            for column in indexed.reversed() {
                guard isInteger.contains(column), run.last.map({ (position[column] ?? 0) < (position[$0] ?? 0) }) ?? true else { break }
                run.append(column)
            }
            let indexedSet = Set(indexed)
            return Set(run.filter { column in
                guard let at = integers.firstIndex(of: column), at > 0, at + 1 < integers.count else { return true }
                let (before, after) = (integers[at - 1], integers[at + 1])
                let insideAttributes = !indexedSet.contains(before) && !indexedSet.contains(after) && before < column && column < after
                return !insideAttributes
            })
        }

        private func notAStore(_ problem: String) -> PersistentStoreError {
            PersistentStoreError(.notAStore, url: url, message: "no model can be inferred from the store's schema: \(problem)")
        }

        /// `Z<n>_<KEY>`, the entity column of the to-one key `Z<KEY>`, split into n and KEY.
        static func entityColumn(_ column: String) -> (Int64, String)? {
            guard let (number, rest) = InferredSchema.numbered(column, prefix: "Z").map({ ($0.number, $0.name) }),
                  rest.hasPrefix("_"), rest.count > 1 else { return nil }
            return (number, String(rest.dropFirst()))
        }

        /// The property a column stands for: the column without its `Z`,
        /// lower-cased (`ZDISPLAYNAME` → `displayname`, `ZACCOUNT1` → `account1`).
        static func propertyName(of column: String) -> String {
            String(column.dropFirst()).lowercased()
        }

        /// The attribute type of a column Core Data declared so; nil for a type it never declares.
        static func attributeType(declared: String) -> AttributeType? {
            switch normalized(declared) {
            case "INTEGER": .integer64
            case "TIMESTAMP": .date
            case "FLOAT": .double
            case "DECIMAL": .decimal
            case "VARCHAR": .string
            case "BLOB": .binaryData
            default: nil
            }
        }

        /// A declared type upper-cased, without a length (`VARCHAR(255)` is `VARCHAR`).
        static func normalized(_ declared: String) -> String {
            let base = declared.split(separator: "(", maxSplits: 1).first.map(String.init) ?? declared
            return base.trimmingCharacters(in: .whitespaces).uppercased()
        }
    }
}
