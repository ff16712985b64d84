import DataStackPostgreSQL
import DataStackSync
import Foundation

// MARK: - Snapshots: staging, committing, reading

// `datastack_sync_snapshot` holds a row per object of a snapshot, under the
// publisher and sequence that made it: the rows of the (publisher, sequence)
// that `datastack_sync_meta` names (`snapshot_publisher`, `snapshot_sequence`)
// are the hub's snapshot; every other row is a page staged by a publisher
// still writing. Committing switches the meta row and deletes the older
// snapshot's rows in one transaction, so a reader sees one snapshot or the
// other; a reader that sees the sequence change between two pages starts again.
extension PostgreSQLSyncHub {
    /// Stages a page: rows upserted by (publisher, sequence, object), so a
    /// page staged again replaces its copy. Rows are sent 1,000 to a statement.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.offline` or `.hubFailure`.
    public func putSnapshotPage(_ objects: [SyncSnapshotObject], through sequence: Int64, publisher: UUID) throws {
        try withSession("staging a page of a snapshot through sequence \(sequence)") { connection in
            try connection.transaction {
                // A publisher's pages of an earlier sequence it never committed are dropped.
                try connection.execute(cached: """
                    DELETE FROM datastack_sync_snapshot WHERE publisher = $1::uuid AND sequence <> $2::int8
                        AND NOT EXISTS (SELECT 1 FROM datastack_sync_meta AS m WHERE m.snapshot_publisher = datastack_sync_snapshot.publisher
                                        AND m.snapshot_sequence = datastack_sync_snapshot.sequence)
                    """, [.text(publisher.uuidString), PostgreSQLValue(sequence)])
                for start in stride(from: 0, to: objects.count, by: 1000) {
                    let batch = objects[start..<min(objects.count, start + 1000)]
                    var parameters: [PostgreSQLValue] = [.text(publisher.uuidString), PostgreSQLValue(sequence)]
                    var rows: [String] = []
                    for object in batch {
                        let base = parameters.count
                        rows.append("($1::uuid, $2::int8, $\(base + 1)::uuid, $\(base + 2), $\(base + 3)::bytea, $\(base + 4)::uuid, $\(base + 5), $\(base + 6))")
                        parameters += [
                            .text(object.objectID.uuidString), .text(object.entity), object.state.map { .bytes($0) } ?? .null,
                            object.survivor.map { .text($0.uuidString) } ?? .null,
                            .text(object.numbers.map(String.init).joined(separator: ",")), .text(try Self.json(object.keys)),
                        ]
                    }
                    try connection.execute("""
                        INSERT INTO datastack_sync_snapshot (publisher, sequence, object_id, entity, state, survivor, numbers, keys)
                        VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (publisher, sequence, object_id) DO UPDATE SET entity = EXCLUDED.entity,
                            state = EXCLUDED.state, survivor = EXCLUDED.survivor, numbers = EXCLUDED.numbers, keys = EXCLUDED.keys
                        """, parameters)
                }
            }
        }
    }

