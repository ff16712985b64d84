/// A statement parameter or a COPY field: NULL, text, or raw bytes.
///
/// Text is sent in PostgreSQL's text format and the server infers its type from the
/// statement (`$1::int8`, or the column it is compared with or stored in). Bytes are
/// sent in binary format as `bytea` (type OID 17), so they are never escaped.
///
/// ```swift
/// try connection.execute(
///     "INSERT INTO item (id, price, photo, note) VALUES ($1, $2, $3, $4)",
///     [PostgreSQLValue(42), PostgreSQLValue(9.99), .bytes(jpeg), .null])
/// ```
///
/// ## Topics
///
/// - ``init(_:)-(Int64)``
/// - ``init(_:)-(Double)``
/// - ``init(_:)-(Bool)``
public enum PostgreSQLValue: Sendable, Hashable {
    /// SQL NULL.
    case null
    /// A value in PostgreSQL's text format. Must not contain a NUL character:
    /// PostgreSQL text cannot hold one, and executing such a value throws.
    case text(String)
    /// A `bytea` value, sent in binary format.
    case bytes([UInt8])
}

// MARK: - Convenience initializers

extension PostgreSQLValue {
    /// An integer, as decimal text.
    public init(_ int: Int64) {
        self = .text(String(int))
    }

    /// A double, as text that reads back as exactly the same double.
    ///
    /// Swift's description is the shortest text that round-trips (`0.1`, `1e-300`,
    /// `-0.0`), and PostgreSQL 12+ prints `float8` the same way, so a value written and
    /// read back is bit-for-bit equal. Infinities and NaN use PostgreSQL's spellings
    /// `Infinity`, `-Infinity` and `NaN`.
    public init(_ double: Double) {
        if double.isNaN {
            self = .text("NaN")
        } else if double.isInfinite {
            self = .text(double < 0 ? "-Infinity" : "Infinity")
        } else {
            self = .text("\(double)")
        }
    }

    /// A boolean, as `true` or `false`.
    public init(_ bool: Bool) {
        self = .text(bool ? "true" : "false")
    }
}
