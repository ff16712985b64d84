import DataStack
import DataStackSync
import Foundation

/// `dump --global-ids`: names a replica's objects by their global IDs (its
/// sync tables, ``DataStackSync/SyncGlobalIDs``) and walks an entity's objects
/// in the order of those IDs, a page at a time — the order every replica
/// shares, where the order of primary keys is each replica's own.
struct GlobalNames {
    let file: URL
    let store: any PersistentStore
    private let ids: SyncGlobalIDs

    init(file: URL, store: any PersistentStore) throws {
        self.file = file
        self.store = store
        let ids: SyncGlobalIDs?
        do {
            ids = try SyncGlobalIDs(storeAt: file)
        } catch {
            throw ToolError(.dataError, "\(error)")
        }
        guard let ids else {
            throw ToolError(.dataError, "\(file.path): not a replica (the store has no sync tables), so its objects have no global IDs; "
                            + "dump it without --global-ids")
        }
        self.ids = ids
    }

    /// The global ID of the object `id` names, as text.
    func name(of id: ObjectID) throws -> String {
        let globalID: UUID?
        do {
            globalID = try id.primaryKey.flatMap { key throws(SyncError) in try ids.globalID(entity: id.entityName, primaryKey: key) }
        } catch {
            throw ToolError(.dataError, "\(error)")
        }
        guard let globalID else {
            throw ToolError(.dataError, "\(file.path): \(ValueFormat.text(id)) has no global ID: it was saved after the replica last "
                            + "recorded its changes; let it sync, then dump")
        }
        return globalID.uuidString
    }

    /// Calls `body` with each page of `entity`'s objects (not its
    /// subentities'), in the order of their global IDs, on the context's queue.
    ///
    /// Refuses an entity some of whose objects have no global ID yet, rather
    /// than leave them out: a dump that silently lacks objects would compare
    /// equal to a replica that lacks them.
    func forEachPage(of entity: EntityDescription, predicate: FetchPredicate?, in context: ManagedObjectContext,
                     _ body: ([ManagedObject]) throws -> Void) throws {
        var all = FetchRequest<ManagedObject>(entityName: entity.name)
        all.includesSubentities = false
        all.includesPendingChanges = false
        let stored = try context.count(for: all)
        let named = try syncCall { () throws(SyncError) in try ids.count(of: entity.name) }
        guard stored <= named else {
            throw ToolError(.dataError, "\(file.path): \(stored - named) of the \(stored) \(entity.name) objects have no global ID: "
                            + "they were saved after the replica last recorded its changes; let it sync, then dump")
        }
        guard stored == named else {
            throw ToolError(.dataError, "\(file.path): the sync tables name \(named - stored) \(entity.name) rows the store does not hold")
        }
        var after: UUID?
        while true {
            let rows = try syncCall { () throws(SyncError) in try ids.rows(of: entity.name, after: after, limit: ObjectPager.pageSize) }
            guard let last = rows.last else { return }
            var request = all
            let members = try FetchPredicate(format: "SELF IN %@", argumentArray: [rows.map { store.newObjectID(for: entity, primaryKey: $0.primaryKey) }])
            request.predicate = predicate.map { FetchPredicate.and([members, $0]) } ?? members
            let fetched = try context.fetch(request)
            var byKey: [Int64: ManagedObject] = [:]
            for object in fetched { byKey[object.objectID.primaryKey ?? 0] = object }
            var page: [ManagedObject] = []
            page.reserveCapacity(rows.count)
            for row in rows {
                if let object = byKey[row.primaryKey] {
                    page.append(object)
                } else if predicate == nil {
                    throw ToolError(.dataError, "\(file.path): global ID \(row.globalID.uuidString) names \(entity.name) "
                                    + "p\(row.primaryKey), which the store does not hold")
                }
            }
            try body(page)
            context.reset()
            guard rows.count == ObjectPager.pageSize else { return }
            after = last.globalID
        }
    }

    private func syncCall<T>(_ body: () throws(SyncError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw ToolError(.dataError, "\(error)")
        }
    }
}
