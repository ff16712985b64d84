import Foundation
import Testing
@testable import ObjectGraph
@_spi(DataStackInternal) import DataStackSQLite

private func fts5(_ text: String) throws -> String {
    try SearchQuery(text).fts5Expression
}

private func queryError(_ text: String) -> SearchQueryError? {
    do {
        _ = try SearchQuery(text)
        return nil
    } catch {
        return error
    }
}

@Suite struct SearchQueryTests {
    // MARK: Grammar

    @Test func wordsPhrasesAndOperatorsBecomeFTS5Expressions() throws {
        #expect(try fts5("apple") == #""apple""#)
        #expect(try fts5("apple pie") == #"("apple" AND "pie")"#)
        #expect(try fts5("apple AND pie") == #"("apple" AND "pie")"#)
        #expect(try fts5("apple OR pie") == #"("apple" OR "pie")"#)
        #expect(try fts5("apple NOT pie") == #"("apple" NOT "pie")"#)
        #expect(try fts5("\"apple pie\" crumble") == #"("apple pie" AND "crumble")"#)
        #expect(try fts5("apple\"pie\"(tart)") == #"("apple" AND "pie" AND "tart")"#)
        #expect(try fts5(" \tapple\n\u{A0}pie ") == #"("apple" AND "pie")"#)
        #expect(try fts5("(apple OR pie) tart") == #"(("apple" OR "pie") AND "tart")"#)
        #expect(try fts5("((apple))") == #""apple""#)
    }

    @Test func notBindsTighterThanAndWhichBindsTighterThanOr() throws {
        #expect(try fts5("a OR b c NOT d") == #"("a" OR ("b" AND ("c" NOT "d")))"#)
        #expect(try fts5("a b OR c") == #"(("a" AND "b") OR "c")"#)
        #expect(try fts5("a OR b AND c") == #"("a" OR ("b" AND "c"))"#)
        #expect(try fts5("a b c") == #"("a" AND "b" AND "c")"#)
        #expect(try fts5("a OR b OR c") == #"("a" OR "b" OR "c")"#)
        #expect(try fts5("a NOT b NOT c") == #"("a" NOT ("b" OR "c"))"#)
        #expect(try fts5("a NOT (b OR c)") == #"("a" NOT ("b" OR "c"))"#)
    }

    @Test func keywordsAreKeywordsOnlyInCapitals() throws {
        #expect(try fts5("apple and pie") == #"("apple" AND "and" AND "pie")"#)
        #expect(try fts5("apple Or pie") == #"("apple" AND "Or" AND "pie")"#)
        #expect(try fts5("apple not pie") == #"("apple" AND "not" AND "pie")"#)
        #expect(try fts5("\"AND\" \"OR NOT\"") == #"("AND" AND "OR NOT")"#)
        #expect(try fts5("ANDROID NOTE ORE") == #"("ANDROID" AND "NOTE" AND "ORE")"#)
    }

    @Test func aStarAfterAWordOrPhraseMakesAPrefixSearch() throws {
        #expect(try fts5("appl*") == #""appl" *"#)
        #expect(try fts5("appl *") == #""appl" *"#)
        #expect(try fts5("appl**") == #""appl" *"#)
        #expect(try fts5("\"apple pi\"*") == #""apple pi" *"#)
        #expect(try fts5("\"apple pi\" * tart") == #"("apple pi" * AND "tart")"#)
        #expect(try fts5("e-ma*") == #""e-ma" *"#)
        #expect(try fts5("AND*") == #""AND" *"#)
        #expect(try fts5("a*b") == #""a*b""#)   // not trailing: a separator, so the phrase "a b"
        let atoms = try SearchQuery("e-ma* \"apple pi\"* a*b").root.positiveAtoms
        #expect(atoms.map(\.tokens) == [["e", "ma"], ["apple", "pi"], ["a", "b"]])
        #expect(atoms.map(\.isPrefix) == [true, true, false])
    }

