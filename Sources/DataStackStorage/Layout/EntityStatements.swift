@_spi(StoreImplementation) import ObjectGraph
/// The SQL that saves rows of one entity, built once when the store opens:
/// one prepared INSERT, UPDATE and DELETE per entity, reused for every row of
/// every save and bound by position (SPEC §5) — and the INSERT again for a
/// run of rows at once (``insertRowsSQL``), which the SQLite store uses for
/// an import's runs of new rows.
package struct EntityStatements: Sendable {
    /// A slot the entity writes, its column, and a to-one's entity column.
    package struct WritableSlot: Sendable {
        package let slot: Int
        let column: TableLayout.Column
        package let entityColumn: String?
        /// Whether the column uses external binary storage: its value is tagged (ExternalBinaryStorage.swift).
        package let storesExternally: Bool
    }

    /// The written slots, in binding order (entity columns follow all slots).
    package let writable: [WritableSlot]
    /// `INSERT INTO T (Z_PK, Z_ENT, Z_OPT, …) VALUES (?, <entity>, 1, ?, …)`:
    /// the entity's number and a new row's version are the same for every
    /// row, written in the text rather than bound per row (two binds a row,
    /// ~250 instructions an inserted object).
    package let insertSQL: String
    /// ``insertSQL`` for ``rowsPerInsert`` rows, `VALUES (…), (…)`, numbered
    /// on: a statement's start and end, and SQLite's descent of the table's
    /// B-tree to the place of its first row, shared by all of them.
    package let insertRowsSQL: String
    /// How many rows ``insertRowsSQL`` inserts: 32, fewer when rows have many
    /// columns (999 parameters at most, the limit of SQLite before 3.32); 1
    /// when a row has over 499.
    package let rowsPerInsert: Int
    /// `INSERT INTO T (Z_PK, Z_ENT, Z_OPT, …) VALUES`, for rows of several at once.
    let insertPrefix: String
    /// The values of one inserted row.
    let insertColumnCount: Int
    /// `UPDATE T SET Z_OPT = ?, … WHERE Z_PK = ? AND Z_OPT = ?`.
    package let updateSQL: String
    /// `DELETE FROM T WHERE Z_PK = ? AND Z_OPT = ?`.
    package let deleteSQL: String
    private let table: String
    private let dialect: any SQLDialect

    /// - Parameters:
    ///   - columns: the column of each slot of the entity (nil: none).
    ///   - externalSlots: the slots whose columns use external binary storage.
    ///   - entityNumber: the entity's `Z_ENT`, written into ``insertSQL``.
    ///   - dialect: writes the placeholders, numbered in order (``SQLDialect/orderedPlaceholder(_:)``).
    init(table: String, columns: [TableLayout.Column?], entityNumber: Int64, externalSlots: Set<Int> = [],
         dialect: any SQLDialect = SQLiteDialect()) {
        let writable: [WritableSlot] = columns.enumerated().compactMap { slot, column in
            guard let column else { return nil }
            if case .toOne(let entityColumn) = column.kind {
                return WritableSlot(slot: slot, column: column, entityColumn: entityColumn, storesExternally: false)
            }
            return WritableSlot(slot: slot, column: column, entityColumn: nil, storesExternally: externalSlots.contains(slot))
        }
        self.writable = writable
        self.table = table
        self.dialect = dialect
        let names = writable.map(\.column.name) + writable.compactMap(\.entityColumn)
        let allNames = ["Z_PK", "Z_ENT", "Z_OPT"] + names
        var count = 0
        func next() -> String {
            count += 1
            return dialect.orderedPlaceholder(count)
        }
        insertPrefix = "INSERT INTO \(table) (\(allNames.joined(separator: ", "))) VALUES "
        insertColumnCount = allNames.count
        // A new row's values: its key, then its entity's number and version 1 as they are, then its columns.
        func row() -> String { "(" + ([next(), "\(entityNumber)", "1"] + names.map { _ in next() }).joined(separator: ", ") + ")" }
        insertSQL = insertPrefix + row()
        count = 0
        let assignments = (["Z_OPT"] + names).map { "\($0) = \(next())" }.joined(separator: ", ")
        updateSQL = "UPDATE \(table) SET \(assignments) WHERE Z_PK = \(next()) AND Z_OPT = \(next())"
        count = 0
        deleteSQL = "DELETE FROM \(table) WHERE Z_PK = \(next()) AND Z_OPT = \(next())"
        count = 0
        rowsPerInsert = max(1, min(32, 999 / (1 + names.count)))
        insertRowsSQL = insertPrefix + (0..<rowsPerInsert).map { _ in row() }.joined(separator: ", ")
    }

    /// An UPDATE like ``updateSQL`` that writes only the `changed` slots
    /// (and `Z_OPT`), with the written slots in binding order: an unchanged
    /// column is not written, so its indexes (a unique key's) are not
    /// touched. Bound as ``updateSQL`` is: `Z_OPT`, the slots, their entity
    /// columns, then the key and the version read.
    package func updateSQL(writing changed: SlotMask) -> (sql: String, writable: [WritableSlot]) {
        let written = writable.filter { changed.contains($0.slot) }
        let names = written.map(\.column.name) + written.compactMap(\.entityColumn)
        var count = 0
        func next() -> String {
            count += 1
            return dialect.orderedPlaceholder(count)
        }
        let assignments = (["Z_OPT"] + names).map { "\($0) = \(next())" }.joined(separator: ", ")
        return ("UPDATE \(table) SET \(assignments) WHERE Z_PK = \(next()) AND Z_OPT = \(next())", written)
    }
}
