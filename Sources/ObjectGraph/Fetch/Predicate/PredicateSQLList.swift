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
/// forms). Lists of doubles, dates, data, nil or a mix keep a parameter each.
package enum PredicateSQLList {
    static let minimumCount = 32

    /// The bound values of `elements` as one JSON array, and whether they are
    /// strings (else integers); nil when the list keeps a parameter per element.
    package static func json(_ elements: [PredicateNode], options: ComparisonOptions) -> (json: String, isText: Bool)? {
        guard elements.count >= minimumCount, options.isEmpty else { return nil }
        var json = "["
        var isText: Bool?
        for element in elements {
            guard case .constant(let value) = element else { return nil }
            if isText != nil { json += "," }
            switch PredicateScalar.binding(for: value) {
            case .integer(let number) where isText != true:
                isText = false
                json += String(number)
            case .string(let string) where isText != false:
                isText = true
                QuotedString.appendJSON(string, to: &json)
            default:
                return nil
            }
        }
        return (json + "]", isText ?? false)
    }
}