    @Test func wordsAndPhrasesAreTokenizedLikeTheIndex() throws {
        let atoms = try SearchQuery("CRÈME \"Brûlée, e-mail\" ſtraße").root.positiveAtoms
        #expect(atoms.map(\.text) == ["CRÈME", "Brûlée, e-mail", "ſtraße"])
        #expect(atoms.map(\.tokens) == [["creme"], ["brulee", "e", "mail"], ["straße"]])
    }

    @Test func atomsWithoutTokensAreDropped() throws {
        #expect(try fts5("apple +++") == #""apple""#)
        #expect(try fts5("+++ OR apple") == #""apple""#)
        #expect(try fts5("apple \"\" pie") == #"("apple" AND "pie")"#)
        #expect(try fts5("apple (\"\" OR +++ — )") == #""apple""#)
        #expect(try fts5("apple NOT +++") == #""apple""#)
        #expect(try fts5("apple NOT (+++ ---)") == #""apple""#)
        // A NOT whose left side is dropped has nothing to subtract from: it goes as a whole.
        #expect(try fts5("pie +++ NOT apple") == #""pie""#)
        #expect(try fts5("+++ NOT apple OR pie") == #""pie""#)
        #expect(try fts5("+++* pie") == #""pie""#)
    }

    @Test func quotesOnlyEnclosePhrasesSoTheExpressionNeverHasAQuoteInsideAnAtom() throws {
        // A quote followed by a combining mark is one Character, but still opens a phrase.
        #expect(try fts5("apple \"\u{301}pie\"") == "(\"apple\" AND \"\u{301}pie\")")
        #expect(try fts5("apple\u{0}pie") == #""apple pie""#)   // NUL would end FTS5's expression
        #expect(try SearchQuery("apple\u{0}pie").root.positiveAtoms.map(\.tokens) == [["apple", "pie"]])
    }

    // MARK: Errors

    @Test func everySyntaxErrorSaysWhatAndWhere() {
        let cases: [(String, Int, String)] = [
            ("apple (pie", 10, "expected ')' closing the group opened at offset 6"),
            ("((apple)", 8, "expected ')' closing the group opened at offset 0"),
            ("apple (", 7, "expected ')' closing the group opened at offset 6"),
            ("apple \"pie", 6, "unclosed '\"': the phrase that starts here needs a closing '\"'"),
            ("apple \"pie\" \"crumble", 12, "unclosed '\"': the phrase that starts here needs a closing '\"'"),
            ("apple)", 5, "')' has no '(' to close"),
            ("(apple))", 7, "')' has no '(' to close"),
            (") apple", 0, "')' has no '(' to close"),
            ("OR apple", 0, "OR needs a word before it: a OR b"),
            ("AND apple", 0, "AND needs a word before it: a AND b"),
            ("apple (OR pie)", 7, "OR needs a word before it: a OR b"),
            ("apple AND", 6, "AND needs a word after it: a AND b"),
            ("apple OR", 6, "OR needs a word after it: a OR b"),
            ("apple OR OR pie", 6, "OR needs a word after it: a OR b"),
            ("apple AND OR pie", 6, "AND needs a word after it: a AND b"),
            ("apple OR )", 6, "OR needs a word after it: a OR b"),
            ("(apple AND)", 7, "AND needs a word after it: a AND b"),
            ("NOT apple", 0, "NOT needs a word before it: a NOT b"),
            ("apple AND NOT pie", 10, "NOT needs a word before it: a NOT b"),
            ("apple (NOT pie)", 7, "NOT needs a word before it: a NOT b"),
            ("apple NOT", 6, "NOT needs a word after it: a NOT b"),
            ("apple NOT NOT pie", 10, "NOT needs a word before it: a NOT b"),
            ("*", 0, "'*' must follow a word or a phrase, as in appl* or \"apple pi\"*"),
            ("apple * *", 8, "'*' must follow a word or a phrase, as in appl* or \"apple pi\"*"),
            ("apple OR *", 9, "'*' must follow a word or a phrase, as in appl* or \"apple pi\"*"),
            ("(*)", 1, "'*' must follow a word or a phrase, as in appl* or \"apple pi\"*"),
            ("()", 0, "empty group: '()' has no words in it"),
            ("apple ( ) pie", 6, "empty group: '()' has no words in it"),
            ("", 0, "the search query has no words to search for"),
            (" \n ", 0, "the search query has no words to search for"),
            ("+++", 0, "the search query has no words to search for"),
            ("\"\" +++ (-- OR ¿?)", 0, "the search query has no words to search for"),
            ("+++ NOT apple", 0, "the search query has no words to search for"),
        ]
        for (text, offset, reason) in cases {
            let error = queryError(text)
            #expect(error == SearchQueryError(reason.hasPrefix("the search query has no words") ? .noWords : .syntaxError, query: text, offset: offset, message: reason), "\(text)")
        }
    }

