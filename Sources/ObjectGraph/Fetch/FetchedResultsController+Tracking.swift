import Foundation

// MARK: - Following the context's changes

extension FetchedResultsController {
    /// Turns one `objectsDidChange` of the context — its own changes, or a
    /// merged save — into at most one change of the list.
    ///
    /// The objects named (for a merge: every object the save inserted, updated
    /// or deleted, registered here or not) are narrowed to the list's entity;
    /// a save naming more than 16,384 objects fetches the list again instead
    /// (``reloadAfterLargeSave(_:_:_:_:)``).
    /// Deleted and invalidated ones leave. Registered, loaded ones are judged
    /// in memory; the rest in the store with one `SELF IN {ids} AND (predicate)`
    /// query per 16,384 IDs, limited to the list's `fetchLimit`, whose rows give
    /// the sort keys to place them. A limited list that lost ground asks the
    /// store for its best replacements (one more query). A reset (`invalidatedAll`)
    /// fetches the list again.
    ///
    /// - Complexity: I/O proportional to the objects of the list's entity in
    ///   the change; O(*n* log *n*) in memory over the list's IDs to diff.
    func contextDidChange(_ change: ObjectsDidChange) {
        guard let list, let plan else { return }
        if change.invalidatedAll {
            reloadAfterReset(list, plan)
            return
        }
        if let save = change.mergedSave,
           save.inserted.count + save.updatedObjectIDs.count + save.deletedObjectIDs.count > Self.idsPerQuery {
            reloadAfterLargeSave(save, change, list, plan)
            return
        }
        var removed = Set<ObjectID>()
        var candidates = Set<ObjectID>()
        for id in change.deletedObjectIDs where plan.admits(id) { removed.insert(id) }
        for id in change.invalidatedObjectIDs where plan.admits(id) { removed.insert(id) }
        // The inserted IDs by their list: a set of them is built only for a reader that asks.
        for id in change.inserted.ids where plan.admits(id) { candidates.insert(id) }
        for ids in [change.updatedObjectIDs, change.refreshedObjectIDs] {
            for id in ids where plan.admits(id) { candidates.insert(id) }
        }
        if let save = change.mergedSave {
            for id in save.deletedObjectIDs where plan.admits(id) { removed.insert(id) }
            for id in save.inserted.ids where plan.admits(id) { candidates.insert(id) }
            for id in save.updatedObjectIDs where plan.admits(id) { candidates.insert(id) }
        }
        candidates.subtract(removed)
        guard !candidates.isEmpty || removed.contains(where: { list.positions[$0] != nil }) else { return }
        let touched = candidates.union(removed)
        do {
            // With an offset, a change before the window shifts it: fetch the window again.
            let next = plan.offset > 0 ? try load(plan) : try updated(list, removing: removed, checking: candidates, plan)
            apply(next.list, rows: next.rows, touched: touched)
        } catch {
            // The store could not answer (a file removed, a disk error): fetch
            // again if it can; otherwise the list stays as it was — stale, not
            // wrong — and the next change or `performFetch()` tries again.
            if let fresh = try? load(plan) { apply(fresh.list, rows: fresh.rows, touched: touched) }
        }
    }

    /// The list after a change: `removed` leave, `candidates` are checked again.
    func updated(_ list: FetchedList, removing removed: Set<ObjectID>, checking candidates: Set<ObjectID>,
                 _ plan: FetchPlan) throws -> (list: FetchedList, rows: [IncrementalStoreNode]) {
        let context = managedObjectContext
        // Loaded objects are judged in memory, with this context's unsaved changes.
        var inMemory: [FetchedEntry] = []
        var unknown: [ObjectID] = []
        for id in candidates {
            if let object = context.registeredObject(for: id) {
                if object.isDeleted { continue }
                if !object.isFault {
                    if try matches(object, plan) { inMemory.append(FetchedEntry(id: object.objectID, keys: try keys(of: object, plan))) }
                    continue
                }
            }
            if !id.isTemporaryID { unknown.append(id) }
        }
        // The others in the store: which match, and their sort keys. Only the
        // best `limit` of them can enter a limited list.
        var rows: [IncrementalStoreNode] = []
        var checked: [FetchedEntry] = []
        for start in stride(from: 0, to: unknown.count, by: Self.idsPerQuery) {
            let chunk = Array(unknown[start..<min(start + Self.idsPerQuery, unknown.count)])
            let found = try storeEntries(matching: plan.predicate(and: .objectIDs(in: chunk)), limit: plan.limit, plan)
            checked = plan.merge(checked, found.entries)
            rows += found.rows
        }
        var entering = plan.merge(checked, plan.sorted(inMemory))
        if plan.limit > 0 && entering.count > plan.limit { entering.removeLast(entering.count - plan.limit) }

        // Objects the change did not touch keep their cached keys and order.
        let kept = list.ids.compactMap { id -> FetchedEntry? in
            guard !removed.contains(id), !candidates.contains(id), let keys = list.keys[id] else { return nil }
            return FetchedEntry(id: id, keys: keys)
        }
        var merged = plan.merge(kept, entering)
        let sectioned = plan.sectionPath != nil
        guard plan.limit > 0 else { return (FetchedList(entries: merged, sectioned: sectioned), rows) }
        guard list.ids.count >= plan.limit, let last = list.ids.last, let boundary = list.keys[last] else {
            // The list held every match, so nothing outside it can enter but the candidates.
            if merged.count > plan.limit { merged.removeLast(merged.count - plan.limit) }
            return (FetchedList(entries: merged, sectioned: sectioned), rows)
        }
        // A full list: every object outside it sorts after its old last one (or
        // ties with it and lost to it before). Entries before that one, and
        // untouched ones equal to it, keep their place; if fewer than `limit`
        // do, the store names the best of everything else.
        let safe = merged.prefix { entry in
            switch plan.compare(entry.keys, boundary) {
            case .orderedAscending: true
            case .orderedSame: !candidates.contains(entry.id) && list.positions[entry.id] != nil
            case .orderedDescending: false
            }
        }.count
        if safe >= plan.limit {
            merged.removeLast(merged.count - plan.limit)
            return (FetchedList(entries: merged, sectioned: sectioned), rows)
        }
        let head = Array(merged.prefix(safe))
        let tail = try best(plan.limit - safe, excluding: Set(head.map(\.id)), plan)
        return (FetchedList(entries: head + tail.entries, sectioned: sectioned), rows + tail.rows)
    }

