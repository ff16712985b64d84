/// A SQLite journal mode (`PRAGMA journal_mode`), as ``StoreOptions/journalMode``
/// sets it for a store's connections.
///
/// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_journal_mode>
public enum SQLiteJournalMode: String, Sendable {
    /// Write-ahead log: readers and one writer run at once. The store's default.
    case wal
    /// Rollback journal deleted at each commit: SQLite's own default.
    case delete
    /// Rollback journal truncated at each commit.
    case truncate
    /// Rollback journal kept in memory: a crash mid-transaction can corrupt.
    case memory
    /// No journal: no rollback, and a crash mid-transaction can corrupt.
    case off
    /// Rollback journal header zeroed at each commit.
    case persist
}

/// A SQLite synchronous level (`PRAGMA synchronous`), as ``StoreOptions/synchronous``
/// sets it for a store's connections.
///
/// Related SQLite documentation: <https://sqlite.org/pragma.html#pragma_synchronous>
public enum SQLiteSynchronous: String, Sendable {
    /// Never waits for the disk: fast, and a power loss can corrupt.
    case off
    /// In WAL mode, waits only at checkpoints: durable except the last
    /// commits on power loss, never corrupt. The store's default.
    case normal
    /// Waits at every commit.
    case full
    /// Like `full`, and also syncs the directory after a journal is deleted.
    case extra
}
