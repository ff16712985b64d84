/// A SQLite setting a store applies to each of its connections
/// (`PRAGMA name = value`), as ``StoreOptions/pragmas`` lists them.
///
/// ```swift
/// var options = StoreOptions()
/// options.pragmas = [.pageSize(8192), .cacheSize(kibibytes: 64_000),
///                    try .custom(name: "secure_delete", value: true)]
/// ```
///
/// The well-known pragmas take typed values; ``custom(name:value:)`` sets any
/// other, and checks its name and value first, because both are written into
/// the SQL text (SQLite cannot bind a pragma's value). So every pragma that
/// exists is safe to run.
///
/// Related SQLite documentation: <https://sqlite.org/pragma.html>
///
/// ## Topics
/// - ``pageSize(_:)``
/// - ``cacheSize(pages:)``
/// - ``cacheSize(kibibytes:)``
/// - ``walAutocheckpoint(pages:)``
/// - ``mmapSize(bytes:)``
/// - ``custom(name:value:)``
/// - ``Value``
/// - ``SQLitePragmaError``
public struct SQLitePragma: Sendable, Hashable {
    /// The pragma's name, as SQLite spells it (`cache_size`).
    public let name: String
    /// What the pragma is set to.
    public let value: Value

    /// Only for names and values known to be safe: the well-known pragmas, and
    /// ``custom(name:value:)`` once it has checked them.
    private init(checkedName name: String, value: Value) {
        self.name = name
        self.value = value
    }

    /// Any pragma, by name.
    ///
    /// ```swift
    /// let pragma = try SQLitePragma.custom(name: "secure_delete", value: "FAST")
    /// ```
    ///
    /// - Parameters:
    ///   - name: Letters, digits and `_`, not starting with a digit (`user_version`).
    ///   - value: An integer, a Boolean (`ON`/`OFF`), or a keyword of letters,
    ///     digits, `_`, `.` and `-` (`FAST`, `-4000`).
    /// - Throws: ``SQLitePragmaError`` naming the pragma, for a name or value
    ///   outside those characters, and for `journal_mode`, `synchronous` and
    ///   `busy_timeout`, which ``StoreOptions`` sets with typed options.
    public static func custom(name: String, value: Value) throws(SQLitePragmaError) -> SQLitePragma {
        guard isName(name) else {
            throw SQLitePragmaError(.invalidName, name: name, value: value.sql,
                                    message: "a pragma's name is letters, digits and '_', not starting with a digit")
        }
        guard isValue(value.sql) else {
            throw SQLitePragmaError(.invalidValue, name: name, value: value.sql,
                                    message: "a pragma's value is letters, digits, '_', '.' and '-' only")
        }
        if let option = typedOptions[name.lowercased()] {
            throw SQLitePragmaError(.setByStoreOptions, name: name, value: value.sql, message: "the store sets it from StoreOptions.\(option); set that instead")
        }
        return SQLitePragma(checkedName: name, value: value)
    }

    /// The pragmas a store sets from typed options, by the option's name: the
    /// journal mode and synchronous level run after the pragmas and would undo
    /// one, and a `busy_timeout` would replace the busy mode's handler.
    private static let typedOptions = ["journal_mode": "journalMode", "synchronous": "synchronous", "busy_timeout": "busyMode"]

    // MARK: - Well-known pragmas

    /// The page size, in bytes, of a new database (`PRAGMA page_size`).
    ///
    /// It applies only to a store created by the connection: an existing
    /// file keeps its page size (changing it takes a `VACUUM`). SQLite ignores
    /// a size that is not a power of two from 512 to 65536. SQLite's default is 4096.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_page_size>
    public static func pageSize(_ bytes: Int) -> SQLitePragma {
        SQLitePragma(checkedName: "page_size", value: .integer(bytes))
    }

    /// How many database pages each connection keeps in memory (`PRAGMA cache_size`).
    /// Values below 0 count as 0. SQLite's default is about 2 MB
    /// (`cacheSize(kibibytes: 2000)`).
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_cache_size>
    public static func cacheSize(pages: Int) -> SQLitePragma {
        SQLitePragma(checkedName: "cache_size", value: .integer(max(0, pages)))
    }

    /// How much memory each connection's page cache may take, whatever the
    /// page size (`PRAGMA cache_size` with a negative value). Values below 0
    /// count as 0.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_cache_size>
    public static func cacheSize(kibibytes: Int) -> SQLitePragma {
        SQLitePragma(checkedName: "cache_size", value: .integer(-max(0, kibibytes)))
    }

    /// How many pages the write-ahead log grows to before a commit folds it
    /// back into the database (`PRAGMA wal_autocheckpoint`); 0 turns
    /// automatic checkpoints off. Values below 0 count as 0. SQLite's default is 1000.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_wal_autocheckpoint>
    public static func walAutocheckpoint(pages: Int) -> SQLitePragma {
        SQLitePragma(checkedName: "wal_autocheckpoint", value: .integer(max(0, pages)))
    }

    /// How many bytes of the database file SQLite reads through memory-mapped
    /// I/O (`PRAGMA mmap_size`); 0, SQLite's usual default, turns it off.
    /// Values below 0 count as 0.
    ///
    /// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_mmap_size>
    public static func mmapSize(bytes: Int) -> SQLitePragma {
        SQLitePragma(checkedName: "mmap_size", value: .integer(max(0, bytes)))
    }
}

// MARK: - Values

extension SQLitePragma {
    /// The value a pragma is set to: an integer, a Boolean or a keyword,
    /// written as a literal of either.
    ///
    /// ```swift
    /// try SQLitePragma.custom(name: "user_version", value: 7)
    /// try SQLitePragma.custom(name: "recursive_triggers", value: true)   // ON
    /// try SQLitePragma.custom(name: "secure_delete", value: "FAST")
    /// ```
    public struct Value: Sendable, Hashable {
        /// The value as written into the `PRAGMA` statement.
        package let sql: String

        /// An integer, in decimal.
        public static func integer(_ value: Int) -> Value { Value(sql: String(value)) }
        /// `ON` or `OFF`.
        public static func bool(_ value: Bool) -> Value { Value(sql: value ? "ON" : "OFF") }
        /// A keyword such as `FAST` or `INCREMENTAL`, checked by
        /// ``SQLitePragma/custom(name:value:)``.
        public static func keyword(_ word: String) -> Value { Value(sql: word) }
    }
}

extension SQLitePragma.Value: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int) { self = .integer(value) }
}

extension SQLitePragma.Value: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension SQLitePragma.Value: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .keyword(value) }
}

extension SQLitePragma.Value: CustomStringConvertible {
    /// The value as SQLite reads it: `-4000`, `ON`, `FAST`.
    public var description: String { sql }
}

extension SQLitePragma: CustomStringConvertible {
    /// The statement that applies it: `PRAGMA cache_size = -4000`.
    public var description: String { "PRAGMA \(name) = \(value.sql)" }
}

// MARK: - Checking names and values

extension SQLitePragma {
    /// `^[A-Za-z_][A-Za-z0-9_]*$`
    static func isName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isLetter(first) || first == UInt8(ascii: "_") else { return false }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    /// `^[A-Za-z0-9_.-]+$`
    static func isValue(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.allSatisfy {
            isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
