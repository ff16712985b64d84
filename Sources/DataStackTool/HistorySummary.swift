import Foundation
import DataStack

/// How many transactions a store's history holds, and its first and last.
struct HistorySummary {
    let count: Int
    let first: PersistentHistoryTransaction?
    let last: PersistentHistoryTransaction?

    /// The summary, or nil when the store records no persistent history.
    init?(_ opened: OpenedStore) throws {
        var count = 0
        var first: PersistentHistoryTransaction?
        var last: PersistentHistoryTransaction?
        do {
            try HistoryPages(coordinator: opened.coordinator, includesChanges: false).forEach(after: nil) { transaction in
                count += 1
                if first == nil { first = transaction }
                last = transaction
            }
        } catch let error as PersistentStoreError where error.code == .historyNotTracked {
            return nil
        }
        self.count = count
        self.first = first
        self.last = last
    }

    var text: String {
        guard let first, let last else { return "\(count) transactions" }
        return "\(count) transaction\(count == 1 ? "" : "s"), first \(first.transactionNumber) at \(ValueFormat.date(first.timestamp)), "
            + "last \(last.transactionNumber) at \(ValueFormat.date(last.timestamp))"
    }

    var json: [String: Any] {
        func point(_ transaction: PersistentHistoryTransaction?) -> Any {
            guard let transaction else { return NSNull() }
            return ["transaction": Int(transaction.transactionNumber), "timestamp": ValueFormat.date(transaction.timestamp)]
        }
        return ["transactions": count, "first": point(first), "last": point(last)]
    }
}
