@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// A value as SQLite sees it: the in-memory evaluator compares these, so that
/// it gives the answers the SQL compiler's query gives.
///
/// Every ``PropertyValue`` maps onto one of SQLite's storage classes the way the
/// SQLite store writes it: booleans are integers 0/1, dates are seconds since
/// 2001-01-01 (a double), decimals are doubles, UUIDs 16-byte blobs, URLs their
/// absolute string, to-one relationships the destination's primary key. NaN
/// is NULL, as SQLite binds it.
///
/// Values order as SQLite orders them with the BINARY collation: NULL, then
/// numbers (integers and doubles compared exactly), then text (by UTF-8
/// bytes), then blobs (by bytes).
///
/// Related SQLite documentation: <https://sqlite.org/datatype3.html#comparisons>
package enum PredicateScalar: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
    /// An object, compared by ID (by primary key with numbers, as in SQL).
    case object(ObjectID)

    package init(_ value: PropertyValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self = .integer(v)
        case .double(let v): self = v.isNaN ? .null : .real(v)
        case .bool(let v): self = .integer(v ? 1 : 0)
        case .string(let v): self = .text(v)
        case .date(let v):
            let seconds = v.timeIntervalSinceReferenceDate
            self = seconds.isNaN ? .null : .real(seconds)
        case .data(let v): self = .blob(v)
        case .uuid(let v): self = .blob(Self.bytes(of: v))
        case .uri(let v): self = .text(v.absoluteString)
        case .decimal(let v):
            let double = Self.double(from: v)
            self = double.isNaN ? .null : .real(double)
        case .object(let id): self = .object(id)
        case .objects: self = .null
        }
    }

    /// The value bound to an SQL parameter for `value`: dates as
    /// `.double(timeIntervalSinceReferenceDate)`, booleans as `.integer(0/1)`,
    /// UUIDs as 16 bytes of `.data`, URLs as `.string(absoluteString)`, decimals
    /// as `.double`, objects as `.integer(primaryKey)` (-1 for a temporary ID,
    /// which no row has).
    package static func binding(for value: PropertyValue) -> PropertyValue {
        switch value {
        case .null, .integer, .string, .data: value
        case .double(let v): v.isNaN ? .null : value
        case .bool(let v): .integer(v ? 1 : 0)
        case .date(let v): .double(v.timeIntervalSinceReferenceDate)
        case .uuid(let v): .data(bytes(of: v))
        case .uri(let v): .string(v.absoluteString)
        case .decimal(let v): .double(double(from: v))
        case .object(let id): .integer(id.primaryKey ?? -1)
        case .objects: .null
        }
    }

    static func bytes(of uuid: UUID) -> Data {
        withUnsafeBytes(of: uuid.uuid) { Data($0) }
    }

    static func double(from decimal: Decimal) -> Double {
        NSDecimalNumber(decimal: decimal).doubleValue
    }

    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    // MARK: - Comparison

    /// SQLite's order of storage classes: numbers, then text, then blobs.
    private var classRank: Int {
        switch self {
        case .null: 0
        case .integer, .real, .object: 1
        case .text: 2
        case .blob: 3
        }
    }

    /// Compares as SQLite compares two values without affinity: nil when either is NULL.
    package static func compare(_ a: PredicateScalar, _ b: PredicateScalar) -> ComparisonResult? {
        if a.isNull || b.isNull { return nil }
        let rankA = a.classRank, rankB = b.classRank
        if rankA != rankB { return rankA < rankB ? .orderedAscending : .orderedDescending }
        switch (a, b) {
        case (.text(let x), .text(let y)):
            return compareBytes(x.utf8, y.utf8)
        case (.blob(let x), .blob(let y)):
            return compareBytes(x, y)
        case (.object(let x), .object(let y)):
            if x == y { return .orderedSame }
            // Different objects are never equal, even two temporary IDs (both -1 in SQL, which has no such rows).
            let order = compareNumbers(a, b)
            return order != .orderedSame ? order : (x.hashValue < y.hashValue ? .orderedAscending : .orderedDescending)
        default:
            return compareNumbers(a, b)
        }
    }

    private static func compareBytes<C1: Collection, C2: Collection>(_ x: C1, _ y: C2) -> ComparisonResult
    where C1.Element == UInt8, C2.Element == UInt8 {
        var i = x.makeIterator(), j = y.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return .orderedSame
            case (nil, _): return .orderedAscending
            case (_, nil): return .orderedDescending
            case (let p?, let q?):
                if p != q { return p < q ? .orderedAscending : .orderedDescending }
            }
        }
    }

    private enum Number {
        case integer(Int64)
        case real(Double)
    }

    private var number: Number {
        switch self {
        case .integer(let v): .integer(v)
        case .real(let v): .real(v)
        // A temporary ID matches no row: -1, as it is bound in SQL.
        case .object(let id): .integer(id.primaryKey ?? -1)
        default: .integer(0)
        }
    }

    private static func compareNumbers(_ a: PredicateScalar, _ b: PredicateScalar) -> ComparisonResult {
        switch (a.number, b.number) {
        case (.integer(let x), .integer(let y)):
            return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        case (.real(let x), .real(let y)):
            return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        case (.integer(let x), .real(let y)):
            return compare(integer: x, real: y)
        case (.real(let x), .integer(let y)):
            switch compare(integer: y, real: x) {
            case .orderedAscending: return .orderedDescending
            case .orderedDescending: return .orderedAscending
            case .orderedSame: return .orderedSame
            }
        }
    }

    /// Compares an integer with a double exactly, as SQLite does (`sqlite3IntFloatCompare`).
    private static func compare(integer: Int64, real: Double) -> ComparisonResult {
        if real < -9223372036854775808.0 { return .orderedDescending }
        if real >= 9223372036854775808.0 { return .orderedAscending }
        let truncated = Int64(real.rounded(.towardZero))
        if integer < truncated { return .orderedAscending }
        if integer > truncated { return .orderedDescending }
        let fraction = real - Double(truncated)
        if fraction > 0 { return .orderedAscending }
        if fraction < 0 { return .orderedDescending }
        return .orderedSame
    }

    // MARK: - String operations (shared with the SQL functions)

    /// `DS_FOLD`: text folded by `options`; any other value unchanged.
    package static func fold(_ value: PredicateScalar, _ options: ComparisonOptions) -> PredicateScalar {
        guard !options.isEmpty, case .text(let text) = value else { return value }
        return .text(fold(text, options))
    }

    package static func fold(_ text: String, _ options: ComparisonOptions) -> String {
        if options.isEmpty { return text }
        return text.folding(options: options.foldingOptions, locale: nil)
    }

    /// `BEGINSWITH`, `ENDSWITH`, `CONTAINS`, `LIKE` and `MATCHES`, as the
    /// evaluator and the `DS_…` SQL functions both compute them: nil if either
    /// side is NULL, false if either is not text, else the test on the folded
    /// strings' UTF-8 bytes. Every string has the empty string as a prefix,
    /// suffix and substring.
    package static func stringTest(_ op: ComparisonOperator, _ a: PredicateScalar, _ b: PredicateScalar,
                                   _ options: ComparisonOptions) -> Bool? {
        if a.isNull || b.isNull { return nil }
        guard case .text(let text) = a, case .text(let pattern) = b else { return false }
        switch op {
        case .beginsWith:
            return fold(text, options).utf8.starts(with: fold(pattern, options).utf8)
        case .endsWith:
            return fold(text, options).utf8.reversed().starts(with: fold(pattern, options).utf8.reversed())
        case .contains:
            return containsBytes(Array(fold(text, options).utf8), Array(fold(pattern, options).utf8))
        case .like:
            return like(Array(fold(text, options).unicodeScalars), Array(fold(pattern, options).unicodeScalars))
        case .matches:
            return matches(text, pattern: pattern, options: options)
        default:
            return false
        }
    }

    private static func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        if needle.count > haystack.count { return false }
        let first = needle[0]
        for start in 0...(haystack.count - needle.count) where haystack[start] == first {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    /// `LIKE`: `*` matches any run of characters, `?` one character (a Unicode
    /// scalar), `\` escapes the next one; the pattern matches the whole text.
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar]) -> Bool {
        enum Element: Equatable {
            case literal(Unicode.Scalar)
            case one
            case any
        }
        var elements: [Element] = []
        var index = 0
        while index < pattern.count {
            let c = pattern[index]
            if c == "\\", index + 1 < pattern.count {
                elements.append(.literal(pattern[index + 1]))
                index += 2
                continue
            }
            elements.append(c == "*" ? .any : c == "?" ? .one : .literal(c))
            index += 1
        }
        // Greedy matching with one backtrack point: linear in practice, O(n·m) at worst.
        var t = 0, p = 0
        var starPattern = -1, starText = 0
        while t < text.count {
            if p < elements.count {
                switch elements[p] {
                case .any:
                    starPattern = p
                    starText = t
                    p += 1
                    continue
                case .one:
                    t += 1
                    p += 1
                    continue
                case .literal(let c) where c == text[t]:
                    t += 1
                    p += 1
                    continue
                case .literal:
                    break
                }
            }
            guard starPattern >= 0 else { return false }
            p = starPattern + 1
            starText += 1
            t = starText
        }
        while p < elements.count, elements[p] == .any { p += 1 }
        return p == elements.count
    }

    /// `MATCHES`: the ICU regular expression matches the whole text. `[c]`
    /// ignores case; `[d]` folds diacritics in the text and the pattern. A
    /// pattern that does not compile matches nothing.
    static func matches(_ text: String, pattern: String, options: ComparisonOptions) -> Bool {
        let diacriticFolded = options.intersection(.diacriticInsensitive)
        guard let regex = regularExpression(fold(pattern, diacriticFolded), options: options) else { return false }
        let subject = fold(text, diacriticFolded)
        let range = NSRange(subject.startIndex..<subject.endIndex, in: subject)
        return regex.firstMatch(in: subject, options: [], range: range) != nil
    }

    /// The compiled, whole-string form of `pattern`, or nil if it does not compile.
    static func regularExpression(_ pattern: String, options: ComparisonOptions) -> NSRegularExpression? {
        let key = RegexKey(pattern: pattern, caseInsensitive: options.contains(.caseInsensitive))
        if let cached = regexCache.withLock({ $0.value(forKey: key) }) { return cached.regex }
        var regexOptions: NSRegularExpression.Options = []
        if key.caseInsensitive { regexOptions.insert(.caseInsensitive) }
        let compiled: NSRegularExpression?
        // The pattern must compile on its own (ICU refuses an empty one, which matches only "").
        if pattern.isEmpty || (try? NSRegularExpression(pattern: pattern, options: regexOptions)) != nil {
            // Anchor the whole pattern: ICU's `matches()` semantics, which Foundation does not expose.
            compiled = try? NSRegularExpression(pattern: "\\A(?:" + pattern + ")\\z", options: regexOptions)
        } else {
            compiled = nil
        }
        regexCache.withLock { $0.updateValue(CachedRegex(regex: compiled), forKey: key) }
        return compiled
    }

    private struct RegexKey: Hashable, Sendable {
        var pattern: String
        var caseInsensitive: Bool
    }

    // @unchecked Sendable: NSRegularExpression is immutable and thread-safe once created.
    private struct CachedRegex: @unchecked Sendable {
        var regex: NSRegularExpression?
    }

    private static let regexCache = Locked(ClockCache<RegexKey, CachedRegex>(capacity: 256))
}
