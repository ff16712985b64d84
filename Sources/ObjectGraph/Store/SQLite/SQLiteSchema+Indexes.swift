@_spi(DataStackInternal) import DataStackSQLite
import Foundation

// MARK: - The indexes a model declares, and whether a file has them

extension SQLiteSchema {
    /// An index the model declares on an entity table: a fetch index
    /// (`Z_<Entity>_<name>`), an indexed attribute (`Z_<Entity>_<attribute>`)
    /// or a uniqueness constraint (`Z_<Entity>_UNIQUE_<attributes>`), named as
    /// Core Data names them.
    struct DeclaredIndex: Sendable {
        let name: String
        let table: String
        let columns: [String]
        let isUnique: Bool
        /// The entity and what declares the index, for messages.
        let entity: String
        let origin: String

        /// Core Data's statement, its unique columns declared as the dialect declares them.
        func creationStatement(_ dialect: any SQLDialect) -> String {
            isUnique
                ? "CREATE UNIQUE INDEX \(name) ON \(table) (" + columns.map(dialect.uniqueIndexColumn).joined(separator: ", ") + ")"
                : "CREATE INDEX \(name) ON \(table) (\(columns.joined(separator: ", ")))"
        }
    }

    /// An index of an existing file: its columns in order, upper-cased.
    struct ExistingIndex: Sendable, Equatable {
        let columns: [String]
        let isUnique: Bool
    }

    /// Every index the model declares, entity by entity in `Z_ENT` order.
    func declaredIndexes() -> [DeclaredIndex] {
        var indexes: [DeclaredIndex] = []
        for mapping in mappings.values.sorted(by: { $0.number < $1.number }) {
            let entity = mapping.entity
            func columns(_ keys: [String]) -> [String] {
                keys.compactMap { key in entity.propertiesByName[key].flatMap { mapping.columns[$0.index]?.name } }
            }
            for (index, column) in mapping.columns.enumerated() {
                guard let column, let attribute = entity.slotProperties[index] as? AttributeDescription,
                      attribute.entity === entity, attribute.isIndexed else { continue }
                indexes.append(DeclaredIndex(name: "Z_\(entity.name)_\(attribute.name)", table: mapping.table, columns: [column.name],
                                             isUnique: false, entity: entity.name, origin: "indexed attribute \(attribute.name)"))
            }
            for constraint in entity.uniquenessConstraints {
                let names = columns(constraint)
                guard names.count == constraint.count else { continue }
                indexes.append(DeclaredIndex(name: "Z_\(entity.name)_UNIQUE_\(constraint.joined(separator: "_"))", table: mapping.table,
                                             columns: names, isUnique: true, entity: entity.name,
                                             origin: "uniqueness constraint (\(constraint.joined(separator: ", ")))"))
            }
            for index in entity.indexes {
                let names = columns(index.propertyNames)
                guard !names.isEmpty else { continue }
                indexes.append(DeclaredIndex(name: "Z_\(entity.name)_\(index.name)", table: mapping.table, columns: names, isUnique: false,
                                             entity: entity.name, origin: "fetch index \(index.name) (\(index.propertyNames.joined(separator: ", ")))"))
            }
        }
        return indexes
    }

    /// The indexes of every entity table of a file, by table name as the
    /// file spells it.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragfunc>
    static func existingIndexes(_ connection: Connection) throws -> [String: [ExistingIndex]] {
        let statement = try connection.prepare("""
            SELECT m.name, il.name, il."unique", ii.name FROM sqlite_master AS m \
            JOIN pragma_index_list(m.name) AS il JOIN pragma_index_info(il.name) AS ii \
            WHERE m.type = 'table' AND m.name LIKE 'Z%' ORDER BY m.name, il.name, ii.seqno
            """)
        var result: [String: [ExistingIndex]] = [:]
        var current: (table: String, index: String, isUnique: Bool, columns: [String])?
        func flush() {
            guard let current else { return }
            result[current.table, default: []].append(ExistingIndex(columns: current.columns, isUnique: current.isUnique))
        }
        while try statement.step() {
            let table = statement.string(at: 0) ?? "", index = statement.string(at: 1) ?? ""
            // An expression column has no name; it matches no column of the model.
            let column = statement.string(at: 3)?.uppercased() ?? "(expression)"
            if current?.table == table && current?.index == index {
                current?.columns.append(column)
            } else {
                flush()
                current = (table, index, statement.int64(at: 2) != 0, [column])
            }
        }
        flush()
        return result
    }

    /// The model's indexes that a file lacks, one line each naming the
    /// entity and the index; empty when it has them all.
    ///
    /// An index is found by its columns, in order, whatever its name (and,
    /// for a uniqueness constraint, only a unique index will do): Core Data
    /// has named indexes differently over the years, and extra indexes of a
    /// file are tolerated. Version hashes do not cover indexes (in Core Data
    /// neither), so this is how a new fetch index, indexed attribute or
    /// uniqueness constraint makes an existing store need a migration.
    ///
    /// - Parameter existing: each table's indexes (``existingIndexes(_:)``).
    func indexDifferences(existing: [String: [ExistingIndex]]) -> [String] {
        var problems: [String] = []
        for index in declaredIndexes() {
            let wanted = index.columns.map { $0.uppercased() }
            let candidates = existing.first { $0.key.uppercased() == index.table.uppercased() }?.value ?? []
            if !candidates.contains(where: { $0.columns == wanted && (!index.isUnique || $0.isUnique) }) {
                problems.append("entity \(index.entity): the store has no index for its \(index.origin) "
                                + "(\(index.isUnique ? "a unique index" : "an index") on \(index.columns.joined(separator: ", ")) of \(index.table))")
            }
        }
        return problems
    }
}
