@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage

extension TableLayout {
    /// The indexes of every entity table of a file, by table name as the
    /// file spells it.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragfunc>
    package static func existingIndexes(_ connection: Connection) throws -> [String: [ExistingIndex]] {
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
}
