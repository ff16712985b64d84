import Foundation
import Testing
@testable import ObjectGraph
@_spi(DataStackInternal) import DataStackSQLite

/// `text` with every scalar outside printable ASCII written as `\u{…}`, for failure messages.
func searchEscaped(_ text: String) -> String {
    text.unicodeScalars.map { scalar in
        (0x20..<0x7F).contains(scalar.value) ? String(scalar) : "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
    }.joined()
}

@Suite struct SearchTokenizerTests {
    private static let createTable = """
        CREATE VIRTUAL TABLE texts USING fts5(text, tokenize='unicode61 remove_diacritics 2');
        CREATE VIRTUAL TABLE textTerms USING fts5vocab(texts, instance);
        """

    // MARK: Agreement with SQLite

    /// Every Unicode scalar c, as the text "x<c>x": SQLite's tokens (from fts5vocab) against SearchTokenizer's.
    ///
    /// The texts go in 1,024 to a row, separated by spaces, so FTS5 indexes about a thousand rows rather
    /// than a million; a row's tokens are the concatenation of its scalars' tokens.
    @Test func everyUnicodeScalarTokenizesAsSQLiteFTS5Does() throws {
        let scalars = (UInt32(0)...0x10FFFF).compactMap(Unicode.Scalar.init)
        #expect(scalars.count == 1_112_064)
        let blocks = stride(from: 0, to: scalars.count, by: 1024).map { scalars[$0..<min($0 + 1024, scalars.count)] }
        let connection = try Connection(path: ":memory:")
        try connection.execute(Self.createTable)
        try connection.inWriteTransaction {
            let insert = try connection.prepare("INSERT INTO texts(rowid, text) VALUES (?, ?)")
            for (row, block) in blocks.enumerated() {
                try insert.bind(Int64(row), at: 1)
                try insert.bind(Self.blockText(block), at: 2)
                try insert.execute()
            }
        }
        let select = try connection.prepare("""
            SELECT doc, group_concat(term, ' ') FROM (SELECT doc, term FROM textTerms ORDER BY doc, offset) GROUP BY doc
            """)
        var sqliteTokens = Array(repeating: "", count: blocks.count)
        while try select.step() {
            sqliteTokens[Int(select.int64(at: 0))] = select.string(at: 1) ?? ""
        }
        var mismatches: [String] = []
        for (row, block) in blocks.enumerated() {
            let tokens = SearchTokenizer.foldedTokens(in: Self.blockText(block)).joined(separator: " ")
            guard !tokens.utf8.elementsEqual(sqliteTokens[row].utf8) else { continue }
            mismatches.append(Self.firstMismatch(in: block, sqliteTokens: sqliteTokens[row]))
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) blocks of 1,024 scalars tokenize differently; first mismatch in each:\n\(mismatches.prefix(20).joined(separator: "\n"))")
    }

    /// "x<c>x" for each scalar c of the block, separated by spaces.
    private static func blockText(_ block: ArraySlice<Unicode.Scalar>) -> String {
        var text = String.UnicodeScalarView()
        for scalar in block {
            if !text.isEmpty { text.append(" ") }
            text.append("x")
            text.append(scalar)
            text.append("x")
        }
        return String(text)
    }

    /// The first scalar of `block` whose tokens are not the next ones in SQLite's (space-separated) tokens.
    private static func firstMismatch(in block: ArraySlice<Unicode.Scalar>, sqliteTokens: String) -> String {
        let sqlite = sqliteTokens.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        var cursor = 0
        for scalar in block {
            let tokens = SearchTokenizer.foldedTokens(in: "x\(scalar)x")
            let theirs = Array(sqlite[min(cursor, sqlite.count)..<min(cursor + tokens.count, sqlite.count)])
            if !tokens.elementsEqual(theirs, by: { $0.utf8.elementsEqual($1.utf8) }) {
                return "U+\(String(scalar.value, radix: 16, uppercase: true)): SQLite \(theirs.map(searchEscaped)), SearchTokenizer \(tokens.map(searchEscaped))"
            }
            cursor += tokens.count
        }
        return "block from U+\(String(block.first?.value ?? 0, radix: 16, uppercase: true)): SQLite has \(sqlite.count - cursor) tokens more"
    }