    @Test func offsetsCountCharactersNotScalars() {
        // "e" + U+0301 is one character; 🇫🇷 (two scalars, no token) is one character.
        #expect(queryError("e\u{301} \"x")?.offset == 2)
        #expect(queryError("🇫🇷 OR") == SearchQueryError(.syntaxError, query: "🇫🇷 OR", offset: 2, message: "OR needs a word after it: a OR b"))
        #expect(queryError("\"\u{301}apple")?.offset == 0)
        #expect(queryError("🇫🇷🇫🇷 (apple")?.offset == 9)
    }

    @Test func errorsDescribeThemselves() {
        let error = queryError("apple (pie")
        #expect(error?.description == "bad search query at offset 10 in 'apple (pie': expected ')' closing the group opened at offset 6")
        #expect(error?.errorDescription == error?.description)
    }

    // MARK: Conformances

    @Test func queriesAreEqualWhenTheirTextsAreEqualByteForByte() throws {
        #expect(try SearchQuery("apple pie") == SearchQuery("apple pie"))
        #expect(try SearchQuery("apple pie") != SearchQuery("apple  pie"))
        #expect(try SearchQuery("\u{D55C}") != SearchQuery("\u{1112}\u{1161}\u{11AB}"))   // canonically equivalent
        #expect(try Set([SearchQuery("a"), SearchQuery("a"), SearchQuery("b")]).count == 2)
        #expect(try SearchQuery("apple  OR pie").description == "apple  OR pie")
        #expect(try SearchQuery("apple  OR pie").text == "apple  OR pie")
    }

    // MARK: Matching

    @Test func aWordMatchesAnyColumnAndAPhraseOneColumnInARow() throws {
        let phrase = try SearchQuery("\"apple pie\"")
        #expect(phrase.matches(["Apple-Pie!"]))
        #expect(phrase.matches([nil, "an apple pie"]))
        #expect(!phrase.matches(["apple", "pie"]))
        #expect(!phrase.matches(["pie apple"]))
        #expect(!phrase.matches(["apple tart pie"]))
        let words = try SearchQuery("apple pie")
        #expect(words.matches(["apple", "pie"]))
        #expect(words.matches(["pie, then apple"]))
        #expect(!words.matches(["apple", nil]))
        #expect(!words.matches([]))
        #expect(!words.matches([nil, nil]))
    }

    @Test func caseAndDiacriticsNeverMatterButTokensCompareByteForByte() throws {
        #expect(try SearchQuery("CRÈME brulee").matches(["Crème Brûlée"]))
        #expect(try SearchQuery("creme").matches(["CRE\u{300}ME"]))
        #expect(try SearchQuery("straße").matches(["STRASSE"]) == false)   // ß has no single-letter lowercase
        #expect(try SearchQuery("e-mail").matches(["E mail"]))
        #expect(try !SearchQuery("e-mail").matches(["email"]))
        // Canonically equivalent, but not the same bytes, so not the same token for the index.
        #expect(try !SearchQuery("\u{D55C}").matches(["\u{1112}\u{1161}\u{11AB}"]))
        #expect(try SearchQuery("\u{D55C}").matches(["\u{D55C}"]))
    }

