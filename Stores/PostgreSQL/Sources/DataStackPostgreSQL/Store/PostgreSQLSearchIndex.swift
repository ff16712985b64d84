import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// The full-text index of one entity table: a side table `DS_SEARCH_<TABLE>`
/// with a `tsvector` per indexed column, built by the store from the tokens
/// the SQLite store's FTS5 index holds.
///
/// **Why the client tokenizes.** PostgreSQL's parsers split text otherwise than
/// SQLite's `unicode61 remove_diacritics 2` (`e-mail`, URLs, numbers with dots,
/// and its own case and accent rules), so a `to_tsvector` index would match
/// other rows. The store knows every text it writes: it tokenizes it with
/// ``ObjectGraph/SearchQuery/tokens(in:)`` — the in-memory evaluator's tokenizer,
/// which agrees with FTS5 byte for byte — and writes the tokens as a `tsvector`
/// literal (`'creme':1 'brulee':2`), which PostgreSQL stores as given: no parser,
/// no dictionary. Queries are `tsquery` literals of the same tokens (`'apple' <->
/// 'pi':*`), compared byte for byte too.
///
/// **Why a side table, not a column.** The entity tables keep Core Data's layout
/// exactly (a migration rebuilds them; another tool reads them); the side table
/// is the store's own, dropped and rebuilt whenever the model's indexed columns
/// change or the store migrates. One `tsvector` per column, with a GIN index
/// each, so a search of some attributes reads only theirs, as FTS5's column filter.
///
/// **Kept in the save's transaction.** A save, a batch insert and a batch update
/// re-index the rows they wrote (read back inside the transaction: one `SELECT`
/// and one `INSERT … ON CONFLICT DO UPDATE` per table); a delete of any writer
/// is followed by a statement trigger that forgets the rows. A rollback takes
/// the index's changes with it.
///
/// **Where PostgreSQL cannot hold a text exactly**, the row is marked
/// (`ZINEXACT`): a `tsvector` keeps positions up to 16,383, at most 256 of one
/// word, and words of at most 2,046 bytes. Every word is still there (a long one
/// cut to its first 2,046 bytes, which answers a query word of up to 2,042 bytes
/// as the whole word would), so word and prefix searches stay exact; a phrase
/// search or a relevance sort that reaches such a row throws rather than answer
/// from approximate positions.
struct PostgreSQLSearchIndex: Sendable {
    /// The entity table and its indexed columns.
    let index: StoreLayout.SearchIndex

    init(_ index: StoreLayout.SearchIndex) {
        self.index = index
    }

    /// `DS_SEARCH_<TABLE>`, unquoted.
    var sideTable: String { Self.sideTable(of: index.table) }

    static func sideTable(of table: String) -> String { "DS_SEARCH_" + table }

    /// What the bookkeeping table records for the index: it is rebuilt when this changes.
    var definition: String { "v1 " + index.columns.joined(separator: ",") }

    /// PostgreSQL's limits on a `tsvector` (`MAXENTRYPOS`, `MAXNUMPOS`, `MAXSTRLEN`, `MAXSTRPOS`).
    static let maximumPosition = 16_383
    static let maximumPositionsPerWord = 256
    static let maximumWordBytes = 2_046
    static let maximumVectorBytes = 1_048_575
    /// The longest query word answered exactly against a word cut to ``maximumWordBytes``
    /// (cut at a character boundary, so at least 2,043 bytes are kept).
    static let maximumQueryWordBytes = 2_042

    /// The SQLSTATE of the error a search raises when it reaches a row it cannot answer exactly.
    static let inexactRowSQLState = "DS001"

    // MARK: - Schema

    /// The bookkeeping table: one row per index, with its ``definition``.
    static let catalogTable = "DS_SEARCH_INDEXES"

