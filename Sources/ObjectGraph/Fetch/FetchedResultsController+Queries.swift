import Foundation

// MARK: - The plan: a controller's request, checked once

/// What a controller fetches with, resolved from its request at `performFetch()`.
struct FetchPlan {
    /// The request as the store runs it, returning rows (`.managedObject`), without limits.
    let template: StoreFetch
    let entity: EntityDescription
    /// Names of the entities whose objects can be in the list (the entity and, if included, its subentities).
    let entityNames: Set<String>
    let predicate: FetchPredicate?
    let sorts: [FetchSort]
    let sortPaths: [ToOneKeyPath]
    let sectionPath: ToOneKeyPath?
    let limit: Int
    let offset: Int
    let batchSize: Int
    let includesSubentities: Bool

    init<Result>(request: FetchRequest<Result>, sectionNameKeyPath: String?, context: ManagedObjectContext) throws {
        guard !request.sortDescriptors.isEmpty else {
            throw FetchedResultsControllerError(.missingSortDescriptors, entityName: request.entityName,
                                                message: "the request needs at least one sort descriptor")
        }
        guard request.resultType == .managedObject else {
            throw FetchedResultsControllerError(.wrongResultType, entityName: request.entityName,
                                                message: "the request must return managed objects, not \(request.resultType)")
        }
        var fetch = try context.storeFetch(for: request)
        try FetchOutput.checkResultType(Result.self, for: fetch)
        fetch.resultType = .managedObject
        fetch.fetchLimit = 0
        fetch.fetchOffset = 0
        fetch.propertiesToFetch = nil
        template = fetch
        entity = fetch.entity
        entityNames = Set(fetch.entities.map(\.name))
        predicate = request.predicate
        sorts = request.sortDescriptors
        sortPaths = try request.sortDescriptors.map { try ToOneKeyPath($0.keyPath, from: fetch.entity) }
        sectionPath = try sectionNameKeyPath.map {
            try ToOneKeyPath($0.split(separator: ".", omittingEmptySubsequences: false).map(String.init), from: fetch.entity)
        }
        limit = max(0, request.fetchLimit)
        offset = max(0, request.fetchOffset)
        batchSize = max(0, request.fetchBatchSize)
        includesSubentities = request.includesSubentities
    }

    /// Whether an object of this ID's entity can be in the list.
    func admits(_ id: ObjectID) -> Bool { entityNames.contains(id.entityName) }

    /// The list's predicate restricted further by `extra`.
    func predicate(and extra: FetchPredicate) -> FetchPredicate {
        predicate.map { FetchPredicate.and([extra, $0]) } ?? extra
    }

    // MARK: Order

    /// Orders two objects' keys as the list does (and as the store's `ORDER BY` does).
    func compare(_ a: FetchedKeys, _ b: FetchedKeys) -> ComparisonResult {
        for (index, sort) in sorts.enumerated() {
            let result = FetchSort.compare(a.sortValues[index], b.sortValues[index], caseInsensitive: sort.caseInsensitive)
            if result == .orderedSame { continue }
            return sort.ascending ? result : (result == .orderedAscending ? .orderedDescending : .orderedAscending)
        }
        return .orderedSame
    }

    /// The entries in list order; equal ones keep their order.
    func sorted(_ entries: [FetchedEntry]) -> [FetchedEntry] {
        entries.enumerated().sorted { lhs, rhs in
            switch compare(lhs.element.keys, rhs.element.keys) {
            case .orderedAscending: true
            case .orderedDescending: false
            case .orderedSame: lhs.offset < rhs.offset
            }
        }.map(\.element)
    }

    /// Two sorted lists as one; on equal keys `first`'s entries come first.
    func merge(_ first: [FetchedEntry], _ second: [FetchedEntry]) -> [FetchedEntry] {
        if second.isEmpty { return first }
        if first.isEmpty { return second }
        var result: [FetchedEntry] = []
        result.reserveCapacity(first.count + second.count)
        var i = 0, j = 0
        while i < first.count && j < second.count {
            if compare(second[j].keys, first[i].keys) == .orderedAscending {
                result.append(second[j]); j += 1
            } else {
                result.append(first[i]); i += 1
            }
        }
        result.append(contentsOf: first[i...])
        result.append(contentsOf: second[j...])
        return result
    }
}

/// An object's place in the list: its ID and the keys that order and section it.
struct FetchedEntry {
    var id: ObjectID
    var keys: FetchedKeys
}

/// The values an object is ordered and sectioned by, cached so that reordering never loads it.
struct FetchedKeys: Equatable {
    var sortValues: [PropertyValue]
    var sectionName: String

