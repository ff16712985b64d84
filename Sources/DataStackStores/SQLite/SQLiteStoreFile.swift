@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Work on a SQLite store file without a coordinator: reading and writing its
/// metadata, checkpointing, copying, replacing and removing it with its
/// `-wal` and `-shm` files.
///
/// Every function opens its own connection and closes it before returning.
enum SQLiteStoreFile {
    /// The files SQLite keeps beside a database: the write-ahead log, its index,
    /// and the rollback journal.
    static let sidecarSuffixes = ["-wal", "-shm", "-journal"]

    /// The file beside `url` with `suffix` appended to its name.
    static func sidecar(of url: URL, _ suffix: String) -> URL {
        URL(fileURLWithPath: url.path + suffix)
    }

    // MARK: - Opening

    /// Opens an existing store file, never creating one.
    ///
    /// A writable connection keeps the file's journal mode, so a rollback-journal
    /// store written by Core Data stays one.
    ///
    /// - Throws: ``PersistentStoreError`` with the path: `.cannotOpen` when there
    ///   is no file, `.notAStore` when it is not a SQLite database or has no
    ///   `Z_METADATA` table (unless `allowsEmpty` and it has no table at all).
    static func openExisting(_ url: URL, readOnly: Bool, busyMode: BusyMode = .default, allowsEmpty: Bool = false) throws -> Connection {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw PersistentStoreError(.cannotOpen, url: url, message: "no store file exists at this location")
        }
        guard !isDirectory.boolValue else {
            throw PersistentStoreError(.notAStore, url: url, message: "the location is a folder, not a SQLite store file")
        }
        var configuration = Connection.Configuration()
        configuration.isReadOnly = true
        configuration.createsIfMissing = false
        configuration.busyMode = busyMode
        do {
            var connection = try Connection(path: url.path, configuration: configuration)
            guard try connection.tableExists("Z_METADATA") || (allowsEmpty && tableNames(connection).isEmpty) else {
                throw PersistentStoreError(.notAStore, url: url,
                                           message: "the file is a SQLite database but not a Core Data store (no Z_METADATA table)")
            }
            if !readOnly {
                let mode = try journalMode(of: connection)
                configuration.isReadOnly = false
                configuration.journalMode = mode
                connection = try Connection(path: url.path, configuration: configuration)
            }
            return connection
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "opening the store")
        }
    }

    /// The journal mode the file is in (`wal` or a rollback-journal mode).
    private static func journalMode(of connection: Connection) throws -> Connection.JournalMode {
        let statement = try connection.prepare("PRAGMA journal_mode")
        guard try statement.step(), let mode = statement.string(at: 0)?.lowercased() else { return .delete }
        return Connection.JournalMode(rawValue: mode) ?? .delete
    }

    // MARK: - Metadata

    /// The metadata in `Z_METADATA`, with `NSStoreType` and `NSStoreUUID` always set.
    static func readMetadata(_ connection: Connection, url: URL) throws -> StoreMetadata {
        do {
            let row = try connection.prepare("SELECT Z_UUID, Z_PLIST FROM Z_METADATA LIMIT 1")
            guard try row.step() else {
                throw PersistentStoreError(.notAStore, url: url, message: "Z_METADATA has no row")
            }
            var metadata = try StoreMetadataCoding.decode(row.data(at: 1), of: url)
            if let uuid = row.string(at: 0) { metadata[StoreMetadataKey.storeUUID] = uuid }
            metadata[StoreMetadataKey.storeType] = metadata[StoreMetadataKey.storeType] ?? "SQLite"
            return metadata
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "reading the metadata")
        }
    }

    /// Reads the metadata of the store file at `url`.
    static func metadata(at url: URL) throws -> StoreMetadata {
        let connection = try openExisting(url, readOnly: true)
        return try readMetadata(connection, url: url)
    }

    /// Replaces the metadata of the store file at `url` in one transaction.
    ///
    /// `NSStoreType`, `NSStoreUUID`, `NSStoreModelVersionHashes` and the record
    /// of the model that wrote the store keep the file's values whatever `metadata` says, and the framework's other keys
    /// (`NS…`, `_NS…`) are kept unless `metadata` gives them.
    static func writeMetadata(_ metadata: StoreMetadata, at url: URL) throws {
        let connection = try openExisting(url, readOnly: false)
        do {
            try connection.inWriteTransaction {
                let current = try readMetadata(connection, url: url)
                let merged = mergedMetadata(metadata, keepingFrameworkKeysOf: current)
                let update = try connection.prepare("UPDATE Z_METADATA SET Z_PLIST = ?")
                try update.bind(try StoreMetadataCoding.encode(merged), at: 1)
                try update.execute()
            }
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "writing the metadata")
        }
    }

    /// `metadata` with the store's identity and hashes from `current`, and
    /// `current`'s framework keys where `metadata` lacks them.
    static func mergedMetadata(_ metadata: StoreMetadata, keepingFrameworkKeysOf current: StoreMetadata) -> StoreMetadata {
        var merged = metadata
        for (key, value) in current where key.hasPrefix("NS") || key.hasPrefix("_NS") {
            if merged[key] == nil { merged[key] = value }
        }
        for key in [StoreMetadataKey.storeType, StoreMetadataKey.storeUUID] + StoreMetadataKey.modelRecord {
            merged[key] = current[key]
        }
        return merged
    }

    // MARK: - Files

    /// Copies the write-ahead log into the database file and empties it, so the
    /// main file alone holds everything.
    ///
    /// - Throws: `.ioFailure` when another connection keeps the log in use.
    static func checkpoint(_ connection: Connection, url: URL) throws {
        do {
            let result = try connection.checkpoint(mode: .truncate)
            if result.walFrameCount > 0 && result.checkpointedFrameCount < result.walFrameCount {
                throw PersistentStoreError(.ioFailure, url: url, message: "another connection is using the store's write-ahead log")
            }
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "checkpointing the write-ahead log")
        }
    }

    /// Takes the file out of WAL mode (checkpointing the log into it), which
    /// SQLite allows only while no other connection has the file open: the test
    /// that the file may be renamed over or unlinked. A file that another
    /// connection still uses must not be, because that connection, when it
    /// closes, deletes the `-wal` and `-shm` *by name*, whatever file they then
    /// belong to. (Rollback-journal files always pass.)
    ///
    /// - Returns: false when another connection has the file open.
    static func leaveWriteAheadLog(_ connection: Connection) -> Bool {
        try? connection.execute("PRAGMA busy_timeout = 0")
        guard let statement = try? connection.prepare("PRAGMA journal_mode = DELETE"),
              (try? statement.step()) == true else { return false }
        return statement.string(at: 0)?.lowercased() != "wal"
    }

    /// Drops every table of the database in one write transaction, then empties
    /// the write-ahead log, so other connections to it find no store any more.
    static func empty(_ connection: Connection, url: URL) throws {
        do {
            try connection.inWriteTransaction {
                // Virtual tables (the full-text indexes) first: dropping one drops its
                // shadow tables, which are then gone from the list already read.
                for name in try tableNames(connection) {
                    try connection.execute("DROP TABLE IF EXISTS \(Connection.quotedIdentifier(name))")
                }
            }
            _ = try? connection.checkpoint(mode: .truncate)
        } catch let error as SQLiteError {
            throw SQLiteStore.storeError(error, url: url, doing: "emptying the store")
        }
    }

    private static func tableNames(_ connection: Connection) throws -> [String] {
        let statement = try connection.prepare("""
            SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
            ORDER BY sql LIKE 'CREATE VIRTUAL TABLE%' DESC
            """)
        var names: [String] = []
        while try statement.step() {
            if let name = statement.string(at: 0) { names.append(name) }
        }
        return names
    }

    /// Copies the store at `source` into the single file `destination`: the
    /// source's log is checkpointed when the source is writable, else copied
    /// along and folded into the copy.
    ///
    /// - Throws: ``PersistentStoreError``: `.cannotOpen` or `.notAStore` for the
    ///   source, `.ioFailure` when copying fails.
    static func copyAsOneFile(from source: URL, to destination: URL) throws {
        _ = try openExisting(source, readOnly: true)
        if let writable = try? openExisting(source, readOnly: false) {
            try? checkpoint(writable, url: source)
        }
        do {
            try copyFiles(from: source, to: destination)
            var options = Connection.Configuration()
            options.createsIfMissing = false
            options.journalMode = .delete   // folds a copied -wal into the file and removes it
            _ = try Connection(path: destination.path, configuration: options)
        } catch let error as SQLiteError {
            try? removeFiles(at: destination)
            throw SQLiteStore.storeError(error, url: source, doing: "copying the store")
        } catch {
            try? removeFiles(at: destination)
            throw PersistentStoreError(.ioFailure, url: source, message: "could not copy the store's files", underlying: error)
        }
    }

    /// Copies the database file with its `-wal` and `-shm` to `destination`,
    /// whose files must not exist.
    static func copyFiles(from source: URL, to destination: URL) throws {
        for suffix in ["", "-wal", "-shm"] {
            let from = URL(fileURLWithPath: source.path + suffix)
            guard FileManager.default.fileExists(atPath: from.path) else { continue }
            try FileManager.default.copyItem(at: from, to: URL(fileURLWithPath: destination.path + suffix))
        }
    }

    /// Deletes the store at `url` (``PersistentStoreCoordinator/destroyPersistentStore(at:type:)``):
    /// drops every table in one write transaction, then removes the files
    /// unless another connection still has them open. Nothing at `url` is not an error.
    static func destroy(at url: URL) throws {
        // No file, or one that can't be looked at (whose removal below then reports why), has no tables to drop.
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? nil
        if let size, size > 0 {
            let connection = try openExisting(url, readOnly: false, allowsEmpty: true)
            try empty(connection, url: url)
            // Unlinking a file another connection uses would let it delete the -wal of a
            // store created here later; leave the empty database to it.
            guard leaveWriteAheadLog(connection) else { return }
        }
        do {
            try removeFiles(at: url)
        } catch {
            throw PersistentStoreError(.ioFailure, url: url, message: "could not remove the store's files", underlying: error)
        }
    }

    /// Removes the database file and its sidecar files; files that do not exist are skipped.
    static func removeFiles(at url: URL) throws {
        for suffix in [""] + sidecarSuffixes {
            let file = URL(fileURLWithPath: url.path + suffix)
            if FileManager.default.fileExists(atPath: file.path) {
                try FileManager.default.removeItem(at: file)
            }
        }
    }

    /// Puts the single database file at `replacement` in place of the store at
    /// `url`: the old sidecar files are removed, then the file is renamed over
    /// the old one, which is atomic within one file system.
    ///
    /// Every connection to both files must be closed, and `replacement` must
    /// hold everything (no `-wal`).
    static func swap(_ url: URL, with replacement: URL) throws {
        for suffix in sidecarSuffixes {
            let file = URL(fileURLWithPath: url.path + suffix)
            if FileManager.default.fileExists(atPath: file.path) {
                try FileManager.default.removeItem(at: file)
            }
        }
        guard rename(replacement.path, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            throw PersistentStoreError(.ioFailure, url: url, message: "could not move \(replacement.lastPathComponent) over the store: \(reason)")
        }
    }

    /// A fresh name beside `url` for a temporary copy of the store.
    static func temporarySibling(of url: URL, purpose: String) -> URL {
        url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(purpose)-\(UUID().uuidString)")
    }
}
