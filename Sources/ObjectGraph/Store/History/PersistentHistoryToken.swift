import Foundation

/// A bookmark in a store's persistent history (Core Data: `NSPersistentHistoryToken`):
/// the store and the number of its last transaction a reader has seen.
///
/// Keep the token of the last transaction you processed — it is `Codable`, so
/// it survives between runs — and ask for the history after it next time:
///
/// ```swift
/// let request = PersistentHistoryRequest.fetchHistory(after: savedToken)
/// for transaction in try coordinator.fetchHistory(request) { … }
/// savedToken = transactions.last?.token ?? savedToken
/// ```
///
/// A token names one store. Core Data's token is a map from store UUIDs to
/// transaction numbers; here a token of a coordinator with several tracking
/// stores is one token per store, which keeps comparison total and simple.
/// Tokens of one store order by transaction number; tokens of different stores
/// order by store identifier first, so the order is total but says nothing
/// about time across stores.
public struct PersistentHistoryToken: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The UUID of the store the transaction belongs to (`NSStoreUUID`).
    public let storeIdentifier: String
    /// The transaction's number in that store (`ATRANSACTION.Z_PK`); 0 before any transaction.
    public let transactionNumber: Int64

    public init(storeIdentifier: String, transactionNumber: Int64) {
        self.storeIdentifier = storeIdentifier
        self.transactionNumber = transactionNumber
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.storeIdentifier, lhs.transactionNumber) < (rhs.storeIdentifier, rhs.transactionNumber)
    }

    /// Core Data's form: `{ "<store UUID>" = <transaction number>; }`.
    public var description: String { "{ \"\(storeIdentifier)\" = \(transactionNumber); }" }
}
