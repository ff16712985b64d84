/// A full-text search query: words and phrases joined by AND, OR and NOT.
///
/// ```swift
/// let query = try SearchQuery("apple pie OR \"crème brûlée\" NOT chocolat*")
/// query.matches(["Grandma's Creme Brulee", nil])           // true
/// query.snippet(of: "The best crème brûlée in town")      // "The best [crème brûlée] in town"
/// ```
///
/// The store indexes String attributes with SQLite FTS5 and runs the query
/// there as ``fts5Expression``; the in-memory store and unsaved objects run
/// the same query with ``matches(_:)``. Both tokenize with
/// ``SearchTokenizer`` (SQLite's `unicode61 remove_diacritics 2`), so they
/// find the same objects: case and diacritics never matter (`Crème` matches
/// `creme`), and punctuation separates words (`e-mail` is the phrase
/// `"e mail"`).
///
/// ## Grammar
///
/// ```
/// query   := or
/// or      := and ( "OR" and )*
/// and     := not ( ["AND"] not )*          -- words side by side mean AND
/// not     := primary ( "NOT" primary )*    -- a NOT b: matches a but not b
/// primary := word ["*"] | '"' phrase '"' ["*"] | "(" query ")"
/// ```
///
/// - NOT binds tightest, then AND, then OR: `a OR b c NOT d` is
///   `a OR (b AND (c NOT d))`. NOT is binary, as in FTS5: there is no
///   `NOT b` on its own.
/// - `AND`, `OR` and `NOT` are keywords only in capitals, as in FTS5; `and`
///   is a word.
/// - A *word* is a run of characters other than whitespace, `"`, `(` and `)`.
///   A *phrase* is the text between two `"`; its tokens must appear one after
///   the other in one attribute.
/// - A `*` right after a word or phrase (`appl*`, `"apple pi" *`) makes it a
///   prefix search: its last token matches any token that starts with it.
/// - Words and phrases are tokenized: a word with several tokens (`e-mail`)
///   is a phrase of them, and one with no tokens (`+++`, `""`) is dropped.
///   AND and OR with a dropped side become their other side; `a NOT b`
///   becomes `a` when `b` is dropped, and is dropped as a whole when `a` is
///   (there is nothing to subtract from). A query left with nothing throws.
///
/// ## Relevance
///
/// ``relevance(of:)`` scores a matching document with the term-frequency part
/// of BM25. For each *positive* atom (a word or phrase not inside the
/// right-hand side of a NOT, counted once per appearance in the query), with
/// *tf* its occurrences over all attributes and *len* the document's total
/// tokens:
///
///     score += tf × 2.2 / (tf + 1.2 × (0.25 + 0.75 × len / 10))
///
/// That is BM25 with k1 = 1.2, b = 0.75, an assumed average length of 10
/// tokens and no corpus statistics (no IDF). It needs nothing but the
/// document, so a saved object, an unsaved one and the in-memory store rank
/// alike wherever the formula runs.
///
/// ## Topics
///
/// ### Creating a Query
/// - ``init(_:)``
/// - ``SearchQueryError``
///
/// ### Running a Query
/// - ``matches(_:)``
/// - ``relevance(of:)``
///
/// ### Showing Results
/// - ``highlights(in:)``
/// - ``snippet(of:words:highlight:)``
public struct SearchQuery: Sendable {
    /// The query's text, as given.
    public let text: String
    /// The parsed query; no atom in it is without tokens.
    package let root: SearchNode

    /// How deeply groups in parentheses may nest: 16.
    ///
    /// The parser recurses through four rules per group, and matching and
    /// the FTS5 expression once per level of the tree, of which a group can
    /// add three (its OR, AND and NOT). In a debug build a group costs about
    /// 7 KiB of stack, so a query at the limit takes 123 KiB, under a quarter
    /// of a Dispatch worker's 512 KiB (`SearchQueryNestingLimitTests` prints
    /// the figure); and its FTS5 expression stays within what FTS5's own
    /// parser accepts (its stack has 100 entries, `fts5YYSTACKDEPTH`). Words,
    /// phrases and operators outside groups add no depth, however many there
    /// are. A query that nests deeper throws ``SearchQueryError`` at the `(`
    /// that passes the limit.
    public static let maximumDepth = 16

    /// Parses a query.
    ///
    /// - Throws: ``SearchQueryError`` when the text does not follow the
    ///   grammar (an unclosed `"` or `(`, an operator with nothing on one
    ///   side, a `*` on its own, an empty group, groups nested deeper than
    ///   ``maximumDepth``), or when it has no word with a token in it.
    public init(_ text: String) throws(SearchQueryError) {
        self.text = text
        self.root = try SearchQueryParser.parse(text)
    }

    /// The query as an FTS5 MATCH expression, without a column filter.
    ///
    /// Every atom is its original text in double quotes (`"apple"`, `"apple pie"`,
    /// prefix `"appl" *`), and every operator is parenthesized: `("apple" AND ("pie" NOT "cherry"))`.
    /// FTS5 tokenizes the quoted text with the table's tokenizer, so it sees the same atoms.
    /// Put a column filter in front to search some columns: `{title body} : (…)`.
    package var fts5Expression: String { root.fts5Expression }

    /// Whether a document matches.
    ///
    /// A document is one text per searched attribute; nil is no value and
    /// matches nothing. A word matches a token of any attribute; a phrase
    /// needs its tokens in a row within one attribute.
    ///
    /// - Complexity: O(*n* × *a*): *n* tokens in the document, *a* atoms in the query.
    public func matches(_ document: [String?]) -> Bool {
        root.matches(Self.columns(of: document))
    }

    /// The relevance of a document, by the formula under *Relevance* in ``SearchQuery``'s
    /// documentation; 0 when it does not match.
    ///
    /// - Complexity: O(*n* × *a*): *n* tokens in the document, *a* atoms in the query.
    public func relevance(of document: [String?]) -> Double {
        let columns = Self.columns(of: document)
        guard root.matches(columns) else { return 0 }
        let length = Double(columns.reduce(0) { $0 + $1.count })
        let norm = 1.2 * (0.25 + 0.75 * length / 10)
        var score = 0.0
        for atom in root.positiveAtoms {
            let frequency = Double(atom.occurrenceCount(in: columns))
            score += frequency * 2.2 / (frequency + norm)
        }
        return score
    }

    /// The folded tokens of each attribute of a document.
    static func columns(of document: [String?]) -> [[String]] {
        document.map { $0.map(SearchTokenizer.foldedTokens(in:)) ?? [] }
    }
}

// MARK: - Conformances

extension SearchQuery: CustomStringConvertible {
    public var description: String { text }
}

/// Queries are equal when their texts are equal byte for byte: `String`'s
/// `==` treats canonically equivalent texts as equal, and those can tokenize
/// differently (a precomposed Hangul syllable is one token character, its
/// conjoining jamo are three).
extension SearchQuery: Hashable {
    public static func == (lhs: SearchQuery, rhs: SearchQuery) -> Bool {
        lhs.text.utf8.elementsEqual(rhs.text.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var text = text   // withUTF8 needs a mutable string; the copy shares a native string's storage
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
