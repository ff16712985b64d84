import Foundation

/// A parsed search query: words and phrases joined by AND, OR and NOT.
///
/// Built by ``SearchQueryParser``; atoms without tokens are already gone.
/// AND and OR hold all their operands in one list, as FTS5 does, so a long
/// query of plain words is one level deep, not one level per word: only
/// groups make the tree deeper (``SearchQuery/maximumDepth``).
package indirect enum SearchNode: Sendable, Hashable {
    /// A word or a phrase.
    case atom(SearchAtom)
    /// Every operand matches (two or more, none of them an AND).
    case and([SearchNode])
    /// Some operand matches (two or more, none of them an OR).
    case or([SearchNode])
    /// The left side matches and the right side does not (FTS5's binary NOT);
    /// `a NOT b NOT c` is `a NOT (b OR c)`.
    case not(SearchNode, SearchNode)
}

/// A word or phrase of a search query, tokenized.
///
/// A word with several tokens (`e-mail`) is a phrase of them, so the two are
/// one thing here: a sequence of tokens that must appear consecutively in one
/// column.
package struct SearchAtom: Sendable, Hashable {
    /// The atom's text as written, without its quotes and prefix `*`; never contains `"`.
    package var text: String
    /// The folded tokens of ``text`` (never empty).
    package var tokens: [String]
    /// Whether the last token matches any token it is a prefix of (`appl*`).
    package var isPrefix: Bool

    package init(text: String, tokens: [String], isPrefix: Bool) {
        self.text = text
        self.tokens = tokens
        self.isPrefix = isPrefix
    }
}

// MARK: - FTS5

extension SearchNode {
    /// The node as an FTS5 MATCH expression, fully parenthesized.
    ///
    /// Each atom is its text in double quotes, which FTS5 tokenizes with the
    /// table's tokenizer: the same tokens ``SearchAtom/tokens`` holds. A NUL
    /// separates tokens for both tokenizers but would end the expression for
    /// FTS5's parser, so it is written as a space.
    ///
    /// Related SQLite documentation: <https://sqlite.org/fts5.html#full_text_query_syntax>
    package var fts5Expression: String {
        switch self {
        case .atom(let atom):
            let text = atom.text.contains("\u{0}") ? atom.text.replacingOccurrences(of: "\u{0}", with: " ") : atom.text
            return "\"" + text + "\"" + (atom.isPrefix ? " *" : "")
        case .and(let operands): return "(" + operands.map(\.fts5Expression).joined(separator: " AND ") + ")"
        case .or(let operands): return "(" + operands.map(\.fts5Expression).joined(separator: " OR ") + ")"
        case .not(let lhs, let rhs): return "(\(lhs.fts5Expression) NOT \(rhs.fts5Expression))"
        }
    }
}

// MARK: - Evaluation

extension SearchNode {
    /// Whether a document, given as the folded tokens of each of its columns, matches.
    package func matches(_ columns: [[String]]) -> Bool {
        switch self {
        case .atom(let atom): return atom.occurs(in: columns)
        case .and(let operands): return operands.allSatisfy { $0.matches(columns) }
        case .or(let operands): return operands.contains { $0.matches(columns) }
        case .not(let lhs, let rhs): return lhs.matches(columns) && !rhs.matches(columns)
        }
    }

    /// The atoms not inside the right-hand side of a NOT, left to right: what a
    /// matching document is ranked and highlighted by.
    package var positiveAtoms: [SearchAtom] {
        var atoms: [SearchAtom] = []
        collectPositiveAtoms(into: &atoms)
        return atoms
    }

    private func collectPositiveAtoms(into atoms: inout [SearchAtom]) {
        switch self {
        case .atom(let atom): atoms.append(atom)
        case .and(let operands), .or(let operands):
            for operand in operands { operand.collectPositiveAtoms(into: &atoms) }
        case .not(let lhs, _): lhs.collectPositiveAtoms(into: &atoms)
        }
    }
}

extension SearchAtom {
    /// Whether the atom occurs in any column.
    func occurs(in columns: [[String]]) -> Bool {
        columns.contains { column in firstOccurrence(in: column, from: 0) != nil }
    }

    /// How many times the atom occurs in all columns together.
    func occurrenceCount(in columns: [[String]]) -> Int {
        columns.reduce(0) { $0 + occurrences(in: $1).count }
    }

    /// The index of each token where the atom starts in `column`, overlapping occurrences included
    /// (`"a a"` occurs twice in `a a a`), as FTS5 counts phrase instances.
    func occurrences(in column: [String]) -> [Int] {
        var starts: [Int] = []
        var from = 0
        while let start = firstOccurrence(in: column, from: from) {
            starts.append(start)
            from = start + 1
        }
        return starts
    }

    private func firstOccurrence(in column: [String], from: Int) -> Int? {
        let count = tokens.count
        guard column.count - from >= count else { return nil }
        for start in from...(column.count - count) where matches(column, at: start) {
            return start
        }
        return nil
    }

    /// Whether the atom's tokens equal the column's tokens from `start` on, comparing UTF-8 bytes
    /// (not `String`'s canonical equivalence: the index compares bytes).
    private func matches(_ column: [String], at start: Int) -> Bool {
        let last = tokens.count - 1
        for offset in 0...last {
            let wanted = Self.indexed(tokens[offset])
            let found = Self.indexed(column[start + offset])
            if offset == last && isPrefix {
                guard found.starts(with: wanted) else { return false }
            } else {
                guard found.elementsEqual(wanted) else { return false }
            }
        }
        return true
    }

    /// The most bytes of a token FTS5 keeps, in the index and in queries alike (`FTS5_MAX_TOKEN_SIZE`);
    /// longer tokens that share their first 32,768 bytes are the same token.
    static let maximumTokenBytes = 32_768

    /// The bytes of `token` that FTS5 compares.
    @inline(__always)
    private static func indexed(_ token: String) -> Substring.UTF8View {
        let bytes = token.utf8
        return bytes.count > maximumTokenBytes ? bytes.prefix(maximumTokenBytes) : bytes[...]
    }
}