    /// The functions every index shares; created (or replaced) when an index is built.
    static let functionStatements = [
        // Forgets deleted rows: a statement trigger per indexed table, whatever deletes them.
        """
        CREATE OR REPLACE FUNCTION ds_search_forget() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            EXECUTE format('DELETE FROM %I AS s USING ds_search_gone AS g WHERE s.z_pk = g.z_pk', TG_ARGV[0]);
            RETURN NULL;
        END $$
        """,
        // Raised by a phrase search or relevance sort that reaches a row it cannot answer exactly.
        """
        CREATE OR REPLACE FUNCTION ds_search_refuse(tbl text, pk bigint) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION USING ERRCODE = '\(inexactRowSQLState)', MESSAGE = format(
                'the search index of %s row %s holds more than a PostgreSQL tsvector places exactly '
                '(over 16,383 words, a word over 256 times, or a word over 2,046 bytes), so a phrase search '
                'or a relevance sort over it cannot answer as the SQLite store does', tbl, pk);
        END $$
        """,
        // How many times a term (its tokens one after the other, the last one a prefix when `prefix`)
        // occurs in a column: SearchAtom.occurrenceCount, overlapping occurrences included.
        """
        CREATE OR REPLACE FUNCTION ds_search_occurrences(v tsvector, tokens text[], prefix boolean) RETURNS bigint
        LANGUAGE sql IMMUTABLE STRICT AS $$
            WITH tp AS (SELECT u.lexeme, p::int AS p FROM unnest(v) AS u, unnest(u.positions) AS p)
            SELECT count(*) FROM tp AS f
            WHERE (CASE WHEN prefix AND cardinality(tokens) = 1 THEN starts_with(f.lexeme, tokens[1]) ELSE f.lexeme = tokens[1] END)
              AND NOT EXISTS (SELECT 1 FROM generate_series(2, cardinality(tokens)) AS j
                  WHERE NOT EXISTS (SELECT 1 FROM tp AS o WHERE o.p = f.p + j - 1
                      AND (CASE WHEN prefix AND j = cardinality(tokens) THEN starts_with(o.lexeme, tokens[j])
                           ELSE o.lexeme = tokens[j] END)))
        $$
        """,
        // SearchQuery.relevance of one column that matches: BM25's term-frequency part over the
        // positive terms, in their order, with the same float8 operations as the Swift code.
        """
        CREATE OR REPLACE FUNCTION ds_search_relevance(v tsvector, q jsonb) RETURNS float8
        LANGUAGE sql IMMUTABLE STRICT AS $$
            SELECT COALESCE(sum(t.tf * 2.2::float8 / (t.tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * d.len / 10::float8))), 0::float8)
            FROM (SELECT count(*)::float8 AS len FROM unnest(v) AS u, unnest(u.positions) AS p) AS d,
                 LATERAL (SELECT ds_search_occurrences(v, ARRAY(SELECT jsonb_array_elements_text(q->'t'->(i - 1))),
                                                       (q->'p'->>(i - 1))::boolean)::float8 AS tf
                          FROM generate_series(1, jsonb_array_length(q->'t')) AS i
                          WHERE (q->'r'->>(i - 1))::boolean ORDER BY i) AS t
        $$
        """,
    ]

    /// The side table, its GIN indexes and its delete trigger.
    var creationStatements: [String] {
        let vectors = index.columns.map { "\($0) TSVECTOR NOT NULL DEFAULT ''" }.joined(separator: ", ")
        let folded = PostgreSQLDialect().unquotedIdentifierFolding(sideTable)
        return ["CREATE TABLE \(sideTable) (Z_PK BIGINT PRIMARY KEY, ZINEXACT BOOLEAN NOT NULL DEFAULT FALSE, \(vectors))"]
            + index.columns.map { "CREATE INDEX \(sideTable)_\($0) ON \(sideTable) USING GIN (\($0))" }
            + ["""
               CREATE TRIGGER ds_search_forget AFTER DELETE ON \(index.table) REFERENCING OLD TABLE AS ds_search_gone \
               FOR EACH STATEMENT EXECUTE FUNCTION ds_search_forget('\(folded)')
               """]
    }

    // MARK: - Indexing rows

    /// Rows re-indexed per statement.
    static let rowsPerStatement = 2_048

    /// Indexes the rows with `keys` as they are now in the transaction (rows
    /// gone meanwhile are skipped): one read of their texts and one upsert per
    /// ``rowsPerStatement`` rows.
    ///
    /// - Throws: ``PostgreSQLSearchIndexError`` for a text PostgreSQL cannot hold in a `tsvector`.
    func reindex(keys: [Int64], _ connection: PostgreSQLConnection) throws {
        let unique = Array(Set(keys)).sorted()
        var start = 0
        while start < unique.count {
            let chunk = Array(unique[start..<min(start + Self.rowsPerStatement, unique.count)])
            let result = try connection.execute(cached: "SELECT Z_PK, \(index.columns.joined(separator: ", ")) FROM \(index.table) WHERE Z_PK = ANY($1::bigint[])",
                                                [.text("{" + chunk.map(String.init).joined(separator: ",") + "}")])
            try write(result, connection)
            start += Self.rowsPerStatement
        }
    }

    /// Empties the side table and indexes every row of the entity table.
    func rebuild(_ connection: PostgreSQLConnection) throws {
        _ = try connection.execute("DELETE FROM \(sideTable)")
        var last = Int64.min
        while true {
            let result = try connection.execute(cached: """
                SELECT Z_PK, \(index.columns.joined(separator: ", ")) FROM \(index.table) WHERE Z_PK > $1 ORDER BY Z_PK LIMIT \(Self.rowsPerStatement)
                """, [PostgreSQLValue(last)])
            guard result.rowCount > 0 else { return }
            try write(result, connection)
            guard let key = try result.int64(row: result.rowCount - 1, column: 0) else { return }
            last = key
        }
    }

