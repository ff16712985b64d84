import Foundation

/// One token of a predicate format.
struct PredicateToken: Equatable {
    enum Kind: Equatable {
        /// A word: a key, or a keyword (keywords are matched case-insensitively by the parser).
        case identifier(String)
        /// `#word`: always a key, even if the word is reserved.
        case escapedIdentifier(String)
        /// A quoted string, escapes resolved.
        case string(String)
        /// A number literal, as written (the parser converts it, so `-` can apply first).
        case number(String)
        /// `%@`, `%K`, `%d`…: the conversion as written after `%` (`"@"`, `"K"`, `"ld"`).
        case formatSpecifier(String)
        /// `$name`.
        case variable(String)
        /// `@count`, `@sum`…: the name after `@`.
        case collectionOperator(String)
        /// Punctuation and symbolic operators: `( ) { } [ ] , . - == != <> < <= =< > >= => && || !`.
        case symbol(String)
        /// The end of the format.
        case end
    }

    var kind: Kind
    /// Offset of the first character, in Unicode scalars from the start of the format.
    var offset: Int
}

/// Splits a predicate format into tokens.
///
/// The lexer works on Unicode scalars; ``FetchPredicateError`` offsets are
/// converted to characters when an error is thrown.
struct PredicateLexer {
    private let scalars: [Unicode.Scalar]
    private var position = 0

    init(_ format: String) {
        scalars = Array(format.unicodeScalars)
    }

    /// A syntax error at a scalar offset; the parser converts it into a ``FetchPredicateError``.
    struct SyntaxError: Error {
        var offset: Int
        var expected: String
        var reason: String?
    }

    /// All tokens, ending with `.end`.
    mutating func tokenize() throws(SyntaxError) -> [PredicateToken] {
        var tokens: [PredicateToken] = []
        while true {
            let token = try next()
            tokens.append(token)
            if token.kind == .end { return tokens }
        }
    }

    private func peek(_ ahead: Int = 0) -> Unicode.Scalar? {
        let index = position + ahead
        return index < scalars.count ? scalars[index] : nil
    }

