import Foundation
import DataStack

/// Where the tool writes: standard output, buffered by the C library so a
/// dump of a million objects does not make a million system calls, and
/// standard error, written at once (messages and progress).
struct Output: Sendable {
    private let isStandardError: Bool

    static let standard = Output(isStandardError: false)
    static let error = Output(isStandardError: true)

    /// Writes `text` and a newline.
    func write(_ text: String) {
        if isStandardError {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }

    /// Writes `text` as it is, for a progress bar that redraws its line.
    func writeWithoutNewline(_ text: String) {
        if isStandardError {
            FileHandle.standardError.write(Data(text.utf8))
        } else {
            print(text, terminator: "")
        }
    }

    /// Hands what standard output has buffered to the system.
    func flush() {
        fflush(nil)
    }

    /// Whether standard error is a terminal, where a progress bar can redraw itself.
    static var standardErrorIsTerminal: Bool { isatty(2) != 0 }
}

/// Rows of text aligned in columns, for the readable (non-JSON) output.
enum TextTable {
    /// Each row's cells padded to their column's widest cell, two spaces
    /// apart; the last cell of a row is not padded.
    static func lines(_ rows: [[String]], indent: String = "") -> [String] {
        var widths: [Int] = []
        for row in rows {
            for (index, cell) in row.enumerated() {
                if index >= widths.count { widths.append(0) }
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            let cells = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }
            return indent + cells.joined(separator: "  ")
        }
    }
}

/// JSON text of the values the commands build: strings, booleans, integers,
/// finite doubles, `NSNull`, arrays and string-keyed dictionaries.
///
/// Keys come out sorted by their characters, so that output is the same from
/// run to run. Not `JSONSerialization` with `.sortedKeys`: it compares keys
/// with the locale's collation, which took four fifths of a dump's time
/// (perf, 20,000 rows); the values here need nothing it does beyond this.
enum JSONText {
    /// One line: a JSON Lines record.
    static func line(_ object: Any) throws -> String {
        var out = ""
        try write(object, to: &out, indent: nil)
        return out
    }

    /// Indented by two spaces, for a single document.
    static func pretty(_ object: Any) throws -> String {
        var out = ""
        try write(object, to: &out, indent: "")
        return out
    }

    private static func write(_ value: Any, to out: inout String, indent: String?) throws {
        switch value {
        case let string as String: try append(string, to: &out)
        case let flag as Bool: out += flag ? "true" : "false"
        case let number as Int: out += String(number)
        case let number as Int64: out += String(number)
        case let number as Double:
            guard number.isFinite else { throw ToolError(.internalError, "\(number) has no JSON form") }
            out += "\(number)"   // the shortest text that reads back as the same double: valid JSON when finite
        case is NSNull: out += "null"
        case let array as [Any]:
            try container("[", "]", array.map { (nil, $0) }, to: &out, indent: indent)
        case let dictionary as [String: Any]:
            try container("{", "}", dictionary.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, to: &out, indent: indent)
        default:
            throw ToolError(.internalError, "a value of type \(type(of: value)) has no JSON form")
        }
    }

    private static func container(_ open: String, _ close: String, _ members: [(key: String?, value: Any)],
                                  to out: inout String, indent: String?) throws {
        out += open
        let inner = indent.map { $0 + "  " }
        for (offset, member) in members.enumerated() {
            if offset > 0 { out += "," }
            if let inner { out += "\n" + inner }
            if let key = member.key {
                try append(key, to: &out)
                out += indent == nil ? ":" : ": "
            }
            try write(member.value, to: &out, indent: inner)
        }
        if let indent, !members.isEmpty { out += "\n" + indent }
        out += close
    }

    /// `string` as a JSON string: between quotes as it is when nothing in it
    /// needs escaping (most text), otherwise as Foundation's JSON writer escapes it.
    private static func append(_ string: String, to out: inout String) throws {
        let needsEscaping = string.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard needsEscaping else {
            out += "\""
            out += string
            out += "\""
            return
        }
        let text = try JSONSerialization.data(withJSONObject: string, options: [.fragmentsAllowed, .withoutEscapingSlashes])
        out += String(decoding: text, as: UTF8.self)
    }
}