    /// Writes the vectors of the rows `result` holds (`Z_PK` then the indexed columns).
    private func write(_ result: PostgreSQLResult, _ connection: PostgreSQLConnection) throws {
        guard result.rowCount > 0 else { return }
        var rows: [[String]] = []
        rows.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            guard let key = try result.int64(row: row, column: 0) else { continue }
            var inexact = false
            var values = [String(key), ""]
            for (offset, column) in index.columns.enumerated() {
                let vector = try Self.vector(of: result.string(row: row, column: offset + 1), table: index.table, column: column, key: key)
                inexact = inexact || vector.isInexact
                values.append(vector.literal)
            }
            values[1] = inexact ? "true" : "false"
            rows.append(values)
        }
        let data = try JSONEncoder().encode(rows)
        let columns = index.columns
        let selected = columns.enumerated().map { "(r->>\($0.offset + 2))::tsvector" }.joined(separator: ", ")
        let updates = (["ZINEXACT"] + columns).map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        // A row whose texts did not change (a save that set a price) is not written again.
        let changed = (["ZINEXACT"] + columns).map { "\(sideTable).\($0) IS DISTINCT FROM EXCLUDED.\($0)" }.joined(separator: " OR ")
        _ = try connection.execute(cached: """
            INSERT INTO \(sideTable) (Z_PK, ZINEXACT, \(columns.joined(separator: ", "))) \
            SELECT (r->>0)::bigint, (r->>1)::boolean, \(selected) FROM jsonb_array_elements($1::jsonb) AS r \
            ON CONFLICT (Z_PK) DO UPDATE SET \(updates) WHERE \(changed)
            """, [.text(String(decoding: data, as: UTF8.self))])
    }

    /// A text's `tsvector` literal: each distinct token (by its bytes) with its
    /// positions, from 1. Nil text is the empty vector, which matches nothing.
    static func vector(of text: String?, table: String, column: String, key: Int64) throws -> (literal: String, isInexact: Bool) {
        guard let text else { return ("", false) }
        var order: [Lexeme] = []
        var positions: [Lexeme: [Int]] = [:]
        var inexact = false
        for (offset, token) in SearchQuery.tokens(in: text).enumerated() {
            var lexeme = Lexeme(token)
            if token.utf8.count > maximumWordBytes {
                lexeme = Lexeme(String(decoding: truncated(Array(token.utf8), to: maximumWordBytes), as: UTF8.self))
                inexact = true
            }
            var position = offset + 1
            if position > maximumPosition {
                position = maximumPosition
                inexact = true
            }
            if let index = positions.index(forKey: lexeme) {
                let last = positions.values[index].last
                if last == position { continue }
                if positions.values[index].count == maximumPositionsPerWord {
                    inexact = true
                } else {
                    positions.values[index].append(position)
                }
            } else {
                order.append(lexeme)
                positions[lexeme] = [position]
            }
        }
        let size = order.reduce(0) { $0 + $1.text.utf8.count }
        if size > maximumVectorBytes {
            throw PostgreSQLSearchIndexError(message: """
                \(table).\(column) of row \(key) has \(size) bytes of distinct words, and a PostgreSQL tsvector holds at most \
                \(maximumVectorBytes): it can't be indexed for search
                """)
        }
        var literal = ""
        literal.reserveCapacity(size + order.count * 8)
        for lexeme in order {
            if !literal.isEmpty { literal += " " }
            literal += quoted(lexeme.text)
            var separator = ":"
            for position in positions[lexeme] ?? [] {
                literal += separator
                literal += String(position)
                separator = ","
            }
        }
        return (literal, inexact)
    }

    /// A token compared by its bytes, as PostgreSQL compares lexemes: `String`'s own
    /// `==` would merge canonically equivalent tokens that FTS5 keeps apart.
    private struct Lexeme: Hashable {
        let text: String
        init(_ text: String) { self.text = text }
        static func == (a: Lexeme, b: Lexeme) -> Bool { a.text.utf8.elementsEqual(b.text.utf8) }
        func hash(into hasher: inout Hasher) {
            var text = text   // withUTF8 needs a mutable string; the copy shares a native string's storage
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// A token as a quoted lexeme of a `tsvector` or `tsquery` literal: `'` and `\` doubled.
    static func quoted(_ token: String) -> String {
        guard token.utf8.contains(where: { $0 == UInt8(ascii: "'") || $0 == UInt8(ascii: "\\") }) else { return "'" + token + "'" }
        return "'" + token.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// The longest prefix of `bytes` (UTF-8) of at most `limit` bytes that ends at a character.
    private static func truncated(_ bytes: [UInt8], to limit: Int) -> [UInt8] {
        var end = limit
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }
}

/// A text the PostgreSQL store cannot index for search: more than a
/// `tsvector` holds. The save or batch that wrote it is rolled back.
public struct PostgreSQLSearchIndexError: Error, CustomStringConvertible, Sendable {
    /// What cannot be indexed, and where.
    public let message: String
    public var description: String { message }
}