    /// FTS5 keeps a token's first 32,768 bytes, in the index and in queries.
    @Test func longTokensCompareByTheFirst32768BytesAsInFTS5() throws {
        let long = String(repeating: "a", count: 40_000)
        let cases: [(query: String, text: String)] = [
            (long + "c", long + "b"),
            (String(repeating: "a", count: 32_767) + "c", long),
            (String(repeating: "a", count: 32_767) + "é", long),
            (long + "*", long),
            (String(repeating: "a", count: 32_768), long),
        ]
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE VIRTUAL TABLE texts USING fts5(text, tokenize='unicode61 remove_diacritics 2')")
        let insert = try connection.prepare("INSERT INTO texts(rowid, text) VALUES (?, ?)")
        for (row, text) in cases.enumerated() {
            try insert.bind(Int64(row), at: 1)
            try insert.bind(text.text, at: 2)
            try insert.execute()
        }
        let select = try connection.prepare("SELECT count(*) FROM texts WHERE texts MATCH ? AND rowid = ?")
        for (row, text) in cases.enumerated() {
            let query = try SearchQuery(text.query)
            try select.bind(query.fts5Expression, at: 1)
            try select.bind(Int64(row), at: 2)
            #expect(try select.step())
            let sqliteMatches = select.int64(at: 0) == 1
            select.reset()
            #expect(query.matches([text.text]) == sqliteMatches, "case \(row)")
        }
        #expect(try SearchQuery(long + "c").matches([long + "b"]))
        #expect(try !SearchQuery(String(repeating: "a", count: 32_767) + "c").matches([long]))
    }

    @Test func prefixesMatchTheStartOfTheLastToken() throws {
        let prefix = try SearchQuery("appl*")
        #expect(prefix.matches(["Apples"]))
        #expect(prefix.matches(["APPL"]))
        #expect(!prefix.matches(["pineapple"]))
        #expect(!prefix.matches(["app"]))
        let phrase = try SearchQuery("\"apple p\"*")
        #expect(phrase.matches(["apple pie"]))
        #expect(!phrase.matches(["apples pie"]))
        #expect(try SearchQuery("ap*").matches(["Äpfel"]))
    }

    @Test func operatorsCombineMatches() throws {
        let notPie = try SearchQuery("apple NOT pie")
        #expect(notPie.matches(["apple tart"]))
        #expect(!notPie.matches(["apple", "pie"]))   // the NOT looks at every column
        #expect(!notPie.matches(["pie"]))
        let either = try SearchQuery("apple OR pie")
        #expect(either.matches([nil, "pie"]))
        #expect(!either.matches(["tart"]))
        let grouped = try SearchQuery("(apple OR pear) NOT (pie OR tart)")
        #expect(grouped.matches(["pear crumble"]))
        #expect(!grouped.matches(["pear tart"]))
    }

    @Test func theDocumentationExamplesHold() throws {
        let query = try SearchQuery("apple pie OR \"crème brûlée\" NOT chocolat*")
        #expect(query.matches(["Grandma's Creme Brulee", nil]))
        #expect(!query.matches(["Chocolate crème brûlée"]))
        #expect(query.snippet(of: "The best crème brûlée in town") == "The best [crème brûlée] in town")
        let text = "The quick brown fox jumps over the lazy dog."
        #expect(try SearchQuery("\"brown fox\" OR dog").highlights(in: text).map { text[$0] } == ["brown fox", "dog"])
        let fox = try SearchQuery("fox")
        #expect(fox.snippet(of: text, words: 5) == "…quick brown [fox] jumps over…")
        #expect(fox.snippet(of: "A fox.", highlight: { "<b>\($0)</b>" }) == "A <b>fox</b>.")
    }

    // MARK: Relevance

