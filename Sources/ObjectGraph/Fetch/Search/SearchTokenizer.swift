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
/// The rules live in ``SearchFolding``. Tokens come out whole; FTS5 keeps
/// only the first 32,768 bytes of a longer one, and query matching compares
/// just those bytes too.
///
/// Related SQLite documentation: <https://sqlite.org/fts5.html#unicode61_tokenizer>
///
/// - Complexity: O(*n*) in the text's length, over its UTF-8 bytes. ASCII
///   takes a fast path; the rest of the Basic Multilingual Plane is one
///   table lookup (see ``SearchFolding``).
package enum SearchTokenizer {
    /// The tokens of `text`, in order.
    package static func tokens(in text: String) -> [SearchToken] {
        var tokens: [SearchToken] = []
        let utf8 = text.utf8
        // Byte offsets only grow: walk on from the last index (O(1) a step for a native string).
        var lastIndex = utf8.startIndex
        var lastOffset = 0
        forEachToken(in: text) { folded, start, end in
            let lower = utf8.index(lastIndex, offsetBy: start - lastOffset)
            lastIndex = utf8.index(lower, offsetBy: end - start)
            lastOffset = end
            tokens.append(SearchToken(folded: String(decoding: folded, as: UTF8.self), range: lower..<lastIndex))
        }
        return tokens
    }

    /// The folded tokens of `text`, without their ranges.
    package static func foldedTokens(in text: String) -> [String] {
        var tokens: [String] = []
        forEachToken(in: text) { folded, _, _ in tokens.append(String(decoding: folded, as: UTF8.self)) }
        return tokens
    }

    /// Calls `body` with each token's folded UTF-8 bytes and its range in `text`'s UTF-8, as byte offsets.
    ///
    /// Works on the UTF-8 bytes, decoding scalars by hand: a String's bytes are valid UTF-8.
    /// The folded bytes are only valid during the call.
    private static func forEachToken(in text: String, _ body: (UnsafeBufferPointer<UInt8>, Int, Int) -> Void) {
        var text = text   // withUTF8 needs a mutable string; this copy shares the storage of a native one
        text.withUTF8 { bytes in
            // Locals of this closure, not captured from outside it: no exclusivity checks per byte.
            var folded: [UInt8] = []
            folded.reserveCapacity(64)
            var tokenStart = -1   // -1: not in a token
            var tokenEnd = 0
            var position = 0
            while position < bytes.count {
                let lead = bytes[position]
                let value: UInt32
                let length: Int
                if lead < 0x80 {
                    value = UInt32(lead)
                    length = 1
                } else if lead < 0xE0 {
                    value = UInt32(lead & 0x1F) << 6 | UInt32(bytes[position + 1] & 0x3F)
                    length = 2
                } else if lead < 0xF0 {
                    value = UInt32(lead & 0x0F) << 12 | UInt32(bytes[position + 1] & 0x3F) << 6 | UInt32(bytes[position + 2] & 0x3F)
                    length = 3
                } else {
                    value = UInt32(lead & 0x07) << 18 | UInt32(bytes[position + 1] & 0x3F) << 12
                        | UInt32(bytes[position + 2] & 0x3F) << 6 | UInt32(bytes[position + 3] & 0x3F)
                    length = 4
                }
                let next = position + length
                let fold = SearchFolding.fold(value)
                if fold == SearchFolding.separator {
                    if tokenStart >= 0 {
                        folded.withUnsafeBufferPointer { body($0, tokenStart, tokenEnd) }
                        folded.removeAll(keepingCapacity: true)
                        tokenStart = -1
                    }
                } else if fold == SearchFolding.vanishes {
                    // A diacritic continues a token (and ends up inside its range) but never starts one.
                    if tokenStart >= 0 { tokenEnd = next }
                } else {
                    if tokenStart < 0 { tokenStart = position }
                    tokenEnd = next
                    if fold < 0x80 {
                        folded.append(UInt8(truncatingIfNeeded: fold))
                    } else if fold == value {
                        folded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[position..<next]))
                    } else {
                        UTF8.encode(Unicode.Scalar(fold).unsafelyUnwrapped) { folded.append($0) }
                    }
                }
                position = next
            }
            if tokenStart >= 0 { folded.withUnsafeBufferPointer { body($0, tokenStart, tokenEnd) } }
        }
    }
}
