import DataStackPostgreSQL
import DataStackSync
import Foundation

// MARK: - Pulling changes

extension PostgreSQLSyncHub {
    /// The log's changes after `sequence`, in sequence order, at most `limit`
    /// of them (``pull(after:limit:decodedBy:)`` with
    /// ``DataStackSync/SyncCodec/modelFree``).
    public func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try pull(after: sequence, limit: limit, decodedBy: .modelFree)
    }

    /// The log's changes after `sequence`, in sequence order, at most `limit`
    /// of them, decoded by `codec`; an empty array when the replica has them all.
    ///
    /// It reads the chunk rows that hold sequences `sequence + 1` through
    /// `sequence + limit` and decodes each whole: changes at or below
    /// `sequence` in the first row are dropped after decoding (the objects
    /// they insert are numbered all the same, so later changes may name them),
    /// as are changes beyond the limit in the last.
    ///
    /// One statement reads the oldest kept sequence and the rows, so it sees
    /// a ``purge()`` entirely or not at all. Sequences come without gaps
    /// (``push(_:encodedBy:)`` commits them in order), so the next call asks for what
    /// follows the last one returned.
    ///
    /// - Complexity: one round trip; O(*n* log *m*) on the server, *n* = `limit`,
    ///   *m* = the log's rows (the `last_sequence` index).
    /// - Throws: ``DataStackSync/SyncError``: `.snapshotRequired`, naming
    ///   `sequence` and the oldest sequence kept, when changes after `sequence`
    ///   were purged, or naming `sequence` and the hub's last when `sequence` is
    ///   beyond it (the hub's database was restored from an older backup or
    ///   replaced: the replica holds changes the hub lost, and would otherwise
    ///   skip the new changes the hub numbers again from there);
    ///   `.corruptChange`, naming the row's sequences, when its bytes do not
    ///   decode, or decode to changes of another replica, local sequences or
    ///   count than the row files them under (which idempotent pushes rely on);
    ///   `.hubFailure` for a `limit` below 1 or a negative `sequence`;
    ///   `.offline` when the server cannot be reached.
    public func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        guard limit >= 1, sequence >= 0 else {
            throw SyncError(.hubFailure, message: """
                pull(after: \(sequence), limit: \(limit)) from the sync hub at \(reportedURL): \
                the sequence must be 0 or more and the limit at least 1
                """)
        }
        let (through, overflow) = sequence.addingReportingOverflow(Int64(limit))
        let upTo = overflow ? Int64.max : through
        let (oldest, last, rows) = try withSession("pulling changes after sequence \(sequence)") { connection in
            let result = try connection.execute(cached: """
                SELECT m.oldest_sequence, m.last_sequence, c.first_sequence, c.last_sequence, c.replica::text, c.first_local,
                       c.last_local, c.chunk FROM datastack_sync_meta AS m
                LEFT JOIN LATERAL (
                    SELECT first_sequence, last_sequence, replica, first_local, last_local, chunk FROM datastack_sync_chunk
                    WHERE last_sequence > $1::int8 AND first_sequence <= $2::int8 ORDER BY first_sequence
                ) AS c ON true
                ORDER BY c.first_sequence
                """, [PostgreSQLValue(sequence), PostgreSQLValue(upTo)])
            let oldest = try result.int64(row: 0, column: 0) ?? 1
            let last = try result.int64(row: 0, column: 1) ?? 0
            var rows: [ChunkRow] = []
            for row in 0..<result.rowCount where !result.isNull(row: row, column: 2) {
                // NOT NULL columns: a NULL here is a damaged row, reported as such below.
                rows.append(ChunkRow(
                    firstSequence: try result.int64(row: row, column: 2) ?? 0,
                    lastSequence: try result.int64(row: row, column: 3) ?? -1,
                    replica: result.string(row: row, column: 4) ?? "",
                    firstLocal: try result.int64(row: row, column: 5) ?? 0,
                    lastLocal: try result.int64(row: row, column: 6) ?? -1,
                    bytes: try result.bytes(row: row, column: 7) ?? []))
            }
            return (oldest, last, rows)
        }
        guard sequence <= last else {
            throw SyncError(.snapshotRequired, message: """
                the replica applied the sync hub's changes through sequence \(sequence), but the hub at \(reportedURL) \
                has given sequences only through \(last) (was its database restored or replaced?): start again from a snapshot
                """)
        }
        guard oldest <= sequence + 1 else {
            throw SyncError(.snapshotRequired, message: """
                the sync hub at \(reportedURL) purged the changes after sequence \(sequence) that the replica needs: \
                the oldest sequence it keeps is \(oldest); start again from a snapshot
                """)
        }
        var learned: [Int64: UUID] = [:]
        var pulled: [SequencedChange] = []
        for row in rows {
            let changes = try decode(row, codec, &learned)
            for (index, change) in changes.enumerated() {
                let at = row.firstSequence + Int64(index)
                if at > sequence, at <= upTo { pulled.append(SequencedChange(sequence: at, change: change)) }
            }
        }
        return pulled
    }

    /// A row's changes, checked against what the row files them under.
    func decode(_ row: ChunkRow, _ codec: SyncCodec, _ learned: inout [Int64: UUID]) throws -> [SyncChange] {
        let name = "the chunk of sequences \(row.firstSequence)...\(row.lastSequence) of the sync hub at \(reportedURL)"
        let changes: [SyncChange]
        do throws(SyncError) {
            changes = try codec.decode(row.bytes, firstSequence: row.firstSequence, learned: &learned)
        } catch {
            guard error.code == .corruptChange else { throw error }
            throw SyncError(.corruptChange, message: "\(name) does not decode: \(error.message)")
        }
        let count = row.lastSequence - row.firstSequence + 1
        guard let first = changes.first, Int64(changes.count) == count,
              first.replica.uuidString.lowercased() == row.replica.lowercased(),
              changes.indices.allSatisfy({ changes[$0].localSequence == row.firstLocal + Int64($0) }),
              changes.last?.localSequence == row.lastLocal else {
            throw SyncError(.corruptChange, message: """
                \(name) holds \(changes.count) changes of replica \(changes.first?.replica.uuidString ?? "none"), local sequences \
                \(changes.first?.localSequence ?? 0)...\(changes.last?.localSequence ?? 0), but the row files \(count) of replica \
                \(row.replica), local sequences \(row.firstLocal)...\(row.lastLocal)
                """)
        }
        return changes
    }

    /// A row of the log as read, before its bytes are decoded.
    struct ChunkRow: Sendable {
        var firstSequence: Int64
        var lastSequence: Int64
        var replica: String
        var firstLocal: Int64
        var lastLocal: Int64
        var bytes: [UInt8]
    }
}
