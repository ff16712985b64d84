/// Parses the text of a ``SearchQuery`` into a ``SearchNode`` tree.
///
/// A recursive-descent parser over the grammar in ``SearchQuery``'s
/// documentation, one function per rule. The lexer works on Unicode scalars
/// (so a `"` followed by a combining mark still opens a phrase and can never
/// end up inside an FTS5 string); error offsets are converted to characters.
struct SearchQueryParser {
    /// One lexeme of a query.
    struct Lexeme {
        enum Kind {
            /// A run of characters other than whitespace, `"`, `(` and `)`; trailing `*`s removed and noted.
            case word(String, isPrefix: Bool)
            /// The text between two `"`.
            case phrase(String)
            case openParenthesis, closeParenthesis
            /// A run of `*` on its own.
            case star
            case and, or, not
            case end
        }

        var kind: Kind
        var start: String.Index

        /// The keyword's spelling, for error messages; nil for lexemes that are not operators.
        var keyword: String? {
            switch kind {
            case .and: "AND"
            case .or: "OR"
            case .not: "NOT"
            default: nil
            }
        }
    }

    private let text: String
    private let lexemes: [Lexeme]
    private var position = 0
    /// The `(` of each group being parsed, innermost last; never more than
    /// ``SearchQuery/maximumDepth``, which bounds the recursion.
    private var openGroups: [Lexeme] = []

    /// The query's tree, without atoms that have no tokens.
    ///
    /// - Throws: ``SearchQueryError`` for a syntax error, or when no atom has a token.
    static func parse(_ text: String) throws(SearchQueryError) -> SearchNode {
        var parser = SearchQueryParser(text: text, lexemes: try lex(text))
        do throws(Failure) {
            let root = try parser.parseOr()
            let rest = parser.lexemes[parser.position]
            if case .closeParenthesis = rest.kind {
                throw parser.error(at: rest.start, "')' has no '(' to close")
            }
            guard let root else { throw parser.noWords() }
            return root
        } catch {
            throw SearchQueryError(error.code, query: text, offset: parser.offset(of: error.index), message: error.message)
        }
    }

    private init(text: String, lexemes: [Lexeme]) {
        self.text = text
        self.lexemes = lexemes
    }

    // MARK: - Grammar

    /// `or := and ( "OR" and )*`
    private mutating func parseOr() throws(Failure) -> SearchNode? {
        var operands = [try parseAnd(after: nil)]
        while case .or = peek.kind {
            let op = advance()
            operands.append(try parseAnd(after: op))
        }
        return Self.combine(operands, SearchNode.or)
    }

    /// `and := not ( ["AND"] not )*`: words side by side mean AND.
    private mutating func parseAnd(after op: Lexeme?) throws(Failure) -> SearchNode? {
        var operands = [try parseNot(after: op)]
        while true {
            switch peek.kind {
            case .and:
                let op = advance()
                operands.append(try parseNot(after: op))
            case .word, .phrase, .openParenthesis, .star:
                operands.append(try parseNot(after: nil))
            default:
                return Self.combine(operands, SearchNode.and)
            }
        }
    }

    /// `not := primary ( "NOT" primary )*`
    ///
    /// When the left side has no tokens the whole `a NOT b` is dropped: there
    /// is nothing to subtract from. When the right side has none, it is its
    /// left side. `a NOT b NOT c` is `a NOT (b OR c)`, as FTS5 reads it
    /// (`(a NOT b) NOT c`), one level deep however long the chain.
    private mutating func parseNot(after op: Lexeme?) throws(Failure) -> SearchNode? {
        let lhs = try parsePrimary(after: op)
        var excluded: [SearchNode?] = []
        while case .not = peek.kind {
            let op = advance()
            excluded.append(try parsePrimary(after: op))
        }
        guard let lhs, let rhs = Self.combine(excluded, SearchNode.or) else { return lhs }
        return .not(lhs, rhs)
    }

    /// `primary := word ["*"] | '"' phrase '"' ["*"] | "(" query ")"`
    ///
    /// - Parameter op: the operator just before, if any, for the error when the primary is missing.
    private mutating func parsePrimary(after op: Lexeme?) throws(Failure) -> SearchNode? {
        let lexeme = advance()
        switch lexeme.kind {
        case .word(let word, let isPrefix):
            return atom(word, isPrefix: isPrefix || skipStar())
        case .phrase(let phrase):
            return atom(phrase, isPrefix: skipStar())
        case .openParenthesis:
            if case .closeParenthesis = peek.kind {
                throw error(at: lexeme.start, "empty group: '()' has no words in it")
            }
            if openGroups.count == SearchQuery.maximumDepth {
                throw error(at: lexeme.start, "groups nest more than \(SearchQuery.maximumDepth) deep")
            }
            openGroups.append(lexeme)
            let node = try parseOr()
            guard case .closeParenthesis = peek.kind else {
                throw error(at: peek.start, "expected ')' closing the group opened at offset \(offset(of: lexeme.start))")
            }
            _ = advance()
            openGroups.removeLast()
            return node
        case .star:
            throw error(at: lexeme.start, "'*' must follow a word or a phrase, as in appl* or \"apple pi\"*")
        case .not:
            throw error(at: lexeme.start, "NOT needs a word before it: a NOT b")
        case .and, .or:
            if let op { throw missingRightSide(of: op) }
            let keyword = lexeme.keyword ?? ""
            throw error(at: lexeme.start, "\(keyword) needs a word before it: a \(keyword) b")
        case .closeParenthesis:
            if let op { throw missingRightSide(of: op) }
            throw error(at: lexeme.start, "')' has no '(' to close")
        case .end:
            if let op { throw missingRightSide(of: op) }
            if let group = openGroups.last {
                throw error(at: lexeme.start, "expected ')' closing the group opened at offset \(offset(of: group.start))")
            }
            throw noWords()
        }
    }

