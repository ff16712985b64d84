import DataStackPostgreSQL
import DataStackSync
import Foundation

// MARK: - Pushing changes

extension PostgreSQLSyncHub {
    /// Appends changes to the log in the order given, in one transaction, and
    /// returns their sequences, in that order (``push(_:encodedBy:)`` with
    /// ``DataStackSync/SyncCodec/modelFree``: names as text).
    public func push(_ changes: [SyncChange]) throws -> [Int64] {
        try push(changes, encodedBy: .modelFree)
    }

    /// Appends changes to the log in the order given, in one transaction, as
    /// chunks `codec` encodes, and returns their sequences, in that order.
    ///
    /// The log is a table of chunks (`datastack_sync_chunk`): one row per run
    /// of changes of one replica with consecutive local sequences — a sync
    /// engine's push is one run, so one row — holding its first and last
    /// sequence, its replica, its first and last local sequence and the
    /// chunk's bytes (``DataStackSync/SyncCodec/encode(_:firstSequence:)``,
    /// encoded here, under the push lock, where the run's first sequence is
    /// known). A pull reads rows whose header is paid once per chunk.
    ///
    /// Idempotent: a change the log holds already (same replica and local
    /// sequence, in whole or in part of a row, also twice in `changes`) is not
    /// appended again and its sequence is returned; only the changes not held
    /// are encoded and appended. So a chunk pushed again after its COMMIT lost
    /// its answer (the link dropped, `.offline`) changes nothing if the first
    /// push committed, and appends the chunk if it did not; the answer always
    /// has one sequence per change.
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
    /// - Complexity: seven round trips (the lock, the last sequence, the rows
    ///   holding any of the changes, one `COPY` of the new rows, the last
    ///   sequence, the pushers' bookmarks, the notification) plus BEGIN and
    ///   COMMIT, whatever the number of changes; three when all are held already.
    ///   Pushes wait for each other (at most ``PostgreSQLSyncHubOptions/lockTimeout``).
    /// - Throws: ``DataStackSync/SyncError`` `.offline` (the server cannot be
    ///   reached, or the push waited too long for others), `.hubFailure`, or
    ///   what `codec` throws (`.notInModel` for a name its model lacks).
    public func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        guard !changes.isEmpty else { return [] }
        let keys = changes.map { ChangeKey(replica: $0.replica, localSequence: $0.localSequence) }
        return try withSession("pushing \(changes.count) change\(changes.count == 1 ? "" : "s")") { connection in
            try connection.transaction {
                try connection.execute(cached: "SELECT pg_advisory_xact_lock(hashtext($1))", [.text(Self.pushLockName)])
                let last = try Self.lastSequence(connection)
                var sequences = try Self.heldSequences(of: keys, connection)
                var result: [Int64] = []
                result.reserveCapacity(keys.count)
                // Runs of changes to append: one replica, local sequences one apart.
                var runs: [[Int]] = []
                var next = last + 1
                for (index, key) in keys.enumerated() {
                    if let held = sequences[key] {
                        result.append(held)
                        continue
                    }
                    sequences[key] = next
                    result.append(next)
                    next += 1
                    if let previous = runs.last?.last, keys[previous].replica == key.replica,
                       keys[previous].localSequence &+ 1 == key.localSequence {
                        runs[runs.count - 1].append(index)
                    } else {
                        runs.append([index])
                    }
                }
                guard !runs.isEmpty else { return result }
                var rows: [[PostgreSQLValue]] = []
                var lastPushed: [UUID: Int64] = [:]
                var firstSequence = last + 1
                for run in runs {
                    let first = keys[run[0]], final = keys[run[run.count - 1]]
                    let bytes = try codec.encode(run.map { changes[$0] }, firstSequence: firstSequence)
                    let lastSequence = firstSequence + Int64(run.count) - 1
                    rows.append([PostgreSQLValue(firstSequence), PostgreSQLValue(lastSequence), .text(first.replica.uuidString),
                                 PostgreSQLValue(first.localSequence), PostgreSQLValue(final.localSequence), .bytes(bytes)])
                    lastPushed[first.replica] = max(lastPushed[first.replica] ?? .min, final.localSequence)
                    firstSequence = lastSequence + 1
                }
                let newLast = next - 1
                try connection.copy(into: "datastack_sync_chunk",
                                    columns: ["first_sequence", "last_sequence", "replica", "first_local", "last_local", "chunk"],
                                    rows: rows)
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

    /// The sequences of the changes among `keys` that the log holds already:
    /// a row of the change's replica whose local sequences cover it holds it,
    /// at its first sequence plus the distance from its first local sequence
    /// (a row's local sequences are one apart, ``push(_:encodedBy:)``).
    static func heldSequences(of keys: [ChangeKey], _ connection: PostgreSQLConnection) throws -> [ChangeKey: Int64] {
        var ranges: [UUID: ClosedRange<Int64>] = [:]
        for key in keys {
            let range = ranges[key.replica]
            ranges[key.replica] = min(range?.lowerBound ?? key.localSequence, key.localSequence)...max(range?.upperBound ?? key.localSequence, key.localSequence)
        }
        let replicas = Array(ranges)
        let result = try connection.execute(cached: """
            SELECT c.replica::text, c.first_local, c.last_local, c.first_sequence FROM datastack_sync_chunk AS c
            JOIN unnest($1::uuid[], $2::int8[], $3::int8[]) AS k (replica, low, high)
              ON c.replica = k.replica AND c.last_local >= k.low AND c.first_local <= k.high
            """, [.text(arrayLiteral(replicas.map(\.key.uuidString))), .text(arrayLiteral(replicas.map { String($0.value.lowerBound) })),
                  .text(arrayLiteral(replicas.map { String($0.value.upperBound) }))])
        var rows: [UUID: [(locals: ClosedRange<Int64>, firstSequence: Int64)]] = [:]
        for row in 0..<result.rowCount {
            // The columns are NOT NULL and a uuid's text always parses: a row that does not
            // read is a broken server or table, never "not held" (which would append it twice).
            guard let replica = result.string(row: row, column: 0).flatMap(UUID.init(uuidString:)),
                  let firstLocal = try result.int64(row: row, column: 1),
                  let lastLocal = try result.int64(row: row, column: 2), firstLocal <= lastLocal,
                  let firstSequence = try result.int64(row: row, column: 3) else {
                throw PostgreSQLError(message: "a row of datastack_sync_chunk does not read as (replica, first_local, last_local, first_sequence)")
            }
            rows[replica, default: []].append((firstLocal...lastLocal, firstSequence))
        }
        var held: [ChangeKey: Int64] = [:]
        for key in keys {
            if let row = rows[key.replica]?.first(where: { $0.locals.contains(key.localSequence) }) {
                held[key] = row.firstSequence + (key.localSequence - row.locals.lowerBound)
            }
        }
        return held
    }

    /// A PostgreSQL array literal of elements that need no quoting (UUIDs, integers).
    static func arrayLiteral(_ elements: [String]) -> String {
        "{" + elements.joined(separator: ",") + "}"
    }
}
