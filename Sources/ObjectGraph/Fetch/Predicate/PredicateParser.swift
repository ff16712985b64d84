import Foundation

/// A recursive-descent parser for the `NSPredicate` format grammar.
///
/// ```
/// predicate   := or
/// or          := and ( (OR | ||) and )*
/// and         := not ( (AND | &&) not )*
/// not         := (NOT | !) not | '(' predicate ')' | TRUEPREDICATE | FALSEPREDICATE | comparison
/// comparison  := [ANY | SOME | ALL | NONE] expression operator ['[' c|d|cd ']'] expression
/// operator    := = == != <> < <= =< > >= => BEGINSWITH ENDSWITH CONTAINS LIKE MATCHES IN BETWEEN
///              | MATCHES '[' search ']'       (full-text search; the value is a ``SearchQuery``)
/// expression  := primary ( '.' key | '.' @count | '.' @sum|@avg|@min|@max '.' keyPath )*
/// primary     := key | #key | SELF | $variable | %K | %@ | %d | %f … | string | number | -number
///              | TRUE | YES | FALSE | NO | NIL | NULL | '{' [expression (',' expression)*] '}'
///              | SUBQUERY '(' expression ',' $variable ',' predicate ')'
///              | CAST '(' value ',' 'NSDate' | 'NSUUID' | 'NSURL' | 'NSData' | 'NSDecimalNumber' | 'NSNumber' ')'
/// ```
///
/// Keywords are case-insensitive; precedence is NOT over AND over OR. Format
/// arguments are consumed left to right and converted to constants at once.
///
/// The parser never builds a tree deeper than ``FetchPredicate/maximumDepth``
/// or a key path longer than ``FetchPredicate/maximumKeyPathLength``: ``depth``
/// counts the levels open at each point (a parenthesized group as the OR and
/// the AND it may hold), so the recursion, and the stack it takes, stop at the
/// token that would pass the limit, which the error names.
struct PredicateParser {
    private let format: String
    private var tokens: [PredicateToken] = []
    private var index = 0
    private let arguments: [Any?]
    private var argumentIndex = 0
    /// The levels of the tree open here: at least the depth of the node being parsed.
    private var depth = 0

    /// A syntax or argument error at a scalar offset.
    typealias SyntaxError = PredicateLexer.SyntaxError

    /// Words that are never keys unless escaped with `#`.
    static let reservedWords: Set<String> = [
        "AND", "OR", "IN", "NOT", "ALL", "ANY", "SOME", "NONE", "LIKE", "CASEINSENSITIVE", "CI", "MATCHES",
        "CONTAINS", "BEGINSWITH", "ENDSWITH", "BETWEEN", "NULL", "NIL", "SELF", "TRUE", "YES", "FALSE", "NO",
        "FIRST", "LAST", "SIZE", "ANYKEY", "SUBQUERY", "FETCH", "CAST", "TRUEPREDICATE", "FALSEPREDICATE",
        "FUNCTION",
    ]

    /// Parses `format`, taking `%` arguments from `arguments` in order.
    static func parse(_ format: String, arguments: [Any?]) throws(FetchPredicateError) -> PredicateNode {
        var parser = PredicateParser(format: format, arguments: arguments)
        do throws(SyntaxError) {
            var lexer = PredicateLexer(format)
            parser.tokens = try lexer.tokenize()
            let predicate = try parser.parsePredicate()
            guard case .end = parser.current.kind else {
                throw parser.error(expected: "AND, OR or the end of the predicate")
            }
            return predicate
        } catch {
            throw parser.publicError(error)
        }
    }

    private init(format: String, arguments: [Any?]) {
        self.format = format
        self.arguments = arguments
    }

    // MARK: - Errors

    private func publicError(_ error: SyntaxError) -> FetchPredicateError {
        let offset = Self.characterOffset(ofScalar: error.offset, in: format)
        if let reason = error.reason {
            return FetchPredicateError(format: format, offset: offset, message: reason)
        }
        return FetchPredicateError(format: format, offset: offset, expected: error.expected)
    }