    /// Random mixes of scalars from every kind the tokenizer treats differently, compared token list by token list.
    @Test func randomTextsTokenizeAsSQLiteFTS5Does() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute(Self.createTable)
        var random = SplitMix64(seed: 0x5EA2C4)
        let texts = (0..<3000).map { _ in Self.randomText(using: &random) }
        try connection.inWriteTransaction {
            let insert = try connection.prepare("INSERT INTO texts(rowid, text) VALUES (?, ?)")
            for (row, text) in texts.enumerated() {
                try insert.bind(Int64(row), at: 1)
                try insert.bind(text, at: 2)
                try insert.execute()
            }
        }
        var sqliteTokens = Array(repeating: [String](), count: texts.count)
        let select = try connection.prepare("SELECT doc, term FROM textTerms ORDER BY doc, offset")
        while try select.step() {
            sqliteTokens[Int(select.int64(at: 0))].append(select.string(at: 1) ?? "")
        }
        var mismatches: [String] = []
        for (row, text) in texts.enumerated() {
            let tokens = SearchTokenizer.tokens(in: text)
            let folded = tokens.map(\.folded)
            if !folded.elementsEqual(sqliteTokens[row], by: { $0.utf8.elementsEqual($1.utf8) }) {
                mismatches.append("\(searchEscaped(text)): SQLite \(sqliteTokens[row].map(searchEscaped)), SearchTokenizer \(folded.map(searchEscaped))")
            }
            // Each range holds exactly its token, and the ranges are in order.
            for (index, token) in tokens.enumerated() {
                let again = SearchTokenizer.tokens(in: String(text[token.range])).map(\.folded)
                #expect(again.count == 1 && again[0].utf8.elementsEqual(token.folded.utf8), "range of token \(index) in \(searchEscaped(text))")
                if index > 0 { #expect(tokens[index - 1].range.upperBound < token.range.lowerBound) }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) texts tokenize differently; first ones:\n\(mismatches.prefix(20).joined(separator: "\n"))")
    }

    /// Scalars drawn from groups the rules single out: ASCII, accents and diacritics, case-folding specials,
    /// marks that are not diacritics, scripts without case, newer and unassigned scalars, and SQLite's exceptions.
    private static let scalarPools: [[UInt32]] = [
        Array(0x20...0x7E), Array(0x20...0x7E), [0x09, 0x0A, 0x00, 0x7F, 0xA0, 0x2028, 0x3000],
        Array(0xC0...0x24F), Array(0x1E00...0x1EFF), Array(0x300...0x36F),
        [0xB5, 0x17F, 0x3C2, 0x3D0, 0x3D1, 0x3D5, 0x3D6, 0x3F0, 0x3F1, 0x3F5, 0x130, 0x131, 0x1E9B, 0x1E9E, 0x345, 0x1FBE, 0xDF,
         0x1C4, 0x1C5, 0x1C6, 0x212A, 0x212B, 0x2126, 0xFB01, 0x1E0, 0x1E1, 0x1D5, 0x1D6],
        Array(0x370...0x3FF), Array(0x400...0x4FF), Array(0x591...0x5F4), Array(0x900...0x97F),
        [0x19B0, 0x19B5, 0x19C0, 0x19C8, 0x19C9, 0x1CF2, 0x1CF3, 0x1885, 0x1886, 0xFFFE, 0xFFFF, 0xFDD0, 0x1FFFE],
        [0x4E00, 0x65E5, 0x672C, 0x8A9E, 0xAC00, 0xD55C, 0x1100, 0x1161, 0x11AB, 0x3042, 0x30A2, 0xFF21, 0xFF41, 0xFF10],
        [0x1F600, 0x1F1EB, 0x1F1F7, 0x200D, 0x2764, 0xFE0F, 0x20AC, 0x2014, 0x201C, 0x2460, 0x2167, 0xE000, 0xF8FF, 0x10FFFD],
        [0x0378, 0x0870, 0x1E900, 0x1E922, 0x10400, 0x10428, 0x2C00, 0x2C30, 0xA7C0, 0x1F979, 0x31350, 0xE0001],
    ]

    private static func randomText(using random: inout SplitMix64) -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 1...16, using: &random) {
            let pool = scalarPools.randomElement(using: &random)!
            if let scalar = Unicode.Scalar(pool.randomElement(using: &random)!) { scalars.append(scalar) }
        }
        return String(scalars)
    }

    // MARK: Hand-written cases

    @Test func foldsCaseAndDiacriticsAndSplitsAtPunctuation() {
        let folded = SearchTokenizer.tokens(in: "Crème Brûlée, e-mail! ÆON straße ſtop ΣΊΣΥΦΟΣ x\u{301}x ǖ Ǡ").map(\.folded)
        #expect(folded == ["creme", "brulee", "e", "mail", "æon", "straße", "stop", "σίσυφοσ", "xx", "u", "ǡ"])
    }

    @Test func tokenRangesCoverTheTokensCharacters() {
        let text = "  «Hello», wörld_42 "
        let tokens = SearchTokenizer.tokens(in: text)
        #expect(tokens.map { String(text[$0.range]) } == ["Hello", "wörld", "42"])
        #expect(tokens.map(\.folded) == ["hello", "world", "42"])
    }

    /// SQLite starts a token only at a letter or number: a diacritic before one separates, one after it
    /// belongs to the token (and to its range), and a diacritic alone is no token at all.
    @Test func diacriticsContinueTokensButStartNone() {
        let text = "x \u{301}abc\u{301} y \u{301} \u{300}\u{301}"
        let tokens = SearchTokenizer.tokens(in: text)
        #expect(tokens.map(\.folded) == ["x", "abc", "y"])
        #expect(tokens.map { Array(text[$0.range].unicodeScalars) } == [["x"], ["a", "b", "c", "\u{301}"], ["y"]])
    }

    @Test func emptyAndSeparatorOnlyTextsHaveNoTokens() {
        #expect(SearchTokenizer.tokens(in: "").isEmpty)
        #expect(SearchTokenizer.tokens(in: " +++ — ¡¿ 🇫🇷 ").isEmpty)
    }

    /// The index compares bytes: a precomposed syllable and its conjoining jamo are different tokens,
    /// though `String` calls them equal.
    @Test func canonicallyEquivalentTextsCanTokenizeDifferently() {
        let precomposed = SearchTokenizer.tokens(in: "\u{D55C}").map(\.folded)
        let jamo = SearchTokenizer.tokens(in: "\u{1112}\u{1161}\u{11AB}").map(\.folded)
        #expect(precomposed == jamo)   // String's canonical equivalence…
        #expect(!precomposed[0].utf8.elementsEqual(jamo[0].utf8))   // …is not what the index compares
    }
}
