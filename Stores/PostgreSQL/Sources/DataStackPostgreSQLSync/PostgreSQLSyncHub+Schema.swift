import DataStackPostgreSQL

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
    /// - `datastack_sync_log`: the changes, by sequence; `UNIQUE (replica,
    ///   local_sequence)` names each change once, whatever its sequence.
    /// - `datastack_sync_replicas`: each registered replica, what it acknowledged
    ///   (which bounds ``purge()``) and the last local sequence it pushed.
    static let schema = """
        CREATE TABLE IF NOT EXISTS datastack_sync_meta (
            id int PRIMARY KEY CHECK (id = 1),
            model_version text,
            last_sequence bigint NOT NULL DEFAULT 0,
            oldest_sequence bigint NOT NULL DEFAULT 1
        );
        INSERT INTO datastack_sync_meta (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
        CREATE TABLE IF NOT EXISTS datastack_sync_log (
            sequence bigint PRIMARY KEY,
            replica uuid NOT NULL,
            local_sequence bigint NOT NULL,
            change bytea NOT NULL,
            UNIQUE (replica, local_sequence)
        );
        CREATE TABLE IF NOT EXISTS datastack_sync_replicas (
            replica uuid PRIMARY KEY,
            acknowledged bigint NOT NULL DEFAULT 0,
            last_pushed_local bigint NOT NULL DEFAULT 0,
            registered timestamptz NOT NULL DEFAULT now(),
            last_seen timestamptz NOT NULL DEFAULT now()
        )
        """

    /// Creates the tables that are missing, in one transaction holding
    /// ``schemaLockName``: two replicas starting at once take turns, and the
    /// second finds the tables (without the lock, two concurrent `CREATE TABLE
    /// IF NOT EXISTS` of one table can fail on the catalog's unique index).
    static func createTables(_ connection: PostgreSQLConnection) throws {
        try connection.transaction {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [.text(schemaLockName)])
            try connection.executeScript(schema)
        }
    }
}
