import Foundation

// MARK: - Persistent history

extension PersistentStoreCoordinator {
    /// The token of the last transaction of the first of `stores` that records
    /// history (Core Data: `currentPersistentHistoryToken(fromStores:)`); nil
    /// for all of the coordinator's stores. Nil when none of them records history.
    public func currentPersistentHistoryToken(fromStores stores: [any PersistentStore]? = nil) throws -> PersistentHistoryToken? {
        let tracking = (stores ?? persistentStores).compactMap { $0 as? any PersistentHistoryStore }.filter(\.tracksPersistentHistory)
        return try tracking.first?.currentPersistentHistoryToken()
    }

    /// The transactions a fetch request asks for, oldest first: from the store
    /// its token names, or, for a date or no token, from `store` (the
    /// coordinator's only store when nil).
    ///
    /// - Throws: ``PersistentStoreError`` — ``PersistentStoreError/Code/historyNotTracked``
    ///   for a store without history, ``PersistentStoreError/Code/historyTokenMismatch``
    ///   for a token of a store the coordinator does not have or a transaction
    ///   it never wrote, ``PersistentStoreError/Code/historyExpired`` when the
    ///   history after the token was deleted.
    public func fetchHistory(_ request: PersistentHistoryRequest, from store: (any PersistentStore)? = nil) throws -> [PersistentHistoryTransaction] {
        try check(request, is: .fetch, store)
        return try historyStore(for: request, store).fetchHistory(request)
    }

    /// Deletes the transactions (with their changes) before a request's bound;
    /// returns how many transactions were deleted. Transactions from the bound on stay.
    ///
    /// - Throws: as ``fetchHistory(_:from:)``; ``PersistentStoreError/Code/invalidHistoryRequest``
    ///   for a fetch request, which must never delete anything.
    public func deleteHistory(_ request: PersistentHistoryRequest, from store: (any PersistentStore)? = nil) throws -> Int {
        try check(request, is: .delete, store)
        return try historyStore(for: request, store).deleteHistory(request)
    }

    /// A fetch request given to `deleteHistory` (or the other way round) is refused, not run as the other kind.
    private func check(_ request: PersistentHistoryRequest, is kind: PersistentHistoryRequest.Kind, _ store: (any PersistentStore)?) throws {
        guard request.kind == kind else {
            throw PersistentStoreError(.invalidHistoryRequest, url: store?.url, message:
                "a \(request.kind) history request was given to \(kind == .fetch ? "fetchHistory" : "deleteHistory"); make it with .\(kind == .fetch ? "fetchHistory(after:)" : "deleteHistory(before:)")")
        }
    }

    private func historyStore(for request: PersistentHistoryRequest, _ given: (any PersistentStore)?) throws -> any PersistentHistoryStore {
        let stores = persistentStores
        let store: any PersistentStore
        if case .token(let token?) = request.bound {
            guard let owner = stores.first(where: { $0.identifier == token.storeIdentifier }) else {
                throw PersistentStoreError(.historyTokenMismatch, url: given?.url, message:
                    "the history token belongs to the store \(token.storeIdentifier), which is not one of the coordinator's stores")
            }
            store = owner
        } else if let given {
            store = given
        } else if stores.count == 1 {
            store = stores[0]
        } else {
            throw PersistentStoreError(.storeNotFound, url: nil, message:
                "the coordinator has \(stores.count) stores: name the store whose history to read")
        }
        guard let history = store as? any PersistentHistoryStore else {
            throw PersistentStoreError(.historyNotTracked, url: store.url, message:
                "a store of type \(store.type) keeps no persistent history")
        }
        return history
    }
}
