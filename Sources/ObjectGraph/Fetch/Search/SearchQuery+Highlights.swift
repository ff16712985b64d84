// MARK: - Highlights & Snippets

extension SearchQuery {
    /// The ranges of `text` that the query's words and phrases match, in
    /// order and not overlapping.
    ///
    /// Only positive atoms count: those not inside the right-hand side of a
    /// NOT (`apple NOT pie` highlights `apple`, never `pie`). Each occurrence
    /// covers whole tokens, from the first token's first character to the
    /// last token's last one, so a prefix search highlights the whole word
    /// (`appl*` highlights `Apples`) and a phrase highlights the punctuation
    /// between its words. Overlapping occurrences are merged. Occurrences are
    /// highlighted whether or not `text` matches the whole query, like FTS5's
    /// `highlight()`.
    ///
    /// ```swift
    /// let query = try SearchQuery("\"brown fox\" OR dog")
    /// let text = "The quick brown fox jumps over the lazy dog."
    /// query.highlights(in: text).map { text[$0] }   // ["brown fox", "dog"]
    /// ```
    ///
    /// - Complexity: O(*n* × *a*): *n* tokens in the text, *a* atoms in the query.
    public func highlights(in text: String) -> [Range<String.Index>] {
        let tokens = SearchTokenizer.tokens(in: text)
        return matchedSpans(in: tokens).map { tokens[$0.lowerBound].range.lowerBound..<tokens[$0.upperBound - 1].range.upperBound }
    }

    /// A short excerpt of `text` around its first match, for a result list.
    ///
    /// The excerpt holds at most `words` tokens with the first match (see
    /// ``highlights(in:)``) in the middle, moved toward an end of the text
    /// when the text is short there. It runs from its first token to its last
    /// one and keeps the text between them as it is; where it reaches an end
    /// of `text` it keeps the punctuation there too (whitespace at the ends is
    /// trimmed), and where it cuts `text` it says so with "…". Every match
    /// inside the excerpt is wrapped with `highlight` (a match longer than
    /// the excerpt is cut with it).
    ///
    /// ```swift
    /// let query = try SearchQuery("fox")
    /// query.snippet(of: "The quick brown fox jumps over the lazy dog.", words: 5)
    /// // "…quick brown [fox] jumps over…"
    /// query.snippet(of: "A fox.", highlight: { "<b>\($0)</b>" })   // "A <b>fox</b>."
    /// ```
    ///
    /// - Parameters:
    ///   - words: The most tokens the excerpt holds; at least 1.
    ///   - highlight: Wraps each match, `[fox]` by default.
    /// - Returns: The excerpt, or nil when nothing in `text` matches a positive atom.
    /// - Complexity: O(*n* × *a*): *n* tokens in the text, *a* atoms in the query.
    public func snippet(of text: String, words: Int = 12, highlight: (Substring) -> String = { "[\($0)]" }) -> String? {
        precondition(words > 0, "a snippet needs room for at least one word")
        let tokens = SearchTokenizer.tokens(in: text)
        let spans = matchedSpans(in: tokens)
        guard let first = spans.first else { return nil }

        // The window of tokens [start, end): the first match centered, then slid to fit the text.
        var start = first.lowerBound
        if first.count < words {
            start = max(0, first.lowerBound - (words - first.count) / 2)
            start = min(start, max(0, tokens.count - words))
        }
        let end = min(tokens.count, start + words)

        var lower = start == 0 ? text.startIndex : tokens[start].range.lowerBound
        var upper = end == tokens.count ? text.endIndex : tokens[end - 1].range.upperBound
        let scalars = text.unicodeScalars
        while lower < upper, scalars[lower].properties.isWhitespace { lower = scalars.index(after: lower) }
        while lower < upper, scalars[scalars.index(before: upper)].properties.isWhitespace { upper = scalars.index(before: upper) }

        var excerpt = start > 0 ? "…" : ""
        var cursor = lower
        for span in spans where span.lowerBound < end && span.upperBound > start {
            let from = tokens[max(span.lowerBound, start)].range.lowerBound
            let to = tokens[min(span.upperBound, end) - 1].range.upperBound
            excerpt += text[cursor..<from]
            excerpt += highlight(text[from..<to])
            cursor = to
        }
        excerpt += text[cursor..<upper]
        if end < tokens.count { excerpt += "…" }
        return excerpt
    }

    /// The token spans `[first, last + 1)` of every positive atom's occurrence in `tokens`,
    /// sorted, overlapping spans merged.
    private func matchedSpans(in tokens: [SearchToken]) -> [Range<Int>] {
        let folded = tokens.map(\.folded)
        var spans: [Range<Int>] = []
        for atom in root.positiveAtoms {
            for start in atom.occurrences(in: folded) {
                spans.append(start..<(start + atom.tokens.count))
            }
        }
        spans.sort { $0.lowerBound < $1.lowerBound || ($0.lowerBound == $1.lowerBound && $0.upperBound > $1.upperBound) }
        var merged: [Range<Int>] = []
        for span in spans {
            if let last = merged.last, span.lowerBound < last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, span.upperBound)
            } else {
                merged.append(span)
            }
        }
        return merged
    }
}
