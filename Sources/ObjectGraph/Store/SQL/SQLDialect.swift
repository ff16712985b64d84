import Foundation

/// The SQL language a store speaks: what the predicate compiler and the
/// layout's statements write where SQLite and PostgreSQL differ.
///
/// One compiler serves both (``FetchPredicate``'s SQL, sorts, the select of a
/// fetch); only the spellings below change. Both stores keep values in the
/// same storage form (``PredicateScalar/binding(for:)``: dates as seconds
/// since 2001, booleans as 0/1, UUIDs as 16 bytes), so a predicate means the
/// same on either.
public enum SQLDialect: Sendable, Hashable {
    /// SQLite, with the `DS_` functions the store installs on each connection.
    case sqlite
    /// PostgreSQL (12 or later): `$n` parameters with explicit types, real
    /// booleans, and the string operators written with its built-in functions.
    case postgreSQL

    /// The placeholder of parameter `number` (from 1): `?1`, or `$1`.
    func placeholder(_ number: Int) -> String {
        self == .sqlite ? "?\(number)" : "$\(number)"
    }

    /// The placeholder of parameter `number`, typed for PostgreSQL by the
    /// value bound to it, which its planner cannot always infer (`$1 = $2`).
    func parameter(_ number: Int, boundTo value: PropertyValue) -> String {
        guard self == .postgreSQL else { return placeholder(number) }
        switch value {
        case .integer, .bool, .object: return "$\(number)::bigint"
        case .double, .date, .decimal: return "$\(number)::float8"
        case .data, .uuid: return "$\(number)::bytea"
        case .string, .uri: return "$\(number)::text"
        case .null, .objects: return "$\(number)"
        }
    }

    /// The constant true, and false.
    var trueSQL: String { self == .sqlite ? "1" : "TRUE" }
    var falseSQL: String { self == .sqlite ? "0" : "FALSE" }

    /// `condition` is true (not false, not NULL), as a value that is never NULL.
    func isTrue(_ condition: String) -> String {
        self == .sqlite ? "(\(condition)) IS 1" : "(\(condition)) IS TRUE"
    }

    /// `condition` is false or NULL.
    func isNotTrue(_ condition: String) -> String {
        self == .sqlite ? "(\(condition)) IS NOT 1" : "(\(condition)) IS NOT TRUE"
    }

    /// The declared type of a column that Core Data declares `declared`
    /// (`SQLiteSchema.declaredType(of:)`), holding the storage form both
    /// stores share. SQLite keeps Core Data's declarations, which Core Data
    /// reads back; PostgreSQL needs real types for the same values.
    func columnType(declared: String) -> String {
        guard self == .postgreSQL else { return declared }
        switch declared {
        case "INTEGER": return "BIGINT"
        case "TIMESTAMP", "FLOAT", "DECIMAL": return "DOUBLE PRECISION"
        case "VARCHAR": return "TEXT"
        default: return "BYTEA"
        }
    }

    /// The declared type of primary keys, foreign keys and `Z_ENT`/`Z_OPT`.
    var keyType: String { self == .sqlite ? "INTEGER" : "BIGINT" }
}
