import DataStack
import Foundation

/// What the peer writes to stdout: one JSON object per line, each written
/// with one `write(2)` (no buffering), so that a reader sees every line as
/// soon as it is written and a killed peer leaves at most one line cut off.
enum PeerOutput {
    /// An importer's line, written after the save returned: the save is committed.
    struct Saved: Codable, Sendable {
        /// The `Entry` the save inserted: `<importer name>-<n>`, n from 1.
        var saved: String
        /// The save's history transaction number.
        var token: Int64
        /// The value the save gave the shared counter.
        var counter: Int64
        /// How many times the save was tried (1 + merge conflicts on the counter).
        var attempts: Int
        /// When `save()` was called (seconds since 1970, the machine's clock), for merge latency.
        var at: Double?
    }

    /// An importer's line for a save the store refused (with `--keep-going`):
    /// its changes were discarded.
    struct Failed: Codable, Sendable {
        /// The `Entry` the save would have inserted.
        var failed: String
        /// The `PersistentStoreError` code (`ioFailure`, …).
        var code: String
        /// The error's description.
        var error: String
    }

    /// A viewer's line (and the `read` mode's one line).
    struct Seen: Codable, Sendable, Equatable {
        /// The names of the entries the main context fetches, sorted.
        var entries: [String]
        /// The counter's value in the main context (nil while there is no counter).
        var counter: Int64?
        /// The last history transaction the main context merged (nil for `read`).
        var token: Int64?
        /// When the line was written (seconds since 1970, the machine's clock; nil for `read`).
        var at: Double?
    }

    static func write<Line: Encodable>(_ line: Line) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Encoding strings and integers cannot fail.
        guard var data = try? encoder.encode(line) else { return }
        data.append(0x0A)
        FileHandle.standardOutput.write(data)
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("datastack-postgresql-peer: \(message)\n".utf8))
        exit(1)
    }
}
