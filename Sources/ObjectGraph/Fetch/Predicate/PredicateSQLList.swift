import Foundation

/// A long `IN` list of constants as the SQL compiler binds it: one parameter
/// holding a JSON array, read back by SQLite's `json_each`, rather than a
/// parameter per element.
///
/// Why: SQLite looks each numbered parameter (`?N`, as the compiler writes
/// them) up in a list of all the statement's parameters while it compiles
/// the statement, so an `IN` list of *n* parameters costs it *n*²/2 steps —
/// 50 million for 10,000 keys, more than running the query. One JSON
/// parameter costs one, and the statement no longer changes with the list's
/// length. Only lists of at least ``minimumCount`` integers (object IDs
/// included), or of strings, compared without case or diacritic folding,
/// take this form: values JSON holds exactly, which SQLite then compares as
/// it compares bound ones (the column's affinity applies to them in both
/// forms). Lists of doubles, dates, data, nil or a mix, and strings holding
/// U+0000, keep a parameter each.
package enum PredicateSQLList {
    static let minimumCount = 32

    /// The bound values of `elements` as one JSON array, and whether they are
    /// strings (else integers); nil when the list keeps a parameter per element.
    package static func json(_ elements: [PredicateNode], options: ComparisonOptions) -> (json: String, isText: Bool)? {
        guard elements.count >= minimumCount, options.isEmpty else { return nil }
        // Built as UTF-8 bytes, one string's bytes copied at once: a list of
        // 10,000 keys appended to a `String` a piece at a time cost ~2,000
        // instructions a key.
        var json: [UInt8] = [UInt8(ascii: "[")]
        json.reserveCapacity(elements.count * 16)
        var isText: Bool?
        for element in elements {
            guard case .constant(let value) = element else { return nil }
            if isText != nil { json.append(UInt8(ascii: ",")) }
            switch PredicateScalar.binding(for: value) {
            case .integer(let number) where isText != true:
                isText = false
                json.append(contentsOf: String(number).utf8)
            case .string(let string) where isText != false:
                isText = true
                var contiguous = string
                let appended = contiguous.withUTF8 { bytes -> Bool in
                    // SQLite's JSON reads `\u0000` as the end of the string, and would match
                    // what precedes it: such a list keeps a parameter per element.
                    if bytes.contains(0) { return false }
                    // UTF-8 continuation bytes are all 0x80 or above: a byte scan finds exactly
                    // the ASCII JSON escapes. Most keys have none and are copied as they are.
                    if bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                        var quoted = ""
                        QuotedString.appendJSON(string, to: &quoted)
                        json.append(contentsOf: quoted.utf8)
                    } else {
                        json.append(UInt8(ascii: "\""))
                        json.append(contentsOf: bytes)
                        json.append(UInt8(ascii: "\""))
                    }
                    return true
                }
                if !appended { return nil }
            default:
                return nil
            }
        }
        json.append(UInt8(ascii: "]"))
        return (String(decoding: json, as: UTF8.self), isText ?? false)
    }
}