    /// The formula, spelled as ``SearchQuery`` computes it, so the results are bit for bit equal.
    private func score(tf: Double, length: Double) -> Double {
        tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / 10))
    }

    @Test func relevanceSumsEachPositiveAtomsTermFrequencyScore() throws {
        #expect(try SearchQuery("apple").relevance(of: ["apple pie", "apple"]) == score(tf: 2, length: 3))
        #expect(abs(try SearchQuery("apple").relevance(of: ["apple pie", "apple"]) - 1.712062256809338) < 1e-12)
        #expect(try SearchQuery("apple OR pie").relevance(of: ["pie pie pie", nil]) == score(tf: 3, length: 3))
        #expect(try SearchQuery("apple pie").relevance(of: ["apple", "pie tart"]) == score(tf: 1, length: 3) + score(tf: 1, length: 3))
        #expect(try SearchQuery("\"apple pie\"").relevance(of: ["apple pie apple pie", "pie"]) == score(tf: 2, length: 5))
        #expect(try SearchQuery("appl*").relevance(of: ["apple apples app"]) == score(tf: 2, length: 3))
        // The right side of a NOT never counts; an atom written twice counts twice.
        #expect(try SearchQuery("apple NOT cherry").relevance(of: ["apple apple tart"]) == score(tf: 2, length: 3))
        #expect(try SearchQuery("apple apple").relevance(of: ["apple"]) == 2 * score(tf: 1, length: 1))
    }

    @Test func relevanceIsZeroWithoutAMatchAndRanksFrequentAndShortDocumentsFirst() throws {
        let query = try SearchQuery("apple")
        #expect(query.relevance(of: ["pie"]) == 0)
        #expect(query.relevance(of: [nil]) == 0)
        #expect(try SearchQuery("apple NOT pie").relevance(of: ["apple pie"]) == 0)
        #expect(query.relevance(of: ["apple apple tart"]) > query.relevance(of: ["apple tart tart"]))
        #expect(query.relevance(of: ["apple"]) > query.relevance(of: ["apple", "and a long description of the pie"]))
    }

    // MARK: Highlights

    @Test func highlightsCoverWholeTokensOfPositiveAtomsMergingOverlaps() throws {
        let text = "The quick brown fox jumps over the lazy dog."
        func highlighted(_ query: String, _ text: String = text) throws -> [Substring] {
            try SearchQuery(query).highlights(in: text).map { text[$0] }
        }
        #expect(try highlighted("qu* lazy") == ["quick", "lazy"])
        #expect(try highlighted("fox NOT dog") == ["fox"])   // never the right side of a NOT, match or not
        #expect(try highlighted("\"quick brown\" \"brown fox\" fox") == ["quick brown fox"])
        #expect(try highlighted("quick brown") == ["quick", "brown"])   // adjacent, not overlapping
        #expect(try highlighted("the") == ["The", "the"])
        #expect(try highlighted("cat") == [])
        #expect(try highlighted("\"creme brulee\"", "Une crème—brûlée\u{301}!") == ["crème—brûlée\u{301}"])
    }

    // MARK: Snippets

    @Test func snippetsShowTheFirstMatchInContextAndMarkCuts() throws {
        let text = "The quick brown fox jumps over the lazy dog."
        #expect(try SearchQuery("fox").snippet(of: text) == "The quick brown [fox] jumps over the lazy dog.")
        #expect(try SearchQuery("the").snippet(of: text) == "[The] quick brown fox jumps over [the] lazy dog.")
        #expect(try SearchQuery("dog").snippet(of: text, words: 5) == "…jumps over the lazy [dog].")
        #expect(try SearchQuery("the").snippet(of: text, words: 5) == "[The] quick brown fox jumps…")
        #expect(try SearchQuery("fox").snippet(of: text, words: 1) == "…[fox]…")
        #expect(try SearchQuery("fox").snippet(of: text, words: 2) == "…[fox] jumps…")
        #expect(try SearchQuery("\"quick brown fox jumps\"").snippet(of: text, words: 2) == "…[quick brown]…")
        #expect(try SearchQuery("lazy OR quick").snippet(of: text, words: 4) == "The [quick] brown fox…")
        #expect(try SearchQuery("fox").snippet(of: "  \n«fox» and hound \n") == "«[fox]» and hound")
        #expect(try SearchQuery("fox").snippet(of: text, highlight: { $0.uppercased() }) == "The quick brown FOX jumps over the lazy dog.")
    }

    @Test func snippetsAreNilWithoutAMatchingPositiveAtom() throws {
        #expect(try SearchQuery("cat").snippet(of: "The dog.") == nil)
        #expect(try SearchQuery("fox NOT dog").snippet(of: "The dog.") == nil)
        #expect(try SearchQuery("fox").snippet(of: "") == nil)
    }
}