    private static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        c == "_" || c.properties.isAlphabetic
    }

    private static func isIdentifierContinue(_ c: Unicode.Scalar) -> Bool {
        c == "_" || c.properties.isAlphabetic || c.properties.numericType != nil
    }

    private static func isDigit(_ c: Unicode.Scalar?) -> Bool {
        guard let c else { return false }
        return c >= "0" && c <= "9"
    }

    private mutating func next() throws(SyntaxError) -> PredicateToken {
        while let c = peek(), c.properties.isWhitespace { position += 1 }
        let start = position
        guard let c = peek() else { return PredicateToken(kind: .end, offset: start) }

        if Self.isIdentifierStart(c) {
            return PredicateToken(kind: .identifier(readWord()), offset: start)
        }
        if Self.isDigit(c) {
            return PredicateToken(kind: .number(try readNumber()), offset: start)
        }
        switch c {
        case "'", "\"":
            return PredicateToken(kind: .string(try readString(quote: c)), offset: start)
        case "#":
            return PredicateToken(kind: .escapedIdentifier(try readWordAfterSigil(expected: "a key after '#'")), offset: start)
        case "$":
            return PredicateToken(kind: .variable(try readWordAfterSigil(expected: "a variable name after '$'")), offset: start)
        case "@":
            return PredicateToken(kind: .collectionOperator(try readWordAfterSigil(expected: "a collection operator (@count, @sum, @avg, @min, @max)")),
                                  offset: start)
        case "%":
            return PredicateToken(kind: .formatSpecifier(try readFormatSpecifier()), offset: start)
        default:
            break
        }
        let two = peek(1).map { String(c) + String($0) }
        if let two, ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"].contains(two) {
            position += 2
            return PredicateToken(kind: .symbol(two), offset: start)
        }
        if "(){}[],.-=<>!".unicodeScalars.contains(c) {
            position += 1
            return PredicateToken(kind: .symbol(String(c)), offset: start)
        }
        throw SyntaxError(offset: start, expected: "a key, a value or an operator, not '\(Character(c))'")
    }

    private mutating func readWord() -> String {
        var word = String.UnicodeScalarView()
        while let c = peek(), Self.isIdentifierContinue(c) {
            word.append(c)
            position += 1
        }
        return String(word)
    }

    /// The word after a one-character sigil (`#key`, `$variable`, `@count`),
    /// which must start right after it; `expected` names what is missing.
    private mutating func readWordAfterSigil(expected: String) throws(SyntaxError) -> String {
        position += 1
        guard let first = peek(), Self.isIdentifierStart(first) else {
            throw SyntaxError(offset: position, expected: expected)
        }
        return readWord()
    }

    /// Reads `123`, `1.5`, `1e-3`, `0x1F`, `0o17`, `0b101`, returning the text.
    private mutating func readNumber() throws(SyntaxError) -> String {
        var text = ""
        if peek() == "0", let radix = peek(1), ["x", "X", "o", "O", "b", "B"].contains(radix) {
            position += 2
            text = "0" + String(radix).lowercased()
            let digits: String = switch radix {
            case "x", "X": "0123456789abcdefABCDEF"
            case "o", "O": "01234567"
            default: "01"
            }
            while let c = peek(), digits.unicodeScalars.contains(c) || c == "_" {
                if c != "_" { text.unicodeScalars.append(c) }
                position += 1
            }
            guard text.count > 2 else { throw SyntaxError(offset: position, expected: "digits after '\(text)'") }
            if let c = peek(), Self.isIdentifierContinue(c) {
                throw SyntaxError(offset: position, expected: "a digit or the end of the number, not '\(Character(c))'")
            }
            return text
        }
        while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
        if peek() == ".", Self.isDigit(peek(1)) {
            text += "."
            position += 1
            while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
        }
        if let e = peek(), e == "e" || e == "E" {
            var lookahead = 1
            if let sign = peek(1), sign == "+" || sign == "-" { lookahead = 2 }
            if Self.isDigit(peek(lookahead)) {
                text += "e"
                if lookahead == 2, let sign = peek(1) { text.unicodeScalars.append(sign) }
                position += lookahead
                while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
            } else {
                throw SyntaxError(offset: position + lookahead, expected: "the digits of an exponent")
            }
        }
        if let c = peek(), Self.isIdentifierContinue(c) {
            throw SyntaxError(offset: position, expected: "an operator or the end of the number, not '\(Character(c))'")
        }
        return text
    }

    private mutating func readString(quote: Unicode.Scalar) throws(SyntaxError) -> String {
        let start = position
        position += 1
        var value = String.UnicodeScalarView()
        while true {
            guard let c = peek() else {
                throw SyntaxError(offset: start, expected: "a closing \(quote == "'" ? "'" : "\"") for the string starting here")
            }
            position += 1
            if c == quote { return String(value) }
            guard c == "\\" else { value.append(c); continue }
            guard let escaped = peek() else {
                throw SyntaxError(offset: start, expected: "a closing \(quote == "'" ? "'" : "\"") for the string starting here")
            }
            position += 1
            switch escaped {
            case "n": value.append("\n")
            case "t": value.append("\t")
            case "r": value.append("\r")
            case "0": value.append("\0")
            case "\\", "'", "\"": value.append(escaped)
            case "u":
                value.append(try readUnicodeEscape(escapeStart: position - 2))
            default:
                // Unknown escapes stay as written, so regular expressions like '\d+' work.
                value.append("\\")
                value.append(escaped)
            }
        }
    }

    /// Reads the `XXXX` of `\uXXXX` or the `{X…}` of `\u{X…}`.
    private mutating func readUnicodeEscape(escapeStart: Int) throws(SyntaxError) -> Unicode.Scalar {
        var hex = ""
        if peek() == "{" {
            position += 1
            while let c = peek(), c != "}", hex.count <= 8 { hex.unicodeScalars.append(c); position += 1 }
            guard peek() == "}" else { throw SyntaxError(offset: escapeStart, expected: "'}' closing a \\u{…} escape") }
            position += 1
        } else {
            for _ in 0..<4 {
                guard let c = peek() else { break }
                hex.unicodeScalars.append(c)
                position += 1
            }
        }
        guard !hex.isEmpty, hex.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit }),
              let code = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(code) else {
            throw SyntaxError(offset: escapeStart, expected: "a Unicode escape \\uXXXX or \\u{X…} naming a valid character")
        }
        return scalar
    }

    /// Reads `%@`, `%K`, `%d`, `%i`, `%u`, `%f`, `%e`, `%g`, with `l`, `ll`, `h`, `q` length modifiers.
    private mutating func readFormatSpecifier() throws(SyntaxError) -> String {
        let start = position
        position += 1
        var text = ""
        while let c = peek(), c == "l" || c == "h" || c == "q", text.count < 2 {
            text.unicodeScalars.append(c)
            position += 1
        }
        guard let conversion = peek() else {
            throw SyntaxError(offset: start, expected: "a format specifier (%@, %K, %d, %f)")
        }
        let allowed: String = text.isEmpty ? "@KdiufegDUO" : "diufeg"
        guard allowed.unicodeScalars.contains(conversion) else {
            throw SyntaxError(offset: start, expected: "a format specifier (%@, %K, %d, %f)")
        }
        position += 1
        text.unicodeScalars.append(conversion)
        return text
    }
}
