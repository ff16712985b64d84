import CSQLite

/// A column of a table, as `PRAGMA table_info` reports it.
///
/// The store reads a file's real schema with it instead of assuming column
/// names, because stores written by Core Data rename colliding columns.
package struct ColumnInfo: Sendable, Equatable {
    /// The column name, as declared.
    package var name: String
    /// The declared type (`"INTEGER"`, `"VARCHAR"`, or `""` when none was given).
    package var declaredType: String
    /// Whether the column has a NOT NULL constraint.
    package var isNotNull: Bool
    /// Whether the column is part of the table's primary key.
    package var isPrimaryKey: Bool

    package init(name: String, declaredType: String, isNotNull: Bool, isPrimaryKey: Bool) {
        self.name = name
        self.declaredType = declaredType
        self.isNotNull = isNotNull
        self.isPrimaryKey = isPrimaryKey
    }
}

// MARK: - Schema

extension Connection {
    /// Whether the main database has a table named `name` (case-insensitive, as
    /// SQLite compares identifiers).
    package func tableExists(_ name: String) throws -> Bool {
        let statement = try cachedStatement(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE")
        defer { statement.reset() }
        try statement.bind(name, at: 1)
        return try statement.step()
    }

    /// The columns of `table` in declaration order; empty when there is no such table.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_table_info>
    package func columns(in table: String) throws -> [ColumnInfo] {
        // PRAGMA arguments cannot be bound: quote the name as an identifier.
        let statement = try prepare("PRAGMA table_info(\(Self.quotedIdentifier(table)))")
        var columns: [ColumnInfo] = []
        // Row: cid, name, type, notnull, dflt_value, pk (1-based position in the key, or 0).
        while try statement.step() {
            columns.append(ColumnInfo(
                name: statement.string(at: 1) ?? "",
                declaredType: statement.string(at: 2) ?? "",
                isNotNull: statement.int64(at: 3) != 0,
                isPrimaryKey: statement.int64(at: 5) != 0))
        }
        return columns
    }

    /// The names of the indexes on `table`, including those SQLite creates for
    /// UNIQUE and PRIMARY KEY constraints (`sqlite_autoindex_…`); empty when
    /// there is no such table.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_index_list>
    package func indexNames(on table: String) throws -> [String] {
        let statement = try prepare("PRAGMA index_list(\(Self.quotedIdentifier(table)))")
        var names: [String] = []
        // Row: seq, name, unique, origin, partial.
        while try statement.step() {
            if let name = statement.string(at: 1) { names.append(name) }
        }
        return names
    }

    /// `name` as an SQL identifier: wrapped in double quotes, with each double
    /// quote inside it doubled, so any text names exactly one table.
    package static func quotedIdentifier(_ name: String) -> String {
        var quoted = "\""
        quoted.reserveCapacity(name.utf8.count + 2)
        for character in name.unicodeScalars {
            if character == "\"" { quoted.unicodeScalars.append("\"") }
            quoted.unicodeScalars.append(character)
        }
        quoted.unicodeScalars.append("\"")
        return quoted
    }
}

// MARK: - Maintenance

extension Connection {
    /// How much a checkpoint may wait for, from never to the whole WAL being emptied.
    ///
    /// Related SQLite documentation: <https://sqlite.org/c3ref/wal_checkpoint_v2.html>
    package enum CheckpointMode: Int32, Sendable {
        /// Copies what it can without waiting for any reader or writer.
        case passive = 0
        /// Waits (busy handler) for the writer, then copies every frame.
        case full = 1
        /// Like `full`, then waits for readers so the next writer restarts the WAL.
        case restart = 2
        /// Like `restart`, and truncates the WAL file to zero bytes.
        case truncate = 3
    }

    /// Copies WAL frames into the database file.
    ///
    /// - Returns: The frames in the WAL and how many were copied (both `-1` when
    ///   the database is not in WAL mode).
    /// - Throws: ``SQLiteError/SQLITE_BUSY`` when a mode other than `passive`
    ///   cannot get the locks it waits for within the busy timeout.
    @discardableResult
    package func checkpoint(mode: CheckpointMode = .passive) throws -> (walFrameCount: Int, checkpointedFrameCount: Int) {
        var walFrames: Int32 = 0
        var checkpointed: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(db, nil, mode.rawValue, &walFrames, &checkpointed)
        guard code == SQLITE_OK else {
            throw SQLiteError(db: db, code: code, sql: nil)
        }
        return (Int(walFrames), Int(checkpointed))
    }

    /// The problems `PRAGMA integrity_check` finds, or `["ok"]` when there are none.
    ///
    /// Reads the whole database: O(size of the file).
    ///
    /// - Throws: ``SQLiteError`` when the file is too damaged to check
    ///   (``SQLiteError/SQLITE_CORRUPT``, ``SQLiteError/SQLITE_NOTADB``).
    package func integrityCheck() throws -> [String] {
        let statement = try prepare("PRAGMA integrity_check")
        var messages: [String] = []
        while try statement.step() {
            messages.append(statement.string(at: 0) ?? "")
        }
        return messages
    }
}