/// Random documents and queries, run by ``SearchQuery/matches(_:)`` and by SQLite FTS5 over
/// ``SearchQuery/fts5Expression``: the two must find the same rows, through any column filter.
@Suite struct SearchQueryFTS5AgreementTests {
    /// Words with case, accent and spelling variants, words that are several tokens, keywords in lower
    /// case, and canonically equivalent spellings that the index keeps apart.
    private static let vocabulary = [
        "apple", "Apple", "APPLE", "apples", "applesauce", "app", "pie", "Pie", "pies", "pi",
        "crème", "creme", "CRÈME", "Cre\u{300}me", "brûlée", "brulee", "BRÛLÉE", "e-mail", "email", "E-Mail", "mail",
        "naïve", "naive", "café", "cafe", "straße", "strasse", "STRASSE", "ſtop", "stop", "σίσυφος", "ΣΊΣΥΦΟΣ",
        "日本語", "日本", "über", "Uber", "co-op", "coop", "and", "or", "not", "x²", "42", "ǅemal",
        "\u{D55C}\u{AD6D}", "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}", "ﬁle", "file", "İstanbul", "istanbul", "Ǡdam",
    ]
    private static let separators = [" ", " ", " ", ", ", ". ", "-", " — ", "!\n", "'", "/", " \u{301}"]

    private static func randomColumn(using random: inout SplitMix64) -> String? {
        if Int.random(in: 0..<6, using: &random) == 0 { return nil }
        var text = ""
        for index in 0..<Int.random(in: 0...7, using: &random) {
            if index > 0 { text += separators.randomElement(using: &random)! }
            text += vocabulary.randomElement(using: &random)!
        }
        return text
    }