    /// Consumes a `*` after a word or phrase; whether there was one.
    private mutating func skipStar() -> Bool {
        guard case .star = peek.kind else { return false }
        _ = advance()
        return true
    }

    /// A word or phrase, tokenized; nil when it has no tokens (`+++`, `""`).
    private func atom(_ text: String, isPrefix: Bool) -> SearchNode? {
        let tokens = SearchTokenizer.foldedTokens(in: text)
        guard !tokens.isEmpty else { return nil }
        return .atom(SearchAtom(text: text, tokens: tokens, isPrefix: isPrefix))
    }

    /// The operands of an AND or an OR without the dropped ones, an operand of
    /// the same operator spliced in (`a (b c)` is `a b c`, as FTS5 has it):
    /// nil when none is left, the operand itself when one is.
    private static func combine(_ operands: [SearchNode?], _ make: ([SearchNode]) -> SearchNode) -> SearchNode? {
        var kept: [SearchNode] = []
        for case let operand? in operands {
            switch (make([]), operand) {
            case (.and, .and(let inner)), (.or, .or(let inner)): kept += inner
            default: kept.append(operand)
            }
        }
        return kept.count > 1 ? make(kept) : kept.first
    }

    // MARK: - Lexemes

    private var peek: Lexeme { lexemes[position] }

    private mutating func advance() -> Lexeme {
        let lexeme = lexemes[position]
        if position < lexemes.count - 1 { position += 1 }
        return lexeme
    }

    /// All lexemes of `text`, ending with `.end`.
    private static func lex(_ text: String) throws(SearchQueryError) -> [Lexeme] {
        let scalars = text.unicodeScalars
        var lexemes: [Lexeme] = []
        var index = scalars.startIndex
        func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
            !(scalar.properties.isWhitespace || scalar == "\"" || scalar == "(" || scalar == ")")
        }
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let start = index
            index = scalars.index(after: index)
            switch scalar {
            case _ where scalar.properties.isWhitespace:
                continue
            case "(":
                lexemes.append(Lexeme(kind: .openParenthesis, start: start))
            case ")":
                lexemes.append(Lexeme(kind: .closeParenthesis, start: start))
            case "\"":
                guard let close = scalars[index...].firstIndex(of: "\"") else {
                    let offset = text[..<start].count
                    throw SearchQueryError(.syntaxError, query: text, offset: offset, message: "unclosed '\"': the phrase that starts here needs a closing '\"'")
                }
                lexemes.append(Lexeme(kind: .phrase(String(scalars[index..<close])), start: start))
                index = scalars.index(after: close)
            default:
                while index < scalars.endIndex, isWordScalar(scalars[index]) { index = scalars.index(after: index) }
                lexemes.append(Lexeme(kind: wordKind(String(scalars[start..<index])), start: start))
            }
        }
        lexemes.append(Lexeme(kind: .end, start: scalars.endIndex))
        return lexemes
    }

    /// A keyword (capitals only, as in FTS5), a lone `*`, or a word with its trailing `*`s removed.
    private static func wordKind(_ word: String) -> Lexeme.Kind {
        switch word {
        case "AND": return .and
        case "OR": return .or
        case "NOT": return .not
        default:
            var stem = Substring(word)
            while stem.unicodeScalars.last == "*" { stem = Substring(stem.unicodeScalars.dropLast()) }
            if stem.isEmpty { return .star }
            return .word(String(stem), isPrefix: stem.unicodeScalars.count < word.unicodeScalars.count)
        }
    }

    // MARK: - Errors

    /// The offset of `index` in characters.
    private func offset(of index: String.Index) -> Int {
        text[..<index].count
    }

    /// A failure of the grammar, where it happened and what it is; ``parse(_:)``
    /// makes it a ``SearchQueryError``. Smaller than the public error (it has no
    /// copy of the query), because the recursion keeps room for a thrown error in
    /// each of its frames, and the depth limit's stack budget counts that room.
    private struct Failure: Error {
        var code: SearchQueryError.Code
        var index: String.Index
        var message: String
    }

    private func error(at index: String.Index, _ message: String) -> Failure {
        Failure(code: .syntaxError, index: index, message: message)
    }

    private func noWords() -> Failure {
        Failure(code: .noWords, index: text.startIndex, message: "the search query has no words to search for")
    }

    private func missingRightSide(of op: Lexeme) -> Failure {
        let keyword = op.keyword ?? ""
        return error(at: op.start, "\(keyword) needs a word after it: a \(keyword) b")
    }
}
