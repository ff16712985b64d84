import DataStackPostgreSQL
import DataStackSync

// MARK: - The hub's tables

extension PostgreSQLSyncHub {
    /// The advisory lock (`hashtext` of this name) held while the tables are created.
    package static let schemaLockName = "datastack.sync.schema"
    /// The advisory lock (`hashtext` of this name) each push holds until it
    /// commits, so pushes commit in sequence order (``push(_:)``).
    package static let pushLockName = "datastack.sync.push"
    /// The channel each push notifies, with the last sequence it gave as payload.
    package static let channel = "datastack_sync"

    /// The hub's tables:
    ///
    /// - `datastack_sync_meta`: one row. `model_version`, set by the first
    ///   replica that registers; `last_sequence`, the last sequence given, kept
    ///   apart from the log because a purge may empty the log and a sequence
    ///   is never given twice; `oldest_sequence`, the first sequence not purged.
    /// - `datastack_sync_chunk`: the changes, a row per chunk
    ///   (``push(_:encodedBy:)``): `first_sequence` to `last_sequence`, of one
    ///   `replica`, its local sequences `first_local` to `last_local` (one
    ///   apart, as the sequences are: the `CHECK` holds them to the same count),
    ///   and the chunk's bytes (``DataStackSync/SyncCodec``). An index on
    ///   `(replica, last_local)` finds the rows a push may hold already.
    /// - `datastack_sync_replicas`: each registered replica, what it acknowledged
    ///   (which bounds ``purge()``) and the last local sequence it pushed.
    /// - `datastack_sync_snapshot`: snapshots (``commitSnapshot(through:publisher:)``),
    ///   a row per object under its publisher and sequence: its entity, its
    ///   confirmed state's bytes, the object it was merged into, its numbers
    ///   (comma-separated) and unique keys (a JSON array). The meta row's
    ///   `snapshot_sequence` and `snapshot_publisher` name the rows that are the
    ///   hub's snapshot; other rows are pages still being published.
    static let schema = """
        CREATE TABLE IF NOT EXISTS datastack_sync_meta (
            id int PRIMARY KEY CHECK (id = 1),
            model_version text,
            last_sequence bigint NOT NULL DEFAULT 0,
            oldest_sequence bigint NOT NULL DEFAULT 1,
            snapshot_sequence bigint,
            snapshot_publisher uuid
        );
        INSERT INTO datastack_sync_meta (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
        CREATE TABLE IF NOT EXISTS datastack_sync_chunk (
            first_sequence bigint PRIMARY KEY,
            last_sequence bigint NOT NULL UNIQUE,
            replica uuid NOT NULL,
            first_local bigint NOT NULL,
            last_local bigint NOT NULL,
            chunk bytea NOT NULL,
            CHECK (last_sequence >= first_sequence AND last_sequence - first_sequence = last_local - first_local)
        );
        CREATE INDEX IF NOT EXISTS datastack_sync_chunk_replica ON datastack_sync_chunk (replica, last_local);
        CREATE TABLE IF NOT EXISTS datastack_sync_replicas (
            replica uuid PRIMARY KEY,
            acknowledged bigint NOT NULL DEFAULT 0,
            last_pushed_local bigint NOT NULL DEFAULT 0,
            registered timestamptz NOT NULL DEFAULT now(),
            last_seen timestamptz NOT NULL DEFAULT now()
        );
        DO $$ BEGIN
            -- A hub made before snapshots gets their columns. Only then: ALTER TABLE locks the
            -- meta row's table whole, and a push holding its row would deadlock with it.
            IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                           AND table_name = 'datastack_sync_meta' AND column_name = 'snapshot_sequence') THEN
                ALTER TABLE datastack_sync_meta ADD COLUMN snapshot_sequence bigint, ADD COLUMN snapshot_publisher uuid;
            END IF;
        END $$;
        CREATE TABLE IF NOT EXISTS datastack_sync_snapshot (
            publisher uuid NOT NULL,
            sequence bigint NOT NULL,
            object_id uuid NOT NULL,
            entity text NOT NULL,
            state bytea,
            survivor uuid,
            numbers text NOT NULL,
            keys text NOT NULL,
            PRIMARY KEY (publisher, sequence, object_id)
        )
        """

    /// Creates the tables that are missing, in one transaction holding
    /// ``schemaLockName``: two replicas starting at once take turns, and the
    /// second finds the tables (without the lock, two concurrent `CREATE TABLE
    /// IF NOT EXISTS` of one table can fail on the catalog's unique index).
    ///
    /// A database with `datastack_sync_log`, the log of the layout before
    /// chunks (a row per change), is refused: `.hubFailure` naming the table.
    /// Nothing shipped with that layout, so nothing migrates it.
    static func createTables(_ connection: PostgreSQLConnection, reportedURL: String) throws {
        try connection.transaction {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [.text(schemaLockName)])
            let old = try connection.execute("SELECT to_regclass('datastack_sync_log') IS NOT NULL")
            if old.string(row: 0, column: 0) == "t" {
                throw SyncError(.hubFailure, message: """
                    the sync hub's database at \(reportedURL) has a table datastack_sync_log, the log of an earlier layout \
                    (a row per change) that this version replaced by datastack_sync_chunk (a row per chunk); \
                    drop the hub's tables (datastack_sync_log, datastack_sync_meta, datastack_sync_replicas) to start a new hub
                    """)
            }
            try connection.executeScript(schema)
        }
    }
}
