import Foundation
import DataStack

/// Reads a store's history a page of transactions at a time, so that memory
/// holds one page however long the history is: each page is a fetch after the
/// previous page's last token, with a fetch limit.
struct HistoryPages {
    let coordinator: PersistentStoreCoordinator
    let includesChanges: Bool
    var pageSize = 200

    /// Calls `body` with every transaction after `token` (all for nil), oldest first.
    ///
    /// - Throws: ``PersistentStoreError/Code/historyNotTracked`` when the store has no history tables.
    func forEach(after token: PersistentHistoryToken?, _ body: (PersistentHistoryTransaction) throws -> Void) throws {
        var after = token
        while true {
            var request = PersistentHistoryRequest.fetchHistory(after: after)
            request.fetchLimit = pageSize
            request.includesChanges = includesChanges
            let page = try coordinator.fetchHistory(request)
            for transaction in page { try body(transaction) }
            guard page.count == pageSize, let last = page.last else { return }
            after = last.token
        }
    }
}