    /// Makes the pages `publisher` staged for `sequence` the hub's snapshot
    /// when `sequence` is greater than the snapshot's; the older snapshot's
    /// rows go in the same transaction. Holds the meta row's lock, so a purge
    /// or another commit takes turns with it.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.staleSnapshot` when the hub
    ///   purged changes after `sequence`; `.offline`; `.hubFailure`.
    public func commitSnapshot(through sequence: Int64, publisher: UUID) throws -> Bool {
        try withSession("committing a snapshot through sequence \(sequence)") { connection in
            try connection.transaction {
                let meta = try connection.execute(
                    "SELECT oldest_sequence, snapshot_sequence, snapshot_publisher::text FROM datastack_sync_meta FOR UPDATE")
                let oldest = try meta.int64(row: 0, column: 0) ?? 1
                let current = try meta.int64(row: 0, column: 1)
                let staged: [PostgreSQLValue] = [.text(publisher.uuidString), PostgreSQLValue(sequence)]
                guard sequence + 1 >= oldest else {
                    try connection.execute("DELETE FROM datastack_sync_snapshot WHERE publisher = $1::uuid AND sequence = $2::int8", staged)
                    throw SyncError(.staleSnapshot, message: """
                        the sync hub at \(reportedURL) refused a snapshot through sequence \(sequence) by replica \(publisher): \
                        it purged the changes through \(oldest - 1)
                        """)
                }
                guard sequence > current ?? -1 else {
                    try connection.execute("DELETE FROM datastack_sync_snapshot WHERE publisher = $1::uuid AND sequence = $2::int8", staged)
                    return false
                }
                if let current, let old = meta.string(row: 0, column: 2) {
                    try connection.execute("DELETE FROM datastack_sync_snapshot WHERE publisher = $1::uuid AND sequence = $2::int8",
                                           [.text(old), PostgreSQLValue(current)])
                }
                try connection.execute(
                    "UPDATE datastack_sync_meta SET snapshot_sequence = $2::int8, snapshot_publisher = $1::uuid", staged)
                return true
            }
        }
    }

    /// A page of the hub's snapshot, by object ID, read with the snapshot's
    /// sequence in one statement; nil when the hub holds no snapshot.
    ///
    /// - Throws: ``DataStackSync/SyncError`` `.corruptChange` for a row that
    ///   does not read (naming the object); `.offline`; `.hubFailure`.
    public func snapshotPage(after objectID: UUID?, limit: Int) throws -> SyncSnapshotPage? {
        try withSession("reading a page of the snapshot") { connection -> SyncSnapshotPage? in
            let result = try connection.execute(cached: """
                SELECT m.snapshot_sequence, s.object_id::text, s.entity, s.state, s.survivor::text, s.numbers, s.keys
                FROM datastack_sync_meta AS m
                LEFT JOIN LATERAL (
                    SELECT object_id, entity, state, survivor, numbers, keys FROM datastack_sync_snapshot
                    WHERE publisher = m.snapshot_publisher AND sequence = m.snapshot_sequence
                        AND ($1::uuid IS NULL OR object_id > $1::uuid)
                    ORDER BY object_id LIMIT $2::int8
                ) AS s ON true
                ORDER BY s.object_id
                """, [objectID.map { .text($0.uuidString) } ?? .null, PostgreSQLValue(Int64(max(limit, 1)))])
            guard result.rowCount > 0, let sequence = try result.int64(row: 0, column: 0) else { return nil }
            var objects: [SyncSnapshotObject] = []
            for row in 0..<result.rowCount where !result.isNull(row: row, column: 1) {
                let id = result.string(row: row, column: 1)
                let name = "object \(id ?? "") of the snapshot through sequence \(sequence) of the sync hub at \(reportedURL)"
                // A row that does not read is damage, reported (never read as an object without keys).
                guard let objectID = id.flatMap(UUID.init(uuidString:)), let entity = result.string(row: row, column: 2),
                      let numbers = result.string(row: row, column: 5).map({ $0.split(separator: ",").compactMap { Int64($0) } }),
                      let keys = result.string(row: row, column: 6).flatMap({ try? JSONDecoder().decode([String].self, from: Data($0.utf8)) })
                else {
                    throw SyncError(.corruptChange, message: "\(name) does not read as (id, entity, numbers, keys)")
                }
                objects.append(SyncSnapshotObject(
                    objectID: objectID, entity: entity, state: try result.bytes(row: row, column: 3),
                    survivor: result.string(row: row, column: 4).flatMap(UUID.init(uuidString:)), numbers: numbers, keys: keys))
            }
            return SyncSnapshotPage(sequence: sequence, objects: objects)
        }
    }

    private static func json(_ keys: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(keys), as: UTF8.self)
    }
}
