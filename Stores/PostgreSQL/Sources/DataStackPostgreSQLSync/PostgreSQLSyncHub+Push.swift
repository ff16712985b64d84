import DataStackPostgreSQL
import DataStackSync
import Foundation

// MARK: - Pushing changes

extension PostgreSQLSyncHub {
    /// Appends changes to the log in the order given, in one transaction, and
    /// returns their sequences, in that order.
    ///
    /// Idempotent: a change the log holds already (same replica and local
    /// sequence, also twice in `changes`) is not appended again and its first
    /// sequence is returned. So a chunk pushed again after its COMMIT lost its
    /// answer (the link dropped, `.offline`) changes nothing if the first push
    /// committed, and appends the chunk if it did not.
    ///
    /// Pushes take turns: each holds a transaction-level advisory lock
    /// (``pushLockName``) from before it reads the last sequence until it
    /// commits, so sequence order is commit order. With a `bigserial` instead,
    /// two pushers draw 11 and 12, the one with 12 commits first, and a puller
    /// that reads 12 and acknowledges it never asks for 11, which commits a
    /// moment later: the change is lost to that replica. With the lock, a
    /// change is visible only after every smaller sequence is, so "everything
    /// after my last sequence" is a complete question.
    ///
    /// The transaction sends `NOTIFY datastack_sync` (payload: the last
    /// sequence), delivered when it commits, which wakes
    /// ``waitForChanges(after:timeout:)`` on every replica.
    ///
    /// A change a registered replica pushes again after ``purge()`` removed it
    /// would be appended again; that cannot happen to a well-behaved engine:
    /// purged changes were acknowledged by every registered replica, the pusher
    /// included, which therefore pulled them back and knows they were pushed.
    ///
    /// - Complexity: seven round trips (the lock, the last sequence, the changes
    ///   held already, one `COPY` of the new ones, the last sequence, the
    ///   pushers' bookmarks, the notification) plus BEGIN and COMMIT, whatever
    ///   the number of changes; three when all are held already. Pushes wait for
    ///   each other (at most ``PostgreSQLSyncHubOptions/lockTimeout``).
    /// - Throws: ``DataStackSync/SyncError`` `.offline` (the server cannot be
    ///   reached, or the push waited too long for others) or `.hubFailure`.
    public func push(_ changes: [SyncChange]) throws -> [Int64] {
        guard !changes.isEmpty else { return [] }
        let keys = changes.map { ChangeKey(replica: $0.replica, localSequence: $0.localSequence) }
        let bytes = changes.map { $0.encoded() }
        return try withSession("pushing \(changes.count) change\(changes.count == 1 ? "" : "s")") { connection in
            try connection.transaction {
                try connection.execute(cached: "SELECT pg_advisory_xact_lock(hashtext($1))", [.text(Self.pushLockName)])
                let last = try Self.lastSequence(connection)
                var sequences = try Self.heldSequences(of: keys, connection)
                var result: [Int64] = []
                var appended: [[PostgreSQLValue]] = []
                var lastPushed: [UUID: Int64] = [:]
                result.reserveCapacity(keys.count)
                for (index, key) in keys.enumerated() {
                    if let held = sequences[key] {
                        result.append(held)
                        continue
                    }
                    let sequence = last + Int64(appended.count) + 1
                    sequences[key] = sequence
                    result.append(sequence)
                    appended.append([PostgreSQLValue(sequence), .text(key.replica.uuidString), PostgreSQLValue(key.localSequence), .bytes(bytes[index])])
                    lastPushed[key.replica] = max(lastPushed[key.replica] ?? .min, key.localSequence)
                }
                guard !appended.isEmpty else { return result }
                let newLast = last + Int64(appended.count)
                try connection.copy(into: "datastack_sync_log", columns: ["sequence", "replica", "local_sequence", "change"], rows: appended)
                try connection.execute(cached: "UPDATE datastack_sync_meta SET last_sequence = $1::int8", [PostgreSQLValue(newLast)])
                let pushers = Array(lastPushed)
                try connection.execute(cached: """
                    UPDATE datastack_sync_replicas AS r SET last_pushed_local = greatest(r.last_pushed_local, p.local), last_seen = now()
                    FROM unnest($1::uuid[], $2::int8[]) AS p (replica, local) WHERE r.replica = p.replica
                    """, [.text(Self.arrayLiteral(pushers.map(\.key.uuidString))),
                          .text(Self.arrayLiteral(pushers.map { String($0.value) }))])
                try connection.execute(cached: "SELECT pg_notify($1, $2)", [.text(Self.channel), .text(String(newLast))])
                return result
            }
        }
    }

    /// A change's name: its replica and the replica's number for it.
    struct ChangeKey: Hashable {
        var replica: UUID
        var localSequence: Int64
    }

    /// The last sequence given (0 for none), which a purge does not lower.
    static func lastSequence(_ connection: PostgreSQLConnection) throws -> Int64 {
        let sql = "SELECT last_sequence FROM datastack_sync_meta"
        return try connection.execute(cached: sql, []).int64(row: 0, column: 0) ?? 0
    }

    /// The sequences of the changes among `keys` that the log holds already.
    static func heldSequences(of keys: [ChangeKey], _ connection: PostgreSQLConnection) throws -> [ChangeKey: Int64] {
        let result = try connection.execute(cached: """
            SELECT l.replica::text, l.local_sequence, l.sequence FROM datastack_sync_log AS l
            JOIN unnest($1::uuid[], $2::int8[]) AS k (replica, local_sequence)
              ON l.replica = k.replica AND l.local_sequence = k.local_sequence
            """, [.text(arrayLiteral(keys.map(\.replica.uuidString))), .text(arrayLiteral(keys.map { String($0.localSequence) }))])
        var held: [ChangeKey: Int64] = [:]
        for row in 0..<result.rowCount {
            // The columns are NOT NULL and a uuid's text always parses: a row that does not
            // read is a broken server or table, never "not held" (which would append it twice).
            guard let replica = result.string(row: row, column: 0).flatMap(UUID.init(uuidString:)),
                  let local = try result.int64(row: row, column: 1),
                  let sequence = try result.int64(row: row, column: 2) else {
                throw PostgreSQLError(message: "a row of datastack_sync_log does not read as (replica, local_sequence, sequence)")
            }
            held[ChangeKey(replica: replica, localSequence: local)] = sequence
        }
        return held
    }

    /// A PostgreSQL array literal of elements that need no quoting (UUIDs, integers).
    static func arrayLiteral(_ elements: [String]) -> String {
        "{" + elements.joined(separator: ",") + "}"
    }
}
