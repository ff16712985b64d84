import Foundation

/// Settles the conflicts a store meets while it writes a save, inside the
/// save's write transaction (Core Data: the merge policy a save runs under,
/// `NSMergePolicy.resolve(optimisticLockingConflicts:)` and
/// `resolve(constraintConflicts:)`).
///
/// A root context sends one with each save, in
/// ``SaveChangesRequest/conflictResolver``: it applies the context's
/// ``ManagedObjectContext/mergePolicy`` to version conflicts and collapses
/// duplicates of uniqueness constraints. Every store calls it the same way —
/// `SQLiteStore`, `InMemoryStore`, the PostgreSQL store and a store of your
/// own — so a merge policy means the same on each, and no store needs more of
/// the context than this.
///
/// ```swift
/// func execute(_ save: SaveChangesRequest) throws -> SaveResult {
///     try writeLock.withLock {   // the write transaction: one writer at a time
///         try save.writeResolvingConflicts(
///             attempt: { request in try rows.withLock { try write(request, into: &$0) } },   // all or nothing
///             currentRows: { ids in rows.withLock { rows in ids.compactMap { rows[$0] } } })
///     }
/// }
/// ```
///
/// What a store does, in this order, inside one write transaction:
/// 1. Begin the transaction, so that no other writer moves a row until it
///    ends (SQLite: `BEGIN IMMEDIATE`). A store whose database locks rows
///    rather than the whole database (PostgreSQL) locks the rows it reads in step 3.
/// 2. Attempt the request: check the version of every updated, deleted and
///    locked row against the request's, gathering every mismatch. When any
///    mismatches, or a uniqueness constraint refuses a row, undo the attempt
///    (roll back to a savepoint) and throw ``ObjectGraphError/mergeConflict(_:)``
///    with all the mismatches, or ``ObjectGraphError/uniquenessConflict(_:)``.
/// 3. Read the rows of the version conflicts as the transaction sees them
///    now and call ``resolve(_:)`` with the conflicts and those rows: on the
///    thread that called ``PersistentStore/execute(_:in:)``, before that
///    returns, and holding no lock the store's reads take — resolving may read
///    the store (a uniqueness constraint is checked again).
/// 4. Attempt the request the resolver returns in place of the first (step 2).
///    It carries the versions just read, so it normally stands at once.
/// 5. When the resolver throws, roll the transaction back and throw its error:
///    nothing of the save is written.
/// 6. Commit, and return the ``SaveResult`` of the request that was written.
///
/// ``SaveChangesRequest/writeResolvingConflicts(attempt:currentRows:)`` runs
/// steps 2 to 5 for a store that gives it an attempt and a row reader. A
/// request without a resolver is written or refused as it is.
public protocol SaveConflictResolver: Sendable {
    /// The request to write in place of the one that met `conflicts`: the
    /// same objects, merged with the rows as they are now, less those the
    /// policy drops, duplicates collapsed.
    ///
    /// - Throws: the conflict itself when the policy refuses it
    ///   (``MergePolicy/error``), or an error met while resolving, such as a
    ///   read that failed; the store then writes nothing.
    func resolve(_ conflicts: SaveConflicts) throws -> SaveChangesRequest
}

/// What a store met while it wrote a save, for its ``SaveConflictResolver``.
public struct SaveConflicts: Sendable {
    /// Objects whose row version in the store is not the one the request carries (optimistic locking).
    public var versionConflicts: [MergeConflict]
    /// The rows of ``versionConflicts``' objects as the write transaction sees
    /// them; a row that is gone is left out.
    public var currentRows: [ObjectID: IncrementalStoreNode]
    /// Rows a uniqueness constraint refused: another row holds their values.
    public var uniquenessConflicts: [UniquenessConflict]

    public init(versionConflicts: [MergeConflict] = [], currentRows: [ObjectID: IncrementalStoreNode] = [:],
                uniquenessConflicts: [UniquenessConflict] = []) {
        self.versionConflicts = versionConflicts
        self.currentRows = currentRows
        self.uniquenessConflicts = uniquenessConflicts
    }
}

extension SaveChangesRequest {
    /// The most requests one save attempts: the first and three resolved ones.
    ///
    /// Bounded, and nothing waits between attempts: inside the write
    /// transaction the rows a resolution read stay as they are, so a round
    /// settles what it met. Another round is needed only when the resolved
    /// request meets a conflict of the other kind (collapsing duplicates can
    /// delete an existing object whose row moved), or when a row no round has
    /// read yet moved in a store that locks rows, not the database. Past the
    /// bound the last conflict is the save's error.
    public static let maximumConflictResolutionAttempts = 4

    /// Writes this request by `attempt`, handing every conflict it throws to
    /// ``conflictResolver`` and attempting the request that returns — steps 2
    /// to 5 of the ``SaveConflictResolver`` contract, for a store to call
    /// inside its write transaction. Without a resolver, the request is
    /// attempted once and its conflicts are thrown.
    ///
    /// - Parameters:
    ///   - attempt: writes one request, all or nothing, inside the caller's
    ///     transaction and returns the save's result. When it finds
    ///     conflicts it undoes what it wrote (a savepoint rolled back) and
    ///     throws ``ObjectGraphError/mergeConflict(_:)`` with every version
    ///     mismatch, or ``ObjectGraphError/uniquenessConflict(_:)``.
    ///   - currentRows: the rows of these objects as the transaction sees
    ///     them now, leaving out those that are gone; a store that locks rows
    ///     locks them here, so that they stay as read until it commits.
    /// - Throws: what the resolver or `attempt` throws; the conflict of the
    ///   last attempt past ``maximumConflictResolutionAttempts``.
    public func writeResolvingConflicts<Result>(attempt: (SaveChangesRequest) throws -> Result,
                                               currentRows: ([ObjectID]) throws -> [IncrementalStoreNode]) throws -> Result {
        guard let resolver = conflictResolver else { return try attempt(self) }
        var request = self
        var attempts = 0
        while true {
            attempts += 1
            let conflicts: SaveConflicts
            do {
                return try attempt(request)
            } catch let error as ObjectGraphError
                        where error.code == .mergeConflict && !error.mergeConflicts.isEmpty && attempts < Self.maximumConflictResolutionAttempts {
                let found = error.mergeConflicts
                let rows = try currentRows(found.map(\.objectID))
                conflicts = SaveConflicts(versionConflicts: found,
                                          currentRows: Dictionary(rows.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first }))
            } catch let error as ObjectGraphError where error.code == .uniquenessConflict && attempts < Self.maximumConflictResolutionAttempts {
                conflicts = SaveConflicts(uniquenessConflicts: error.uniquenessConflicts)
            }
            request = try resolver.resolve(conflicts)
            request.conflictResolver = resolver
        }
    }
}
