import Foundation

/// What SQLite's `unicode61 remove_diacritics 2` tokenizer does with each
/// Unicode scalar: separate tokens, vanish inside one, or become a folded scalar.
///
/// SQLite carries its own Unicode tables, which date from Unicode 6.1; Swift's
/// are much newer. The rules below rebuild SQLite's answers from Swift's
/// Unicode properties, restricted to what Unicode 6.1 knew, plus the handful
/// of scalars where the two disagree. They were measured over every Unicode
/// scalar, and `SearchTokenizerTests` measures them again against the
/// system SQLite on every run, so a toolchain whose Unicode data moves fails
/// that test rather than search results.
///
/// - Scalars Unicode 6.1 did not have (unassigned, or added later) are token
///   characters, kept as they are: SQLite's category lookup treats them so.
/// - Otherwise letters (`L*`), numbers (`N*`), private use (`Co`) and
///   noncharacters are token characters, and so are the *diacritics*: the
///   combining marks that appear alone after an ASCII letter in a canonical
///   decomposition (U+0300 COMBINING GRAVE ACCENT…). Diacritics vanish, and
///   one that follows no token character separates like punctuation.
/// - A token character is case-folded: its simple lowercase mapping when that
///   scalar is also in Unicode 6.1, or one of the case-folding specials
///   (``caseFoldSpecials``). If the result decomposes canonically into an
///   ASCII letter followed only by diacritics, it becomes that letter.
///
/// Related SQLite source: `ext/fts5/fts5_unicode2.c` (its tables are generated
/// from Unicode 6.1 data).
///
/// - Complexity: O(1) per scalar. ASCII is a `switch`. The rest of the Basic
///   Multilingual Plane comes from a 128 KB table, built the first time a
///   non-ASCII scalar is looked up (about 30 ms, once per process; a `static
///   let`, so thread-safe without a lock). Scalars beyond it (emoji, rare
///   CJK) are computed on the spot from Swift's property tables.
package enum SearchFolding {
    /// ``fold(_:)``'s answer for a scalar that separates tokens.
    ///
    /// U+FFFF, which no scalar folds to (it separates tokens itself), so the table stores it in 16 bits.
    package static var separator: UInt32 { 0xFFFF }
    /// ``fold(_:)``'s answer for a diacritic: it continues a token, adding nothing to it, but starts none.
    ///
    /// U+FFFE, which no scalar folds to either.
    package static var vanishes: UInt32 { 0xFFFE }

    /// What `scalar` becomes in a token: ``separator``, ``vanishes``, or the folded scalar's value.
    @inline(__always)
    package static func fold(_ scalar: Unicode.Scalar) -> UInt32 {
        fold(scalar.value)
    }

    /// ``fold(_:)-(Unicode.Scalar)`` for a scalar's value (which must be a valid scalar value).
    @inline(__always)
    package static func fold(_ value: UInt32) -> UInt32 {
        if value < 0x80 {
            switch value {
            case 0x41...0x5A: return value + 0x20                   // A-Z
            case 0x30...0x39, 0x61...0x7A: return value             // 0-9, a-z
            default: return separator
            }
        }
        if value < 0x1_0000 { return UInt32(table[Int(value)]) }
        return foldBeyondTable(Unicode.Scalar(value).unsafelyUnwrapped)
    }

    // MARK: - Unicode 6.1 differences

    /// Case foldings SQLite applies where `Unicode.Scalar.Properties.lowercaseMapping` gives
    /// another scalar or several: `CaseFolding.txt`'s simple foldings of letters that are already
    /// lower case (`ſ` → `s`, `ς` → `σ`, `µ` → `μ`…), `ẞ` → `ß`, and `İ` → `i`.
    static let caseFoldSpecials: [UInt32: UInt32] = [
        0xB5: 0x3BC, 0x17F: 0x73, 0x3C2: 0x3C3, 0x3D0: 0x3B2, 0x3D1: 0x3B8, 0x3D5: 0x3C6, 0x3D6: 0x3C0,
        0x3F0: 0x3BA, 0x3F1: 0x3C1, 0x3F5: 0x3B5, 0x130: 0x69, 0x1E9B: 0x1E61, 0x1E9E: 0xDF, 0x345: 0x3B9,
        0x1FBE: 0x3B9,
    ]

    /// Scalars whose general category changed after Unicode 6.1 from a mark to a letter
    /// (New Tai Lue vowel signs and tone marks, two Vedic signs), and the two noncharacters
    /// SQLite's table leaves out: SQLite still separates tokens at them.
    private static func isSeparatorSinceUnicode61(_ value: UInt32) -> Bool {
        switch value {
        case 0x19B0...0x19C0, 0x19C8, 0x19C9, 0x1CF2, 0x1CF3, 0xFFFE, 0xFFFF: return true
        default: return false
        }
    }

    /// Mongolian letters U+1885 and U+1886 became marks in Unicode 9; SQLite keeps them as letters.
    private static func isLetterBeforeUnicode9(_ value: UInt32) -> Bool {
        value == 0x1885 || value == 0x1886
    }

    /// Ǡ and ǡ (A and a with dot above and macron): SQLite folds case but keeps the diacritics.
    private static func keepsDiacritics(_ value: UInt32) -> Bool {
        value == 0x1E0 || value == 0x1E1
    }

    /// Whether Unicode 6.1 (SQLite's tables) has `scalar`.
    private static func isInUnicode61(_ scalar: Unicode.Scalar) -> Bool {
        guard let age = scalar.properties.age else { return false }
        return age.major < 6 || (age.major == 6 && age.minor <= 1)
    }

    // MARK: - Computing folds

    /// Letters that decompose into an ASCII letter and diacritics, and the diacritics, all lie below this.
    private static let decomposingLimit: UInt32 = 0x2000

    /// ``fold(_:)`` for every scalar of the Basic Multilingual Plane (surrogate values are separators).
    /// A BMP scalar folds to a BMP scalar, so 16 bits hold every answer.
    private static let table: [UInt16] = {
        let diacritics = diacriticMarks()
        return (0..<UInt32(0x1_0000)).map { value in
            guard let scalar = Unicode.Scalar(value) else { return UInt16(separator) }
            let folded = computeFold(scalar, diacritics: diacritics)
            assert(folded < 0x1_0000, "U+\(String(value, radix: 16)) folds outside the BMP")
            return UInt16(truncatingIfNeeded: folded)
        }
    }()

    /// The combining marks that occur as the single mark in the canonical
    /// decomposition of a letter that decomposes into an ASCII letter.
    private static func diacriticMarks() -> Set<UInt32> {
        var marks = Set<UInt32>()
        for value in UInt32(0xC0)..<decomposingLimit {
            guard let scalar = Unicode.Scalar(value), isLetter(scalar) else { continue }
            let parts = canonicalDecomposition(of: scalar)
            if parts.count == 2, isASCIILetter(parts[0]) { marks.insert(parts[1].value) }
        }
        return marks
    }

    private static func computeFold(_ scalar: Unicode.Scalar, diacritics: Set<UInt32>) -> UInt32 {
        let value = scalar.value
        if diacritics.contains(value) { return vanishes }
        guard isTokenCharacter(scalar) else { return separator }
        guard isInUnicode61(scalar) else { return value }
        let lower = caseFolded(scalar)
        guard !keepsDiacritics(value), lower.value >= 0xC0, lower.value < decomposingLimit, isLetter(lower) else { return lower.value }
        let parts = canonicalDecomposition(of: lower)
        if parts.count >= 2, isASCIILetter(parts[0]), parts.dropFirst().allSatisfy({ diacritics.contains($0.value) }) {
            return parts[0].value
        }
        return lower.value
    }

    /// ``fold(_:)`` beyond the BMP: the same rules, where no scalar is a
    /// diacritic, and none decomposes into an ASCII letter.
    private static func foldBeyondTable(_ scalar: Unicode.Scalar) -> UInt32 {
        guard isTokenCharacter(scalar) else { return separator }
        guard isInUnicode61(scalar) else { return scalar.value }
        return caseFolded(scalar).value
    }

    /// Whether `scalar` belongs in a token (diacritics aside).
    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if isSeparatorSinceUnicode61(value) { return false }
        if isLetterBeforeUnicode9(value) { return true }
        guard isInUnicode61(scalar) else { return true }
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .decimalNumber, .letterNumber, .otherNumber, .privateUse, .unassigned:
            return true
        default:
            return false
        }
    }

    /// The simple case fold of a Unicode 6.1 scalar, to a Unicode 6.1 scalar.
    private static func caseFolded(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        if let special = caseFoldSpecials[scalar.value], let folded = Unicode.Scalar(special) { return folded }
        guard scalar.properties.changesWhenLowercased else { return scalar }   // most scalars; skips building a String
        let lower = scalar.properties.lowercaseMapping.unicodeScalars
        if lower.count == 1, let only = lower.first, isInUnicode61(only) { return only }
        return scalar
    }

    private static func canonicalDecomposition(of scalar: Unicode.Scalar) -> [Unicode.Scalar] {
        Array(String(scalar).decomposedStringWithCanonicalMapping.unicodeScalars)
    }

    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter: return true
        default: return false
        }
    }

    private static func isASCIILetter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x41...0x5A, 0x61...0x7A: return true
        default: return false
        }
    }
}
