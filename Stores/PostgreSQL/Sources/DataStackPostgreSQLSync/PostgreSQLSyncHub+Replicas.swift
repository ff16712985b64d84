import DataStackPostgreSQL
import DataStackSync
import Foundation

// MARK: - Replicas: registering, acknowledging, purging

extension PostgreSQLSyncHub {
    /// Registers a replica, or registers it again after a restart, checking
    /// its model version against the hub's.
    ///
    /// The first replica to register sets the hub's model version. Registering
    /// holds the meta row's lock, so of two first replicas with different
    /// versions one sets it and the other is refused.
    ///
    /// The answer's `lastPushedLocalSequence` is the larger of what the hub
    /// recorded and the replica's last change in the log: a replica that pushed
    /// before it registered is told so too.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.modelVersionMismatch` naming the
    ///   replica's version and the hub's; `.offline`; `.hubFailure`.
    public func register(replica: UUID, modelVersion: String) throws -> SyncRegistration {
        try withSession("registering replica \(replica)") { connection in
            try connection.transaction {
                let meta = try connection.execute("SELECT model_version, oldest_sequence FROM datastack_sync_meta FOR UPDATE")
                let hubVersion = meta.string(row: 0, column: 0)
                let oldest = try meta.int64(row: 0, column: 1) ?? 1
                if let hubVersion, hubVersion != modelVersion {
                    throw SyncError(.modelVersionMismatch, message: """
                        replica \(replica) has model version "\(modelVersion)", but the sync hub at \(reportedURL) \
                        has model version "\(hubVersion)": the replica must migrate to "\(hubVersion)" before it syncs
                        """)
                }
                if hubVersion == nil {
                    try connection.execute("UPDATE datastack_sync_meta SET model_version = $1", [.text(modelVersion)])
                }
                let row = try connection.execute(cached: """
                    INSERT INTO datastack_sync_replicas AS r (replica, last_pushed_local)
                    VALUES ($1::uuid, (SELECT coalesce(max(last_local), 0) FROM datastack_sync_chunk WHERE replica = $1::uuid))
                    ON CONFLICT (replica) DO UPDATE
                        SET last_seen = now(), last_pushed_local = greatest(r.last_pushed_local, EXCLUDED.last_pushed_local)
                    RETURNING acknowledged, last_pushed_local
                    """, [.text(replica.uuidString)])
                return SyncRegistration(
                    modelVersion: modelVersion,
                    acknowledgedSequence: try row.int64(row: 0, column: 0) ?? 0,
                    lastPushedLocalSequence: try row.int64(row: 0, column: 1) ?? 0,
                    oldestSequence: oldest)
            }
        }
    }

    /// Records that `replica` has applied the log through `sequence`.
    /// Acknowledging less than before changes nothing: what a replica
    /// acknowledged only grows.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.hubFailure` when the replica is
    ///   not registered, or `sequence` is negative or beyond the last sequence
    ///   given (an acknowledgment of changes that do not exist would let
    ///   ``purge()`` remove changes nobody applied); `.offline`.
    public func acknowledge(replica: UUID, through sequence: Int64) throws {
        try withSession("recording that replica \(replica) applied the log through sequence \(sequence)") { connection in
            let result = try connection.execute(cached: """
                WITH updated AS (
                    UPDATE datastack_sync_replicas SET acknowledged = greatest(acknowledged, $2::int8), last_seen = now()
                    WHERE replica = $1::uuid AND $2::int8 BETWEEN 0 AND (SELECT last_sequence FROM datastack_sync_meta)
                    RETURNING replica
                )
                SELECT (SELECT count(*) FROM updated), (SELECT last_sequence FROM datastack_sync_meta),
                       EXISTS (SELECT 1 FROM datastack_sync_replicas WHERE replica = $1::uuid)
                """, [.text(replica.uuidString), PostgreSQLValue(sequence)])
            guard try result.int64(row: 0, column: 0) == 1 else {
                let last = try result.int64(row: 0, column: 1) ?? 0
                let reason = result.string(row: 0, column: 2) == "t"
                    ? "the sequence must be between 0 and the last sequence given, \(last)"
                    : "the replica is not registered (register(replica:modelVersion:) first)"
                throw SyncError(.hubFailure, message: """
                    the sync hub at \(reportedURL) refused to record that replica \(replica) applied the log \
                    through sequence \(sequence): \(reason)
                    """)
            }
        }
    }

    /// Purges the changes every registered replica acknowledged, and returns
    /// how many it purged: from then on a pull after an earlier sequence is
    /// told `.snapshotRequired`. The chunk rows whose changes all were purged
    /// are deleted; a row straddling the floor stays until its last change is
    /// acknowledged (a pull after the floor drops its earlier changes).
    ///
    /// A replica that lags keeps the log from its last acknowledgment on. A
    /// replica that is gone for good keeps everything after its own: remove its
    /// row from `datastack_sync_replicas` to let the log shrink. A replica that
    /// then asks for purged changes is told `.snapshotRequired` by
    /// ``pull(after:limit:)``. With no replica registered, nothing is deleted.
    ///
    /// With a snapshot (``commitSnapshot(through:publisher:)``, which
    /// `SyncEngine.publishSnapshot()` calls), the purge goes no further than
    /// the snapshot's sequence either: min(acknowledged, snapshot sequence).
    /// A replica that then needs purged changes — a new one, or one whose row
    /// was removed and that comes back — re-seeds from the snapshot and pulls
    /// on after it. Without a snapshot the rule is the acknowledgments alone,
    /// and such a replica waits (`.snapshotRequired`) until one is published.
    ///
    /// The deletion and the new oldest sequence commit together, so a pull
    /// sees both or neither.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.offline` or `.hubFailure`.
    public func purge() throws -> Int {
        try withSession("purging acknowledged changes") { connection in
            try connection.transaction {
                // FOR UPDATE: two purges take turns on the oldest sequence.
                let oldest = try connection.execute("SELECT oldest_sequence FROM datastack_sync_meta FOR UPDATE").int64(row: 0, column: 0) ?? 1
                // With a snapshot, no further than its sequence: a replica that needs purged changes
                // re-seeds from it and pulls on after it.
                let minimum = try connection.execute("""
                    SELECT CASE WHEN count(*) > 0
                        THEN least(min(r.acknowledged), (SELECT snapshot_sequence FROM datastack_sync_meta)) END
                    FROM datastack_sync_replicas AS r
                    """)
                guard let through = try minimum.int64(row: 0, column: 0), through >= oldest else { return 0 }
                try connection.execute("DELETE FROM datastack_sync_chunk WHERE last_sequence <= $1::int8", [PostgreSQLValue(through)])
                try connection.execute(
                    "UPDATE datastack_sync_meta SET oldest_sequence = $1::int8 + 1", [PostgreSQLValue(through)])
                // Acknowledgments never pass the last sequence given, and sequences have no gaps.
                return Int(through - oldest + 1)
            }
        }
    }
}
