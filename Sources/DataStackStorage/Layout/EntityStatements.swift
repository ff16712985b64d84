@_spi(StoreImplementation) import ObjectGraph
/// The SQL that saves rows of one entity, built once when the store opens:
/// one prepared INSERT, UPDATE and DELETE per entity, reused for every row of
/// every save and bound by position (SPEC §5) — and the INSERT of several
/// rows at once (``insertSQL(rows:)``): prepared once for 32 rows
/// (``insertRowsSQL``), which the SQLite store uses for an import's runs of
/// new rows, and per save for the sizes a store across a network batches.
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
    /// ``insertSQL(rows:)`` of ``rowsPerInsert`` rows: a statement's start
    /// and end, and SQLite's descent of the table's B-tree to the place of its
    /// first row, shared by all of them.
    package let insertRowsSQL: String
    /// How many rows ``insertRowsSQL`` inserts: 32, fewer when rows have many
    /// columns (999 parameters at most, the limit of SQLite before 3.32); 1
    /// when a row has over 499.
    package let rowsPerInsert: Int
    /// `INSERT INTO T (Z_PK, Z_ENT, Z_OPT, …) VALUES `.
    let insertPrefix: String
    /// The parameters of one inserted row: its key and its columns.
    package let insertParametersPerRow: Int
    /// The entity's `Z_ENT`, written into the INSERTs' text.
    private let entityNumber: Int64
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
        let insertPrefix = "INSERT INTO \(table) (\(allNames.joined(separator: ", "))) VALUES "
        self.insertPrefix = insertPrefix
        self.entityNumber = entityNumber
        insertParametersPerRow = 1 + names.count
        insertSQL = Self.insertSQL(prefix: insertPrefix, rows: 1, entityNumber: entityNumber, columns: names.count, dialect: dialect)
        updateSQL = Self.updateSQL(table: table, names: names, dialect: dialect)
        var placeholders = Placeholders(dialect)
        deleteSQL = "DELETE FROM \(table) WHERE Z_PK = \(placeholders.next()) AND Z_OPT = \(placeholders.next())"
        rowsPerInsert = max(1, min(32, 999 / insertParametersPerRow))
        insertRowsSQL = Self.insertSQL(prefix: insertPrefix, rows: rowsPerInsert, entityNumber: entityNumber,
                                       columns: names.count, dialect: dialect)
    }

    /// The INSERT of `rows` new rows, `VALUES (…), (…)`: each row its key,
    /// then the entity's number and version 1 as they are (the same for every
    /// new row: written in the text, not bound per row), then its columns.
    /// Bound in that order, ``insertParametersPerRow`` parameters a row.
    package func insertSQL(rows: Int) -> String {
        Self.insertSQL(prefix: insertPrefix, rows: rows, entityNumber: entityNumber, columns: insertParametersPerRow - 1,
                       dialect: dialect)
    }

    private static func insertSQL(prefix: String, rows: Int, entityNumber: Int64, columns: Int, dialect: any SQLDialect) -> String {
        var placeholders = Placeholders(dialect)
        func row() -> String {
            "(" + ([placeholders.next(), "\(entityNumber)", "1"] + (0..<columns).map { _ in placeholders.next() }).joined(separator: ", ") + ")"
        }
        return prefix + (0..<rows).map { _ in row() }.joined(separator: ", ")
    }

    /// `UPDATE T SET Z_OPT = ?, … WHERE Z_PK = ? AND Z_OPT = ?`, setting `names` after `Z_OPT`.
    private static func updateSQL(table: String, names: [String], dialect: any SQLDialect) -> String {
        var placeholders = Placeholders(dialect)
        let assignments = (["Z_OPT"] + names).map { "\($0) = \(placeholders.next())" }.joined(separator: ", ")
        return "UPDATE \(table) SET \(assignments) WHERE Z_PK = \(placeholders.next()) AND Z_OPT = \(placeholders.next())"
    }

    /// The dialect's placeholders, numbered in the order they are written.
    private struct Placeholders {
        let dialect: any SQLDialect
        private var count = 0

        init(_ dialect: any SQLDialect) { self.dialect = dialect }

        mutating func next() -> String {
            count += 1
            return dialect.orderedPlaceholder(count)
        }
    }

    /// An UPDATE like ``updateSQL`` that writes only the `changed` slots
    /// (and `Z_OPT`), with the written slots in binding order: an unchanged
    /// column is not written, so its indexes (a unique key's) are not
    /// touched. Bound as ``updateSQL`` is: `Z_OPT`, the slots, their entity
    /// columns, then the key and the version read.
    package func updateSQL(writing changed: SlotMask) -> (sql: String, writable: [WritableSlot]) {
        let written = writable.filter { changed.contains($0.slot) }
        let names = written.map(\.column.name) + written.compactMap(\.entityColumn)
        return (Self.updateSQL(table: table, names: names, dialect: dialect), written)
    }
}
