import Foundation

/// A request to read or delete a store's persistent history (Core Data:
/// `NSPersistentHistoryChangeRequest`), run by
/// ``PersistentStoreCoordinator/fetchHistory(_:)`` or
/// ``PersistentStoreCoordinator/deleteHistory(_:)``.
///
/// ```swift
/// var request = PersistentHistoryRequest.fetchHistory(after: lastToken)
/// request.filter = .not(.author("importer"))   // everything but my own saves
/// request.fetchLimit = 500
/// ```
///
/// Bounds are exclusive, as in Core Data: a fetch after a token starts with
/// the next transaction; a delete before a token keeps the token's own.
public struct PersistentHistoryRequest: Sendable {
    /// Where the request starts (a fetch) or ends (a delete).
    public enum Bound: Sendable, Hashable {
        /// After (or before) this token's transaction; a fetch after nil reads all history.
        case token(PersistentHistoryToken?)
        /// After (or before) this moment, by transaction timestamp.
        case date(Date)
    }

    public enum Kind: Sendable, Hashable {
        case fetch
        case delete
    }

    public var kind: Kind
    public var bound: Bound
    /// For a fetch: at most this many transactions, oldest first; 0 for no limit.
    public var fetchLimit: Int = 0
    /// For a fetch: whether each transaction's changes are read too. The default
    /// is true (Core Data's `transactionsAndChanges`); false reads transactions
    /// only, with `changes` nil.
    public var includesChanges = true
    /// For a fetch: only transactions that match. The default matches all.
    public var filter: PersistentHistoryFilter?

    /// The transactions after `token`, oldest first; after nil, all of them.
    public static func fetchHistory(after token: PersistentHistoryToken?) -> Self {
        Self(kind: .fetch, bound: .token(token))
    }

    /// The transactions written after `date`, oldest first.
    public static func fetchHistory(after date: Date) -> Self {
        Self(kind: .fetch, bound: .date(date))
    }

    /// Deletes the transactions before `token`'s, with their changes.
    public static func deleteHistory(before token: PersistentHistoryToken) -> Self {
        Self(kind: .delete, bound: .token(token))
    }

    /// Deletes the transactions written before `date`, with their changes.
    public static func deleteHistory(before date: Date) -> Self {
        Self(kind: .delete, bound: .date(date))
    }
}

/// Which transactions a history fetch returns, by author and context name
/// (Core Data narrows a history fetch with a predicate on the transaction's
/// `author` and `contextName`; these are the keys that predicate is used with).
public indirect enum PersistentHistoryFilter: Sendable, Hashable {
    /// Transactions saved by a context with this ``ManagedObjectContext/transactionAuthor``.
    case author(String)
    /// Transactions saved by a context with this ``ManagedObjectContext/name``.
    case contextName(String)
    /// Transactions that do not match (including those without an author or name).
    case not(PersistentHistoryFilter)
    case and([PersistentHistoryFilter])
    case or([PersistentHistoryFilter])

    /// Whether a transaction matches.
    public func matches(_ transaction: PersistentHistoryTransaction) -> Bool {
        switch self {
        case .author(let author): transaction.author == author
        case .contextName(let name): transaction.contextName == name
        case .not(let filter): !filter.matches(transaction)
        case .and(let filters): filters.allSatisfy { $0.matches(transaction) }
        case .or(let filters): filters.contains { $0.matches(transaction) }
        }
    }
}