    /// The best `count` matches outside `excluded`: one store query that leaves
    /// out `excluded` and the objects with unsaved changes, which are judged in memory.
    private func best(_ count: Int, excluding excluded: Set<ObjectID>, _ plan: FetchPlan) throws -> (entries: [FetchedEntry], rows: [IncrementalStoreNode]) {
        let pending = pendingObjects(plan)
        let left = excluded.union(pending.ids)
        let stored = try storeEntries(matching: left.isEmpty ? plan.predicate : plan.predicate(and: .not(.objectIDs(in: Array(left)))),
                                      limit: count, plan)
        let inMemory = plan.sorted(try pending.live.filter { try !excluded.contains($0.objectID) && matches($0, plan) }
            .map { FetchedEntry(id: $0.objectID, keys: try keys(of: $0, plan)) })
        var entries = plan.merge(stored.entries, inMemory)
        if entries.count > count { entries.removeLast(entries.count - count) }
        return (entries, stored.rows)
    }

    /// After a reset every object is gone: fetch again, and report the objects
    /// that stay as updated, so views pick up the new instances.
    private func reloadAfterReset(_ old: FetchedList, _ plan: FetchPlan) {
        retained = [:]
        window = []
        // As after a change the store could not answer: the list stays as it was (its IDs
        // give fresh faults of the reset context), and the next change or `performFetch()` tries again.
        guard let fresh = try? load(plan) else { return }
        apply(fresh.list, rows: fresh.rows, touched: Set(old.ids))
    }

    /// Answers a merged save of more IDs than one store query checks — a batch
    /// request over much of a table — with one fetch of the list (limited as
    /// the list is), not a check of every ID: the work on the context's queue
    /// follows the list's size rather than the save's, and no statement binds
    /// tens of thousands of IDs (SQLite compiles a long `IN` list of numbered
    /// parameters in quadratic time). Objects of the old list that the save or
    /// the merge changed are reported as updated where they stay.
    private func reloadAfterLargeSave(_ save: ContextDidSave, _ change: ObjectsDidChange, _ old: FetchedList, _ plan: FetchPlan) {
        let touched = Set(old.ids.lazy.filter { id in
            save.updatedObjectIDs.contains(id) || save.deletedObjectIDs.contains(id) || change.refreshedObjectIDs.contains(id)
                || change.updatedObjectIDs.contains(id) || change.deletedObjectIDs.contains(id) || change.invalidatedObjectIDs.contains(id)
        })
        // As in contextDidChange(_:): a store that cannot answer leaves the list
        // as it was — stale, not wrong — for the next change or performFetch() to redo.
        guard let fresh = try? load(plan) else { return }
        apply(fresh.list, rows: fresh.rows, touched: touched)
    }

    /// Makes `new` the list and delivers the difference, if there is one.
    func apply(_ new: FetchedList, rows: [IncrementalStoreNode], touched: Set<ObjectID>) {
        guard let old = list else { return }
        guard delegate != nil || subscribers.hasSubscribers || mayHaveObservers else {
            list = new
            pruneRetained()
            cacheRows(rows)
            return
        }
        let difference = FetchedList.difference(from: old, to: new, touched: touched)
        if difference.isEmpty {
            list = new
        } else {
            tellingObservers { list = new }
        }
        pruneRetained()
        cacheRows(rows)
        guard !difference.isEmpty, delegate != nil || subscribers.hasSubscribers else { return }
        deliver(FetchedResultsChange(snapshot: new.snapshot, difference: difference))
    }
}
