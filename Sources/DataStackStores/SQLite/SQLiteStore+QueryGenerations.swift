@_spi(DataStackInternal) import DataStackSQLite
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Query generations

/// One generation of a SQLite store's data: a connection of its own, kept in
/// the read transaction it began when the generation was made. In WAL mode a
/// read transaction sees the database as of its first read, whatever is
/// committed after, for as long as it stays open — which is what a context
/// pinned to the generation reads (``ManagedObjectContext/setQueryGenerationFrom(_:)``).
///
/// The transaction ends, and the connection closes, when the last context
/// lets go of the generation, or when the store is removed from its
/// coordinator (reads of the generation then throw that the store was removed).
final class SQLiteQueryGeneration: StoreQueryGeneration {
    private let connection = ConnectionLock()
    private let url: URL?

    init(_ connection: Connection, url: URL?) {
        self.url = url
        self.connection.set(connection)
    }

    /// Runs `body` on the generation's connection, one read at a time.
    ///
    /// - Throws: ``PersistentStoreError/Code/ioFailure`` once the store was
    ///   removed, or when the transaction ended under the read (SQLite ends
    ///   one on some errors): reads of the latest data in its place would be
    ///   an error made data. What `body` throws.
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        let result = try connection.withConnection { connection -> T in
            guard connection.isInTransaction else { throw lost() }
            let result = try body(connection)
            guard connection.isInTransaction else { throw lost() }
            return result
        }
        guard let result else {
            throw PersistentStoreError(.ioFailure, url: url, message: "the store was removed from its coordinator")
        }
        return result
    }

    /// Ends the transaction and closes the connection.
    func close() {
        connection.close { _ in }
    }

    private func lost() -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: url, message: """
            the query generation's read transaction ended, so its data can no longer be read; \
            set the context's query generation again
            """)
    }
}

extension SQLiteStore: QueryGenerationStore {
    /// In WAL mode only: in the other journal modes an open read transaction
    /// would keep every save of every connection waiting.
    public var canPinQueryGenerations: Bool { configuration.options.journalMode == .wal }

    /// A read transaction on a new connection, begun now.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unsupportedStore`` when
    ///   the file is not in WAL mode after all; a store error when the file
    ///   cannot be read.
    public func openQueryGeneration() throws -> any StoreQueryGeneration {
        // Opened as the pool's readers are: the same settings and SQL functions.
        let connection = try open(readOnly: isReadOnly)
        do {
            // The file's own mode decides: another program may have changed it.
            let statement = try connection.prepare("PRAGMA journal_mode")
            guard try statement.step(), statement.string(at: 0)?.lowercased() == "wal" else {
                throw ObjectGraphError(.unsupportedStore, message: """
                    cannot pin a query generation: the SQLite store at \(fileURL.path) is not in WAL mode
                    """)
            }
            statement.reset()
            try connection.execute("BEGIN DEFERRED")
            // The snapshot is taken at the transaction's first read.
            try connection.execute("SELECT count(*) FROM sqlite_master")
        } catch let error as SQLiteError {
            throw Self.storeError(error, url: url, doing: "pinning a query generation")
        }
        let generation = SQLiteQueryGeneration(connection, url: url)
        state.withLock { state in
            state.queryGenerations.removeAll { $0.generation == nil }
            state.queryGenerations.append(WeakQueryGeneration(generation: generation))
        }
        return generation
    }

    /// Runs `body` where `context` reads: on its query generation's connection
    /// when it is pinned to one, else on a reader of the pool.
    func read<T>(for context: ManagedObjectContext?, _ body: (Connection) throws -> T) throws -> T {
        guard let context, let snapshot = try context.queryGenerationSnapshot(of: self) else { return try read(body) }
        guard let generation = snapshot as? SQLiteQueryGeneration else {
            throw PersistentStoreError(.ioFailure, url: url, message: "the context's query generation is not of this store")
        }
        do {
            return try generation.read(body)
        } catch let error as SQLiteError {
            throw Self.storeError(error, url: url, doing: "reading")
        }
    }

    /// Closes every generation still open: called when the store is removed.
    func closeQueryGenerations() {
        let open = state.withLock { state in
            defer { state.queryGenerations = [] }
            return state.queryGenerations.compactMap(\.generation)
        }
        for generation in open { generation.close() }
    }
}

/// The store's list of its open generations, which it does not keep alive.
struct WeakQueryGeneration {
    weak var generation: SQLiteQueryGeneration?
}
