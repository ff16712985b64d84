import Foundation

/// How far the migration of an older store got, shown while the stack is
/// set up — before the watchlist or the save log exists, so both modes share it.
enum MigrationProgressLine {
    /// Writes a progress bar redrawn in place, or a `{"migration": fraction}`
    /// line with `--json`. Called off the main queue.
    static func write(_ fraction: Double, json: Bool) {
        let line: String
        if json {
            line = "{\"migration\":\(fraction)}\n"
        } else {
            let width = 30
            let done = Int((fraction * Double(width)).rounded())
            line = "\r\u{1B}[2Kmigrating the store to the current model  [" + String(repeating: "#", count: done)
                + String(repeating: ".", count: width - done) + "] \(Int((fraction * 100).rounded()))%" + (fraction >= 1 ? "\n" : "")
        }
        FileHandle.standardOutput.write(Data(line.utf8))
    }
}
