import Foundation

/// What the peer writes to stdout: one JSON object per line, each written with
/// one `write(2)`, so that a killed peer leaves at most its last line cut off
/// (the test's decoder drops it, as never reported).
enum SyncPeerOutput {
    /// One edit the peer saved: written after `save()` returned, so the edit is
    /// in the replica's store (and its history) when the line exists.
    struct Edit: Codable, Sendable {
        /// The edit's number in this run, from 0; several lines of one save share it.
        var edit: Int
        /// `insert`, `set`, `add`, `remove` or `delete`.
        var op: String
        var entity: String
        /// The object's `key`.
        var object: String
        /// The attribute or relationship (`set`, `add`, `remove`).
        var field: String?
        /// The new value (`set`; a to-one's destination by key; nil clears it),
        /// or the member's key (`add`, `remove`).
        var value: String?
    }

    /// One object of a dump: every value as text, relationships by key.
    struct Object: Codable, Sendable, Hashable {
        var entity: String
        var key: String
        /// Attributes and to-one relationships that are set (nil values left out).
        var values: [String: String]
        /// To-many relationships' members' keys, sorted.
        var members: [String: [String]]
    }

    /// A sync's outcome (edit runs write one per sync; `sync` writes its last).
    struct Synced: Codable, Sendable {
        var sync: String
        var pulledSequence: Int64?
        var pending: Int?
        var error: String?
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
        FileHandle.standardError.write(Data("datastack-sync-peer: \(message)\n".utf8))
        exit(1)
    }
}
