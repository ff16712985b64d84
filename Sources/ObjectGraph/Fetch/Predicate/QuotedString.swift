import Foundation

/// Quoted string literals in the syntax JSON and predicate formats share:
/// quotes, backslashes and control characters escaped (`\n`, `\r` and `\t` by
/// their short forms); every other character as is. They differ only in how
/// the other control characters are written.
package enum QuotedString {
    /// Appends `string` in quotes as JSON text, for the SQL compiler's array
    /// parameters (``PredicateSQLList``).
    package static func appendJSON(_ string: String, to json: inout String) {
        append(string, to: &json) { $0.value < 0x20 ? String(format: "\\u%04x", $0.value) : nil }
    }

    /// A string as a predicate's quoted literal (the format of
    /// `FetchExpression.constant(.string(_))`, which the `datastack` tool
    /// prints strings in, so that they can be pasted into `--where`).
    package static func predicateLiteral(_ string: String) -> String {
        var out = ""
        append(string, to: &out) {
            $0.value < 0x20 || $0.value == 0x7F ? "\\u{" + String($0.value, radix: 16) + "}" : nil
        }
        return out
    }

    /// Appends `string` in quotes, `escape` writing the scalars other than
    /// quote, backslash, `\n`, `\r` and `\t` that need escaping (nil: as is).
    private static func append(_ string: String, to out: inout String, escape: (Unicode.Scalar) -> String?) {
        out += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if let escaped = escape(scalar) { out += escaped } else { out.unicodeScalars.append(scalar) }
            }
        }
        out += "\""
    }
}