    private static func randomQuery(depth: Int, using random: inout SplitMix64) -> String {
        if depth == 0 || Int.random(in: 0..<10, using: &random) < 4 { return randomAtom(using: &random) }
        let lhs = randomQuery(depth: depth - 1, using: &random)
        let rhs = randomQuery(depth: depth - 1, using: &random)
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return "\(lhs) \(rhs)"
        case 1: return "\(lhs) AND \(rhs)"
        case 2: return "\(lhs) OR \(rhs)"
        case 3: return "\(lhs) NOT \(rhs)"
        case 4: return "(\(lhs) OR \(rhs))"
        default: return "(\(lhs)) NOT (\(rhs))"
        }
    }

    private static func randomAtom(using random: inout SplitMix64) -> String {
        let word = vocabulary.randomElement(using: &random)!
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<4:
            return word
        case 4:
            return word + "*"
        case 5..<8:
            let words = (0..<Int.random(in: 1...3, using: &random)).map { _ in vocabulary.randomElement(using: &random)! }
            let star = ["", "", "*", " *"].randomElement(using: &random)!
            return "\"" + words.joined(separator: Bool.random(using: &random) ? " " : "-") + "\"" + star
        case 8:
            return ["+++", "\"\"", "—", "¿?"].randomElement(using: &random)!
        default:
            return String(word.prefix(Int.random(in: 1...3, using: &random))) + "*"
        }
    }

    /// `text` with each highlighted range in brackets, as FTS5's `highlight(…, '[', ']')` writes it.
    private static func bracketed(_ text: String, _ ranges: [Range<String.Index>]) -> String {
        var result = ""
        var cursor = text.startIndex
        for range in ranges {
            result += text[cursor..<range.lowerBound] + "[" + text[range] + "]"
            cursor = range.upperBound
        }
        return result + text[cursor...]
    }

    @Test func matchesFindsTheRowsSQLiteFTS5FindsAndHighlightsTheSameTokens() throws {
        var random = SplitMix64(seed: 0xF75_5EA4C4)
        let documents = (0..<120).map { _ in (0..<3).map { _ in Self.randomColumn(using: &random) } }
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE VIRTUAL TABLE documents USING fts5(c0, c1, c2, tokenize='unicode61 remove_diacritics 2')")
        try connection.inWriteTransaction {
            let insert = try connection.prepare("INSERT INTO documents(rowid, c0, c1, c2) VALUES (?, ?, ?, ?)")
            for (row, document) in documents.enumerated() {
                try insert.bind(Int64(row), at: 1)
                for (column, text) in document.enumerated() {
                    if let text { try insert.bind(text, at: Int32(column + 2)) } else { try insert.bindNull(at: Int32(column + 2)) }
                }
                try insert.execute()
            }
        }
        let select = try connection.prepare("""
            SELECT rowid, highlight(documents, 1, '[', ']') FROM documents WHERE documents MATCH ? ORDER BY rowid
            """)
        let filters: [(String, [Int])] = [("{c0 c1 c2}", [0, 1, 2]), ("{c0 c1}", [0, 1]), ("{c1}", [1])]
        var compared = 0, someButNotAll = 0, highlightsCompared = 0, dropped = 0
        var mismatches: [String] = []
        for _ in 0..<300 {
            let text = Self.randomQuery(depth: 3, using: &random)
            let query: SearchQuery
            do {
                query = try SearchQuery(text)
            } catch {
                #expect(error.message == "the search query has no words to search for", "\(text): \(error)")
                dropped += 1
                continue
            }
            for (filter, columns) in filters {
                try select.bind("\(filter) : (\(query.fts5Expression))", at: 1)
                var sqliteRows: [Int] = []
                var sqliteHighlights: [Int: String] = [:]
                while try select.step() {
                    let row = Int(select.int64(at: 0))
                    sqliteRows.append(row)
                    sqliteHighlights[row] = select.string(at: 1)
                }
                select.reset()
                let rows = documents.indices.filter { row in query.matches(columns.map { documents[row][$0] }) }
                compared += 1
                if !rows.isEmpty && rows.count < documents.count { someButNotAll += 1 }
                if rows != sqliteRows {
                    mismatches.append("\(text) \(filter) → \(query.fts5Expression): SQLite \(sqliteRows), matches \(rows)")
                }
                // FTS5 highlights the phrases that took part in the row's match; with no NOT and every
                // positive atom in the column, that is every atom, as highlights(in:) does.
                guard !query.fts5Expression.contains(" NOT ") else { continue }
                for row in rows where sqliteRows.contains(row) {
                    guard let column = documents[row][1] else { continue }
                    let tokens = [SearchTokenizer.foldedTokens(in: column)]
                    guard query.root.positiveAtoms.allSatisfy({ $0.occurrenceCount(in: tokens) > 0 }) else { continue }
                    highlightsCompared += 1
                    let ours = Self.bracketed(column, query.highlights(in: column))
                    if !ours.utf8.elementsEqual((sqliteHighlights[row] ?? "").utf8) {
                        mismatches.append("highlight \(text) in \(searchEscaped(column)): SQLite \(searchEscaped(sqliteHighlights[row] ?? "")), ours \(searchEscaped(ours))")
                    }
                }
            }
        }
        #expect(compared >= 750, "only \(compared) comparisons (\(dropped) queries without words)")
        #expect(someButNotAll >= compared / 3, "only \(someButNotAll) of \(compared) queries told rows apart")
        #expect(highlightsCompared >= 200, "only \(highlightsCompared) highlights compared")
        #expect(mismatches.isEmpty, "\(mismatches.count) disagreements; first ones:\n\(mismatches.prefix(20).joined(separator: "\n"))")
    }
}
