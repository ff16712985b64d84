import Foundation

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

/// JSON text of the dictionaries and arrays the commands build, keys sorted so
/// output is stable and can be compared.
enum JSONText {
    /// One line: a JSON Lines record.
    static func line(_ object: Any) throws -> String {
        try text(object, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// Indented, for a single document.
    static func pretty(_ object: Any) throws -> String {
        try text(object, options: [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted])
    }

    private static func text(_ object: Any, options: JSONSerialization.WritingOptions) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: object, options: options)
        return String(decoding: data, as: UTF8.self)
    }
}
