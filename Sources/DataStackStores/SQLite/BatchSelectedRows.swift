@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// The keys and IDs of the rows a batch selects, read on one of the store's
/// reader connections while the writer connection changes them.
///
/// Why another connection and thread: a batch must report the IDs it changed
/// (its did-save is how contexts and fetched results controllers merge it),
/// and reading a million keys and hashing them into a set costs about half
/// of a million-row `UPDATE` again. A `RETURNING` clause is slower still
/// (SQLite buffers its rows in a temporary table). Reading on the reader
/// connection overlaps that work with SQLite's.
///
/// Why the rows read are the rows written: the reader's snapshot is taken
/// (its first step) after the writer's `BEGIN IMMEDIATE` and before the
/// writer changes anything — ``read(_:store:schema:identity:)`` waits for it.
/// Holding the write lock, the writer's transaction began from the last
/// commit, which is what the reader sees, and nothing else can commit in
/// between. The writer holds its lock and waits for the reader's, never the
/// reverse; when every pooled reader is in use it waits for one to be
/// returned, and reads never wait for the writer, so one is. In a
/// rollback-journal store the reader's shared lock keeps the writer from
/// spilling its cache into the file meanwhile (SQLite keeps the pages in
/// memory instead) and is gone before the writer commits, since the writer
/// waits for the rows first.
final class BatchSelectedRows: Sendable {
    /// What was read.
    struct Rows: Sendable {
        /// The primary keys, in the table's order.
        let keys: [Int64]
        let ids: Set<ObjectID>

        /// Throws unless a statement that wrote the rows changed as many as were selected.
        func check(changed: Int, url: URL?) throws {
            guard changed == keys.count else {
                throw PersistentStoreError(.ioFailure, url: url, message: "a batch selected \(keys.count) rows but changed \(changed)")
            }
        }

        /// Runs `body` on the keys, 500 at a time.
        func forEachChunk(_ body: (ArraySlice<Int64>) throws -> Void) rethrows {
            for start in stride(from: 0, to: keys.count, by: 500) { try body(keys[start..<min(start + 500, keys.count)]) }
        }
    }

    private struct State {
        /// Set when the reader has its snapshot: whether any row is selected.
        var isEmpty: Bool?
        var result: Result<Rows, any Error>?
    }

    private let snapshotTaken = DispatchSemaphore(value: 0)
    private let done = DispatchGroup()
    private let state = Locked(State())

    private init() {}

    /// Starts reading the selected rows on a global queue and returns once
    /// the reader holds its snapshot, from when on the caller may write them.
    ///
    /// - Returns: nil when no row is selected.
    /// - Throws: what reading threw before the snapshot was taken.
    static func read(_ selection: BatchSelection, store: SQLiteStore, schema: TableLayout,
                     identity: StoreIdentity) throws -> BatchSelectedRows? {
        let rows = BatchSelectedRows()
        rows.done.enter()
        DispatchQueue.global().async {
            rows.run(selection, store: store, schema: schema, identity: identity)
            rows.done.leave()
        }
        rows.snapshotTaken.wait()
        let (isEmpty, result) = rows.state.withLock { ($0.isEmpty, $0.result) }
        guard let isEmpty else {
            // Failed before its snapshot: the result holds why.
            _ = try result?.get()
            throw PersistentStoreError(.ioFailure, url: store.url, message: "the rows of a batch could not be read")
        }
        return isEmpty ? nil : rows
    }

    /// Waits for the rows; throws what reading them threw.
    func value() throws -> Rows {
        done.wait()
        guard let result = state.withLock({ $0.result }) else {
            preconditionFailure("the reading finished without a result")
        }
        return try result.get()
    }

    private func run(_ selection: BatchSelection, store: SQLiteStore, schema: TableLayout, identity: StoreIdentity) {
        var signalled = false
        let result = Result {
            try store.read { reader in
                try reader.inReadTransaction {
                    let statement = try selection.prepare("SELECT t0.Z_PK, t0.Z_ENT FROM \(selection.table) t0\(selection.whereClause)",
                                                          on: reader)
                    let any = try statement.step()
                    state.withLock { $0.isEmpty = !any }
                    snapshotTaken.signal()
                    signalled = true
                    var keys: [Int64] = []
                    var entities: [Int64] = []
                    if any {
                        repeat {
                            keys.append(statement.int64(at: 0))
                            entities.append(statement.int64(at: 1))
                        } while try statement.step()
                    }
                    return Rows(keys: keys, ids: try Self.objectIDs(keys: keys, entities: entities, schema: schema,
                                                                    identity: identity, url: store.url))
                }
            }
        }
        state.withLock { $0.result = result }
        if !signalled { snapshotTaken.signal() }
    }

    /// The IDs of the rows, in a set sized for them (no rehashing as it grows).
    private static func objectIDs(keys: [Int64], entities: [Int64], schema: TableLayout, identity: StoreIdentity,
                                  url: URL?) throws -> Set<ObjectID> {
        var ids = Set<ObjectID>(minimumCapacity: keys.count)
        var scopes = ObjectIDScopeCache(store: identity)
        var last: (number: Int64, entity: EntityDescription)?
        for (key, number) in zip(keys, entities) {
            if last?.number != number {
                guard let entity = schema.entitiesByNumber[number] else {
                    throw PersistentStoreError(.ioFailure, url: url, message: "row \(key) has entity number \(number), which the model does not have")
                }
                last = (number, entity)
            }
            if let entity = last?.entity { ids.insert(scopes.objectID(of: entity, primaryKey: key)) }
        }
        return ids
    }
}