    /// A section key's value as a section name: strings as they are, `""` for nil,
    /// numbers as `NSNumber` prints them, dates as `Date` prints them.
    static func sectionName(for value: PropertyValue) -> String {
        switch value {
        case .null, .objects: ""
        case .string(let string): string
        case .integer(let integer): String(integer)
        case .double(let double):
            double.rounded() == double && abs(double) < 1e15 ? String(Int64(double)) : String(double)
        case .bool(let bool): bool ? "1" : "0"
        case .date(let date): String(describing: date)
        case .data(let data): String(describing: data)
        case .uuid(let uuid): uuid.uuidString
        case .uri(let url): url.absoluteString
        case .decimal(let decimal): String(describing: decimal)
        case .object(let id): id.uriRepresentation().absoluteString
        }
    }
}

extension FetchPredicate {
    /// `SELF IN {ids}`, built without parsing; the SQLite store runs it as
    /// `t0.Z_PK IN (?1, …)`, or for a long list as one JSON array parameter
    /// (``PredicateSQLList``).
    ///
    /// A short list is padded to a power of two (at least 8) by repeating its
    /// last ID: its SQL text depends on its length, and the store caches one
    /// prepared statement per text, so padding keeps merges of every size to a
    /// few statements. A long list's text does not depend on its length, so it
    /// is not padded. Duplicates in `IN` change nothing.
    static func objectIDs(in ids: [ObjectID]) -> FetchPredicate {
        var constants = ids.map { PredicateNode.constant(.object($0)) }
        if let last = constants.last, constants.count < PredicateSQLList.minimumCount {
            var size = 8
            while size < constants.count { size *= 2 }
            constants.append(contentsOf: repeatElement(last, count: size - constants.count))
        }
        return FetchPredicate(expression: .comparison(lhs: .keyPath([]), op: .in, rhs: .collection(constants),
                                                      options: [], modifier: .direct))
    }
}

// MARK: - Reading keys and rows

extension FetchedResultsController {
    /// The most IDs in one `SELF IN` query: SQLite allows 32,766 bound values, and the list's own predicate needs a few.
    static var idsPerQuery: Int { 16_384 }

    /// An object's keys, read in memory.
    func keys(of object: ManagedObject, _ plan: FetchPlan) throws -> FetchedKeys {
        FetchedKeys(sortValues: try zip(plan.sorts, plan.sortPaths).map { $0.sortValue(try object.value(at: $1)) },
                    sectionName: try plan.sectionPath.map { FetchedKeys.sectionName(for: try object.value(at: $0)) } ?? "")
    }

    /// Whether a registered object belongs in the list, judged in memory.
    ///
    /// - Throws: the evaluation's error (an object it cannot read): the list
    ///   must not drop an object it could not judge.
    func matches(_ object: ManagedObject, _ plan: FetchPlan) throws -> Bool {
        guard plan.entityNames.contains(object.entity.name), !object.isDeleted,
              object.managedObjectContext === managedObjectContext else { return false }
        guard let predicate = plan.predicate else { return true }
        return try predicate.evaluate(with: object)
    }

    /// The objects matching `predicate` in the store (or, for a child context,
    /// in its parent), in list order, at most `limit` (0: all), with their keys.
    ///
    /// A context on a coordinator reads rows and registers nothing: one query,
    /// plus one per to-one step of a sort key path for destinations it has not
    /// loaded. A child context asks its parent for IDs and loads the objects.
    func storeEntries(matching predicate: FetchPredicate?, limit: Int, _ plan: FetchPlan) throws -> (entries: [FetchedEntry], rows: [IncrementalStoreNode]) {
        let context = managedObjectContext
        if context.parent == nil, let coordinator = context.persistentStoreCoordinator {
            var fetch = plan.template
            fetch.predicate = predicate
            fetch.fetchLimit = limit
            let rows: [IncrementalStoreNode]
            switch try coordinator.execute(fetch, in: context) {
            case .nodes(let nodes): rows = nodes
            case .encodedNodes(let encoded): rows = encoded.map(\.node)
            case .objectIDs(let ids): rows = try coordinator.nodes(for: ids, stalenessInterval: context.stalenessInterval, in: context)
            default: rows = []
            }
            let keys = try readKeys(of: rows, plan)
            // Several stores come back one after the other: order them as one list.
            var entries = plan.sorted(zip(rows, keys).map { FetchedEntry(id: $0.objectID, keys: $1) })
            if limit > 0 && entries.count > limit { entries.removeLast(entries.count - limit) }
            return (entries, rows)
        }
        var request = FetchRequest<ObjectID>(entityName: plan.entity.name)
        request.resultType = .managedObjectID
        request.predicate = predicate
        request.sortDescriptors = plan.sorts
        request.fetchLimit = limit
        request.includesSubentities = plan.includesSubentities
        request.includesPendingChanges = false   // this context's own changes are handled in memory
        let objects = try context.fetch(request).map { context.object(with: $0) }
        context.fireFaults(objects)
        return (try objects.map { FetchedEntry(id: $0.objectID, keys: try keys(of: $0, plan)) }, [])
    }

