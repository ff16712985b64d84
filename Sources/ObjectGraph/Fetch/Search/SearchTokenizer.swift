/// One token of a searched text: its folded form and where it is in the text.
///
/// ``folded`` is what the index stores and what query words are compared
/// with, byte for byte (see ``SearchTokenizer``).
package struct SearchToken: Sendable {
    /// The token case-folded and without diacritics, as SQLite's `unicode61` tokenizer writes it.
    package var folded: String
    /// The token in the tokenized text: from its first token character to its last token
    /// character or diacritic (Unicode-scalar aligned, not necessarily `Character` aligned),
    /// the byte range SQLite reports for it.
    package var range: Range<String.Index>

    package init(folded: String, range: Range<String.Index>) {
        self.folded = folded
        self.range = range
    }
}

/// Splits text into search tokens exactly as SQLite FTS5's
/// `tokenize='unicode61 remove_diacritics 2'` does.
///
/// ```swift
/// SearchTokenizer.tokens(in: "Crème brûlée, e-mail").map(\.folded)   // ["creme", "brulee", "e", "mail"]
/// ```
///
/// Full-text search runs twice: as SQL against the store's FTS5 index, and in
/// memory (the in-memory store, unsaved objects). Both must find the same
/// objects, so this tokenizer reproduces SQLite's byte for byte, over every
/// Unicode scalar (`SearchTokenizerTests` checks each one against the system
/// SQLite):
///
/// - A token starts at a token character: a letter (`L*`), a number (`N*`),
///   private use (`Co`), or a scalar SQLite's Unicode 6.1 tables do not
///   know. It runs on over token characters and *diacritics*, the combining
///   marks that can carry an accent on a Latin letter (U+0300 and friends).
///   Everything else separates tokens, and so does a diacritic that no token
///   character precedes.
/// - Each token character is case-folded (simple lowercase mapping, plus the
///   case-folding specials such as `ſ` → `s` and final `ς` → `σ`), then a
///   letter that decomposes into an ASCII letter and diacritics becomes the
///   ASCII letter (`ǖ` → `u`), and the diacritic marks themselves vanish
///   (`"x\u{301}x"` is the one token `"xx"`).
///
/// The rules live in ``SearchFolding``.
///
/// Related SQLite documentation: <https://sqlite.org/fts5.html#unicode61_tokenizer>
///
/// - Complexity: O(*n*) in the text's length. ASCII takes a fast path; other
///   scalars below U+2000 are looked up in a table built once.
package enum SearchTokenizer {
    /// The tokens of `text`, in order.
    package static func tokens(in text: String) -> [SearchToken] {
        var tokens: [SearchToken] = []
        forEachToken(in: text) { folded, range in
            tokens.append(SearchToken(folded: String(decoding: folded, as: UTF8.self), range: range))
        }
        return tokens
    }

    /// The folded tokens of `text`, without their ranges.
    package static func foldedTokens(in text: String) -> [String] {
        var tokens: [String] = []
        forEachToken(in: text) { folded, _ in tokens.append(String(decoding: folded, as: UTF8.self)) }
        return tokens
    }

    /// Calls `body` with each token's folded UTF-8 bytes and its range in `text`.
    ///
    /// The bytes are only valid during the call.
    private static func forEachToken(in text: String, _ body: (ArraySlice<UInt8>, Range<String.Index>) -> Void) {
        let scalars = text.unicodeScalars
        var folded: [UInt8] = []
        folded.reserveCapacity(32)
        var tokenStart: String.Index?
        var tokenEnd = scalars.startIndex
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let next = scalars.index(after: index)
            let fold = SearchFolding.fold(scalar)
            if fold == SearchFolding.separator {
                if let start = tokenStart {
                    body(folded[...], start..<tokenEnd)
                    folded.removeAll(keepingCapacity: true)
                    tokenStart = nil
                }
            } else if fold == SearchFolding.vanishes {
                // A diacritic continues a token (and ends up inside its range) but never starts one.
                if tokenStart != nil { tokenEnd = next }
            } else {
                if tokenStart == nil { tokenStart = index }
                tokenEnd = next
                if fold < 0x80 {
                    folded.append(UInt8(truncatingIfNeeded: fold))
                } else {
                    UTF8.encode(Unicode.Scalar(fold).unsafelyUnwrapped) { folded.append($0) }
                }
            }
            index = next
        }
        if let start = tokenStart {
            body(folded[...], start..<tokenEnd)
        }
    }
}
