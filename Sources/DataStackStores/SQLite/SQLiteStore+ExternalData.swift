@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - External binary storage on the save path

extension SQLiteStore {
    /// The tagged columns for the slots with external binary storage of a row
    /// being inserted or updated, by slot; writes the files of large values.
    ///
    /// For an update, the row's current columns are read first (inside the
    /// save's transaction): a file they name is retired, to be removed after the
    /// commit, unless the new value is the same bytes, which keep their file.
    func externalColumns(of node: IncrementalStoreNode, mapping: TableLayout.EntityMapping, replacing: Bool,
                         files: ExternalDataFiles, connection: Connection) throws -> [Int: PropertyValue] {
        guard !mapping.externalSlots.isEmpty else { return [:] }
        let previous = replacing ? try currentExternalColumns(of: node.objectID, mapping: mapping, connection: connection) : [:]
        var columns: [Int: PropertyValue] = [:]
        for slot in mapping.externalSlots {
            let old = previous[slot] ?? nil
            let column: PropertyValue
            if case .data(let bytes) = node.values[slot] {
                column = .data(try externalStorage.column(for: bytes, previous: old, files: files))
            } else {
                column = node.values[slot]
            }
            if let old, let file = externalStorage.file(inColumn: old), column != .data(old) {
                files.retire(file)
            }
            columns[slot] = column
        }
        return columns
    }

    /// Retires the files named by a row about to be deleted.
    func retireExternalFiles(of objectID: ObjectID, mapping: TableLayout.EntityMapping, files: ExternalDataFiles,
                             connection: Connection) throws {
        for case let column? in try currentExternalColumns(of: objectID, mapping: mapping, connection: connection).values {
            if let file = externalStorage.file(inColumn: column) { files.retire(file) }
        }
    }

    /// Retires the files named in `columns` by the rows a batch request selects.
    func retireExternalFiles(selectedBy selection: BatchSelection, columns: [String], files: ExternalDataFiles,
                             connection: Connection) throws {
        guard !columns.isEmpty else { return }
        let list = columns.map { "t0.\($0)" }.joined(separator: ", ")
        let statement = try selection.prepare("SELECT \(list) FROM \(selection.table) t0\(selection.whereClause)", on: connection)
        while try statement.step() {
            for position in columns.indices {
                if let column = statement.data(at: Int32(position)), let file = externalStorage.file(inColumn: column) { files.retire(file) }
            }
        }
    }

    /// The columns with external binary storage of a row as the transaction sees them, by slot.
    private func currentExternalColumns(of objectID: ObjectID, mapping: TableLayout.EntityMapping,
                                        connection: Connection) throws -> [Int: Data?] {
        let names = mapping.externalSlots.compactMap { mapping.columns[$0]?.name }
        let statement = try connection.cachedStatement("SELECT \(names.joined(separator: ", ")) FROM \(mapping.table) WHERE Z_PK = ?")
        defer { statement.reset() }
        try statement.bind(objectID.primaryKey ?? 0, at: 1)
        guard try statement.step() else { return [:] }
        var columns: [Int: Data?] = [:]
        for (position, slot) in mapping.externalSlots.enumerated() {
            columns[slot] = statement.data(at: Int32(position))
        }
        return columns
    }
}

extension TableLayout {
    /// The columns with external binary storage of every entity stored in `table`.
    func externalColumns(inTable table: String) -> [String] {
        var names: Set<String> = []
        for mapping in mappings.values where mapping.table == table {
            for slot in mapping.externalSlots {
                if let name = mapping.columns[slot]?.name { names.insert(name) }
            }
        }
        return names.sorted()
    }
}