    /// Converts an offset in Unicode scalars into an offset in characters.
    static func characterOffset(ofScalar offset: Int, in format: String) -> Int {
        let scalars = format.unicodeScalars
        let clamped = min(max(offset, 0), scalars.count)
        let index = scalars.index(scalars.startIndex, offsetBy: clamped)
        return format.distance(from: format.startIndex, to: index)
    }

    private func error(expected: String, at token: PredicateToken? = nil) -> SyntaxError {
        SyntaxError(offset: (token ?? current).offset, expected: expected)
    }

    private func error(reason: String, at token: PredicateToken) -> SyntaxError {
        SyntaxError(offset: token.offset, expected: "", reason: reason)
    }

    // MARK: - Nesting

    /// Opens one level of the tree at the current token; every recursive rule
    /// calls it first (and ``leave()`` on the way out), so the parser's own
    /// recursion is bounded by ``FetchPredicate/maximumDepth``.
    private mutating func enter() throws(SyntaxError) {
        depth += 1
        if depth > FetchPredicate.maximumDepth {
            throw error(reason: PredicateLimits.depthReason, at: current)
        }
    }

    private mutating func leave() {
        depth -= 1
    }

    // MARK: - Tokens

    private var current: PredicateToken { tokens[index] }

    private mutating func advance() -> PredicateToken {
        let token = tokens[index]
        if index < tokens.count - 1 { index += 1 }
        return token
    }

    private func isKeyword(_ word: String, at offset: Int = 0) -> Bool {
        let position = min(index + offset, tokens.count - 1)
        if case .identifier(let name) = tokens[position].kind { return name.uppercased() == word }
        return false
    }

    private func isSymbol(_ symbol: String) -> Bool {
        if case .symbol(let s) = current.kind { return s == symbol }
        return false
    }

    private mutating func expectSymbol(_ symbol: String, _ description: String? = nil) throws(SyntaxError) {
        guard isSymbol(symbol) else { throw error(expected: description ?? "'\(symbol)'") }
        _ = advance()
    }

    // MARK: - Predicates

