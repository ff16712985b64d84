import DataStackPostgreSQL
import DataStackSync

// MARK: - Pulling changes

extension PostgreSQLSyncHub {
    /// The log's changes after `sequence`, in sequence order, at most `limit`
    /// of them; an empty array when the replica has them all.
    ///
    /// One statement reads the oldest kept sequence and the changes, so it sees
    /// a ``purge()`` entirely or not at all. Sequences come without gaps
    /// (``push(_:)`` commits them in order), so the next call asks for what
    /// follows the last one returned.
    ///
    /// - Complexity: one round trip; O(*n* log *m*) on the server, *n* = `limit`,
    ///   *m* = the log's size (the primary key's index).
    /// - Throws: ``DataStackSync/SyncError``: `.snapshotRequired`, naming
    ///   `sequence` and the oldest sequence kept, when changes after `sequence`
    ///   were purged, or naming `sequence` and the hub's last when `sequence` is
    ///   beyond it (the hub's database was restored from an older backup or
    ///   replaced: the replica holds changes the hub lost, and would otherwise
    ///   skip the new changes the hub numbers again from there);
    ///   `.corruptChange`, naming the sequence, when a change's bytes do not
    ///   decode, or decode to a change of another replica or local sequence
    ///   than the log files it under (which idempotent pushes rely on);
    ///   `.hubFailure` for a `limit` below 1 or a negative `sequence`;
    ///   `.offline` when the server cannot be reached.
    public func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        guard limit >= 1, sequence >= 0 else {
            throw SyncError(.hubFailure, message: """
                pull(after: \(sequence), limit: \(limit)) from the sync hub at \(reportedURL): \
                the sequence must be 0 or more and the limit at least 1
                """)
        }
        let (oldest, last, rows) = try withSession("pulling changes after sequence \(sequence)") { connection in
            let result = try connection.execute(cached: """
                SELECT m.oldest_sequence, m.last_sequence, l.sequence, l.change, l.replica::text, l.local_sequence FROM datastack_sync_meta AS m
                LEFT JOIN LATERAL (
                    SELECT sequence, change, replica, local_sequence FROM datastack_sync_log WHERE sequence > $1::int8 ORDER BY sequence LIMIT $2::int8
                ) AS l ON true
                ORDER BY l.sequence
                """, [PostgreSQLValue(sequence), PostgreSQLValue(Int64(limit))])
            let oldest = try result.int64(row: 0, column: 0) ?? 1
            let last = try result.int64(row: 0, column: 1) ?? 0
            var rows: [LogRow] = []
            for row in 0..<result.rowCount where !result.isNull(row: row, column: 2) {
                // NOT NULL columns: a NULL here is a damaged row, reported as such below.
                rows.append(LogRow(
                    sequence: try result.int64(row: row, column: 2) ?? 0,
                    bytes: try result.bytes(row: row, column: 3) ?? [],
                    replica: result.string(row: row, column: 4) ?? "",
                    localSequence: try result.int64(row: row, column: 5) ?? 0))
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
        return try rows.map { row in
            let change: SyncChange
            do throws(SyncError) {
                change = try SyncChange(encoded: row.bytes)
            } catch {
                throw SyncError(.corruptChange, message: """
                    the change at sequence \(row.sequence) of the sync hub at \(reportedURL) does not decode: \(error.message)
                    """)
            }
            guard change.replica.uuidString.lowercased() == row.replica.lowercased(), change.localSequence == row.localSequence else {
                throw SyncError(.corruptChange, message: """
                    the change at sequence \(row.sequence) of the sync hub at \(reportedURL) is change \(change.localSequence) of \
                    replica \(change.replica), but the log files it as change \(row.localSequence) of replica \(row.replica)
                    """)
            }
            return SequencedChange(sequence: row.sequence, change: change)
        }
    }

    /// A row of the log as read, before its bytes are decoded.
    struct LogRow: Sendable {
        var sequence: Int64
        var bytes: [UInt8]
        var replica: String
        var localSequence: Int64
    }
}