    /// The keys of rows, without registering them.
    func readKeys(of rows: [IncrementalStoreNode], _ plan: FetchPlan) throws -> [FetchedKeys] {
        let sortColumns = try zip(plan.sorts, plan.sortPaths).map { sort, path in try values(at: path, of: rows).map(sort.sortValue) }
        let sectionColumn = try plan.sectionPath.map { try values(at: $0, of: rows) }
        return rows.indices.map { row in
            FetchedKeys(sortValues: sortColumns.map { $0[row] },
                        sectionName: sectionColumn.map { FetchedKeys.sectionName(for: $0[row]) } ?? "")
        }
    }

    /// The value at a key path for each row. A to-one step reads the
    /// destinations together: loaded ones in memory, the others in one request.
    private func values(at path: ToOneKeyPath, from position: Int = 0, of rows: [IncrementalStoreNode]) throws -> [PropertyValue] {
        let index = path.properties[position].index
        let first = rows.map { row in row.values.indices.contains(index) ? row.values[index] : .null }
        let rest = position + 1
        if rest == path.properties.count { return first }
        let context = managedObjectContext
        var destinations: [ObjectID: PropertyValue] = [:]
        var unloaded: [ObjectID] = []
        for case .object(let id) in first where destinations[id] == nil {
            if let object = context.registeredObject(for: id), !object.isFault {
                destinations[id] = try object.value(at: path, from: rest)
            } else {
                destinations[id] = .null
                unloaded.append(id)
            }
        }
        if !unloaded.isEmpty {
            let destinationRows = try context.parentNodes(for: unloaded)
            for (row, value) in zip(destinationRows, try values(at: path, from: rest, of: destinationRows)) {
                destinations[row.objectID] = value
            }
        }
        return first.map { value in
            guard case .object(let id) = value else { return .null }
            return destinations[id] ?? .null
        }
    }

    /// The context's unsaved objects that could be in the list: every ID (the
    /// store's rows for them are stale), and the objects not deleted.
    func pendingObjects(_ plan: FetchPlan) -> (ids: Set<ObjectID>, live: [ManagedObject]) {
        let context = managedObjectContext
        var ids = Set<ObjectID>()
        var live: [ManagedObject] = []
        for object in context.unsavedInserts.objects + context.unsavedUpdates.objects
        where plan.entityNames.contains(object.entity.name) {
            ids.insert(object.objectID)
            if !object.isDeleted { live.append(object) }
        }
        for object in context.unsavedDeletes.objects where plan.entityNames.contains(object.entity.name) {
            ids.insert(object.objectID)
        }
        return (ids, live)
    }

    /// The list as the store and the context's unsaved changes make it now.
    ///
    /// One query for the store's rows, leaving out the objects with unsaved
    /// changes, which are judged in memory.
    func load(_ plan: FetchPlan) throws -> (list: FetchedList, rows: [IncrementalStoreNode]) {
        let pending = pendingObjects(plan)
        let predicate = pending.ids.isEmpty ? plan.predicate : plan.predicate(and: .not(.objectIDs(in: Array(pending.ids))))
        let stored = try storeEntries(matching: predicate, limit: plan.limit > 0 ? plan.limit + plan.offset : 0, plan)
        let inMemory = plan.sorted(try pending.live.filter { try matches($0, plan) }.map { FetchedEntry(id: $0.objectID, keys: try keys(of: $0, plan)) })
        var entries = plan.merge(stored.entries, inMemory)
        if plan.offset > 0 { entries = Array(entries.dropFirst(plan.offset)) }
        if plan.limit > 0 && entries.count > plan.limit { entries.removeLast(entries.count - plan.limit) }
        return (FetchedList(entries: entries, sectioned: plan.sectionPath != nil), stored.rows)
    }

    /// Leaves the rows of objects now in the list in the coordinator's cache, so
    /// reading them fires their faults without a query. Windowed lists (a batch
    /// size) load their batches when read instead.
    func cacheRows(_ rows: [IncrementalStoreNode]) {
        guard !rows.isEmpty, let list, let plan, plan.batchSize == 0,
              let coordinator = managedObjectContext.persistentStoreCoordinator else { return }
        coordinator.didRead(rows.filter { list.positions[$0.objectID] != nil }, for: managedObjectContext)
    }
}