    private mutating func parsePredicate() throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        var terms = [try parseAnd()]
        while isKeyword("OR") || isSymbol("||") {
            _ = advance()
            terms.append(try parseAnd())
        }
        return terms.count == 1 ? terms[0] : .or(flattening: terms)
    }

    private mutating func parseAnd() throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        var terms = [try parseNot()]
        while isKeyword("AND") || isSymbol("&&") {
            _ = advance()
            terms.append(try parseNot())
        }
        return terms.count == 1 ? terms[0] : .and(flattening: terms)
    }

    private mutating func parseNot() throws(SyntaxError) -> PredicateNode {
        if isKeyword("NOT") || isSymbol("!") {
            try enter()
            defer { leave() }
            _ = advance()
            return .not(try parseNot())
        }
        if isSymbol("(") {
            _ = advance()
            let inner = try parsePredicate()
            try expectSymbol(")", "')' or AND, OR")
            return inner
        }
        if isKeyword("TRUEPREDICATE") { _ = advance(); return .truePredicate }
        if isKeyword("FALSEPREDICATE") { _ = advance(); return .falsePredicate }
        return try parseComparison()
    }

    private mutating func parseComparison() throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        var modifier = ComparisonModifier.direct
        if isKeyword("ANY") || isKeyword("SOME") { modifier = .any }
        else if isKeyword("ALL") { modifier = .all }
        else if isKeyword("NONE") { modifier = .none }
        if modifier != .direct { _ = advance() }

        if case .end = current.kind { throw error(expected: "a predicate") }
        let lhs = try parseExpression(what: modifier == .direct ? "a predicate" : "a key path after \(modifier.rawValue)")
        guard var op = parseOperator() else {
            throw error(expected: "a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES, IN, BETWEEN)")
        }
        if op == .matches, parseSearchOption() { op = .textSearch }
        let optionsToken = current
        let options = try parseOptions()
        if op == .textSearch, !options.isEmpty {
            throw error(reason: "MATCHES[search] always ignores case and diacritics; it takes no [c], [d] or [cd]", at: optionsToken)
        }
        let rhsToken = current
        let rhs = try parseExpression(what: "a value")
        switch op {
        case .between:
            switch rhs {
            case .collection(let bounds) where bounds.count == 2: break
            case .collection: throw error(reason: "BETWEEN needs two bounds, {low, high}", at: rhsToken)
            case .constant(let value) where !value.isNull: throw error(expected: "{low, high} after BETWEEN", at: rhsToken)
            default: break
            }
        case .textSearch:
            if case .constant = rhs {
                do {
                    _ = try PredicateSearch.query(from: rhs)
                } catch let problem as PredicateProblem {
                    throw error(reason: problem.reason, at: rhsToken)
                } catch {
                    throw self.error(reason: "\(error)", at: rhsToken)
                }
            }
        case .matches:
            if case .constant(.string(let pattern)) = rhs, PredicateScalar.regularExpression(pattern, options: options) == nil {
                throw error(reason: "the regular expression '\(pattern)' does not compile", at: rhsToken)
            }
        default:
            break
        }
        return .comparison(lhs: lhs, op: op, rhs: rhs, options: options, modifier: modifier)
    }

    private mutating func parseOperator() -> ComparisonOperator? {
        let op: ComparisonOperator?
        switch current.kind {
        case .symbol(let symbol):
            switch symbol {
            case "=", "==": op = .equal
            case "!=", "<>": op = .notEqual
            case "<": op = .less
            case "<=", "=<": op = .lessOrEqual
            case ">": op = .greater
            case ">=", "=>": op = .greaterOrEqual
            default: op = nil
            }
        case .identifier(let word):
            switch word.uppercased() {
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "CONTAINS": op = .contains
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            case "IN": op = .in
            case "BETWEEN": op = .between
            default: op = nil
            }
        default:
            op = nil
        }
        if op != nil { _ = advance() }
        return op
    }

    /// Consumes `[search]` after `MATCHES`, if it follows.
    private mutating func parseSearchOption() -> Bool {
        guard isSymbol("["), index + 2 < tokens.count, isKeyword("SEARCH", at: 1),
              case .symbol("]") = tokens[index + 2].kind else { return false }
        index += 3
        return true
    }

    /// Parses `[c]`, `[d]`, `[cd]` after an operator.
    private mutating func parseOptions() throws(SyntaxError) -> ComparisonOptions {
        guard isSymbol("[") else { return [] }
        _ = advance()
        guard case .identifier(let letters) = current.kind else {
            throw error(expected: "c, d or cd inside [ ]")
        }
        var options: ComparisonOptions = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            default: throw error(expected: "c, d or cd inside [ ]")
            }
        }
        _ = advance()
        try expectSymbol("]")
        return options
    }

    // MARK: - Expressions

    private mutating func parseExpression(what: String) throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        var expression = try parsePrimary(what: what)
        // The keys of a key path are gathered here and put into the node once:
        // rebuilding the node at each '.' would copy them all each time.
        var keys = expression.keyPathKeys
        while isSymbol(".") {
            let dot = advance()
            switch current.kind {
            case .identifier(let word) where !Self.reservedWords.contains(word.uppercased()):
                try appendKey(word, to: &keys, of: expression, at: dot)
            case .escapedIdentifier(let word):
                try appendKey(word, to: &keys, of: expression, at: dot)
            case .collectionOperator(let name):
                let operatorToken = advance()
                guard let function = AggregateFunction(rawValue: name.lowercased()) else {
                    throw error(expected: "@count, @sum, @avg, @min or @max", at: operatorToken)
                }
                expression = expression.replacingKeys(with: keys)
                try checkCollection(expression, at: operatorToken)
                var path: [String] = []
                if function != .count {
                    try expectSymbol(".", "'.' and a key path after @\(function.rawValue)")
                    try appendKey(at: current, to: &path, try parseKey())
                    while isSymbol(".") {
                        _ = advance()
                        try appendKey(at: current, to: &path, try parseKey())
                    }
                }
                expression = .aggregate(function, collection: expression, keyPath: path)
                keys = []
            default:
                throw error(expected: "a key or a collection operator after '.'")
            }
        }
        return expression.replacingKeys(with: keys)
    }

    /// Consumes the key at the current token and appends it to the keys of
    /// `expression`, which must be a key path or a variable.
    private mutating func appendKey(_ key: String, to keys: inout [String], of expression: PredicateNode,
                                    at dot: PredicateToken) throws(SyntaxError) {
        guard expression.isKeyPathOrVariable else {
            throw error(expected: "an operator; only a key path or a variable can be followed by '.key'", at: dot)
        }
        try appendKey(at: current, to: &keys, key)
        _ = advance()
    }

    /// Appends the key written at `token`, refusing a key path longer than
    /// ``FetchPredicate/maximumKeyPathLength`` there.
    private func appendKey(at token: PredicateToken, to keys: inout [String], _ key: String) throws(SyntaxError) {
        guard keys.count < FetchPredicate.maximumKeyPathLength else {
            throw error(reason: PredicateLimits.keyPathReason(), at: token)
        }
        keys.append(key)
    }

    private func checkCollection(_ expression: PredicateNode, at token: PredicateToken) throws(SyntaxError) {
        switch expression {
        case .keyPath(let keys) where !keys.isEmpty: return
        case .variable, .subquery: return
        default: throw error(reason: "a collection operator needs a to-many key path or a SUBQUERY before it", at: token)
        }
    }

    private mutating func parseKey() throws(SyntaxError) -> String {
        switch current.kind {
        case .identifier(let word) where !Self.reservedWords.contains(word.uppercased()):
            _ = advance()
            return word
        case .escapedIdentifier(let word):
            _ = advance()
            return word
        default:
            throw error(expected: "a key")
        }
    }

    private mutating func parsePrimary(what: String) throws(SyntaxError) -> PredicateNode {
        let token = current
        switch token.kind {
        case .identifier(let word):
            switch word.uppercased() {
            case "TRUE", "YES": _ = advance(); return .constant(.bool(true))
            case "FALSE", "NO": _ = advance(); return .constant(.bool(false))
            case "NIL", "NULL": _ = advance(); return .constant(.null)
            case "SELF": _ = advance(); return .keyPath([])
            case "SUBQUERY": return try parseSubquery()
            case "CAST": return try parseCast()
            case let upper where Self.reservedWords.contains(upper):
                throw error(expected: what)
            default:
                _ = advance()
                return .keyPath([word])
            }
        case .escapedIdentifier(let word):
            _ = advance()
            return .keyPath([word])
        case .string(let string):
            _ = advance()
            return .constant(.string(string))
        case .number(let text):
            _ = advance()
            return .constant(try number(text, negative: false, at: token))
        case .symbol("-"):
            _ = advance()
            guard case .number(let text) = current.kind else { throw error(expected: "a number after '-'") }
            let numberToken = advance()
            return .constant(try number(text, negative: true, at: numberToken))
        case .symbol("{"):
            try enter()
            defer { leave() }
            _ = advance()
            var elements: [PredicateNode] = []
            if isSymbol("}") { _ = advance(); return .collection([]) }
            while true {
                elements.append(try parseExpression(what: "a value"))
                if isSymbol(",") { _ = advance(); continue }
                try expectSymbol("}", "',' or '}'")
                return .collection(elements)
            }
        case .variable(let name):
            _ = advance()
            return .variable(name, [])
        case .formatSpecifier(let specifier):
            _ = advance()
            return try formatArgument(specifier, at: token)
        case .collectionOperator:
            throw error(reason: "a collection operator needs a to-many key path before it, as in updates.@count", at: token)
        case .end:
            throw error(expected: what)
        default:
            throw error(expected: what)
        }
    }

    private mutating func parseSubquery() throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        _ = advance()
        try expectSymbol("(", "'(' after SUBQUERY")
        let collection = try parseExpression(what: "a to-many key path")
        switch collection {
        case .keyPath(let keys) where !keys.isEmpty: break
        case .variable, .subquery: break
        default: throw error(expected: "',' after a to-many key path")
        }
        try expectSymbol(",", "',' after the collection of SUBQUERY")
        guard case .variable(let variable) = current.kind else {
            throw error(expected: "a $variable naming each element")
        }
        _ = advance()
        try expectSymbol(",", "',' after the variable of SUBQUERY")
        let predicate = try parsePredicate()
        try expectSymbol(")", "')' closing SUBQUERY")
        return .subquery(collection: collection, variable: variable, predicate: predicate)
    }

    /// `CAST(value, "NSDate")` and friends: the constants the printer writes for
    /// values that have no literal syntax.
    private mutating func parseCast() throws(SyntaxError) -> PredicateNode {
        try enter()
        defer { leave() }
        _ = advance()
        try expectSymbol("(", "'(' after CAST")
        let valueToken = current
        let value = try parseExpression(what: "a value to cast")
        try expectSymbol(",", "',' and a type name")
        let typeToken = current
        guard case .string(let typeName) = current.kind else {
            throw error(expected: "a quoted type name: \"NSDate\", \"NSUUID\", \"NSURL\", \"NSData\", \"NSDecimalNumber\" or \"NSNumber\"")
        }
        _ = advance()
        try expectSymbol(")", "')' closing CAST")
        let converted: PropertyValue?
        switch (typeName, value) {
        case ("NSDate", .constant(.integer(let seconds))):
            converted = .date(Date(timeIntervalSinceReferenceDate: Double(seconds)))
        case ("NSDate", .constant(.double(let seconds))):
            converted = .date(Date(timeIntervalSinceReferenceDate: seconds))
        case ("NSUUID", .constant(.string(let text))):
            converted = UUID(uuidString: text).map { .uuid($0) }
        case ("NSURL", .constant(.string(let text))):
            converted = URL(string: text).map { .uri($0) }
        case ("NSData", .constant(.string(let text))):
            converted = Data(base64Encoded: text).map { .data($0) }
        case ("NSDecimalNumber", .constant(.string(let text))):
            converted = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")).map { .decimal($0) }
        case ("NSNumber", .constant(.string(let text))):
            converted = Double(text).map { .double($0) }
        case ("NSManagedObjectID", _):
            throw error(reason: "an object ID can't be written in a format; pass the object or its ID with %@", at: valueToken)
        case ("NSDate", _), ("NSUUID", _), ("NSURL", _), ("NSData", _), ("NSDecimalNumber", _), ("NSNumber", _):
            converted = nil
        default:
            throw error(expected: "a type name \"NSDate\", \"NSUUID\", \"NSURL\", \"NSData\", \"NSDecimalNumber\" or \"NSNumber\"", at: typeToken)
        }
        guard let converted else {
            throw error(reason: "the value can't be cast to \(typeName)", at: valueToken)
        }
        return .constant(converted)
    }

    private func number(_ text: String, negative: Bool, at token: PredicateToken) throws(SyntaxError) -> PropertyValue {
        if text.hasPrefix("0x") || text.hasPrefix("0o") || text.hasPrefix("0b") {
            let radix = text.hasPrefix("0x") ? 16 : text.hasPrefix("0o") ? 8 : 2
            guard let magnitude = UInt64(text.dropFirst(2), radix: radix) else {
                throw error(reason: "the number \(text) is too large", at: token)
            }
            if negative {
                guard magnitude <= UInt64(Int64.max) + 1 else { throw error(reason: "the number -\(text) is too small", at: token) }
                return .integer(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
            }
            guard let value = Int64(exactly: magnitude) else { throw error(reason: "the number \(text) is too large", at: token) }
            return .integer(value)
        }
        let signed = negative ? "-" + text : text
        if !text.contains("."), !text.contains("e"), let integer = Int64(signed) {
            return .integer(integer)
        }
        guard let double = Double(signed) else { throw error(reason: "\(signed) is not a number", at: token) }
        return .double(double)
    }

    // MARK: - Format arguments

    private mutating func formatArgument(_ specifier: String, at token: PredicateToken) throws(SyntaxError) -> PredicateNode {
        let written = "%" + specifier
        guard argumentIndex < arguments.count else {
            throw error(reason: "\(written) has no argument (\(arguments.count) given)", at: token)
        }
        let argument = arguments[argumentIndex]
        argumentIndex += 1
        do {
            switch specifier.last {
            case "@":
                return try PredicateArgument.expression(from: argument, for: written, depth: depth)
            case "K":
                return .keyPath(try PredicateArgument.keyPath(from: argument))
            case "f", "e", "g":
                return try PredicateArgument.double(from: argument, for: written)
            default:
                return try PredicateArgument.integer(from: argument, for: written)
            }
        } catch let problem as PredicateProblem {
            throw error(reason: problem.reason, at: token)
        } catch {
            throw self.error(reason: "\(written): \(error)", at: token)
        }
    }
}
