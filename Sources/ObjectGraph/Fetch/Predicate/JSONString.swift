import Foundation

/// Strings as JSON text, for the SQL compiler's array parameters (``PredicateSQLList``).
package enum JSONString {
    /// Appends `string` in quotes, with quotes, backslashes and control
    /// characters escaped (`\n`, `\r` and `\t` by their short forms); every
    /// other character as is.
    package static func append(_ string: String, to json: inout String) {
        json += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            case _ where scalar.value < 0x20: json += String(format: "\\u%04x", scalar.value)
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }
}
