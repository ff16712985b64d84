import Foundation

// MARK: - Fetching

extension ManagedObjectContext {
    /// The objects (or IDs, dictionaries, count) that match a request.
    ///
    /// With ``FetchRequest/includesPendingChanges`` (the default) the result
    /// reflects this context's unsaved inserts, updates and deletes, and a child
    /// context's fetch sees its parents' unsaved state. Dictionary results, and
    /// so aggregates, reflect saved state only, as in Core Data. Objects already
    /// registered come back as they are — a fetch does not overwrite their
    /// values — unless the request asks for it
    /// (``FetchRequest/shouldRefreshRefetchedObjects``).
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownEntity``, a predicate error for
    ///   a key the entity lacks, ``FetchExpressionError`` for expressions,
    ///   grouping or a having predicate that don't fit the entity,
    ///   ``ObjectGraphError/Code-swift.struct/wrongResultType``, or the store's error.
    public func fetch<Result>(_ request: FetchRequest<Result>) throws -> [Result] {
        assertOnQueue()
        let fetch = try storeFetch(for: request)
        try FetchOutput.checkResultType(Result.self, for: fetch)
        let prefetching = try prefetchPaths(request.relationshipKeyPathsForPrefetching, from: fetch.entity)
        let refreshes = request.shouldRefreshRefetchedObjects && fetch.resultType == .managedObject
        let started = refreshes ? DispatchTime.now().uptimeNanoseconds : 0
        // Refreshing fetches faults and fills them afterwards: filled in the fetch,
        // an object loaded before it could not be told from one loaded by it.
        let output = try executeFetch(fetch, includesPendingChanges: request.includesPendingChanges,
                                      returnsObjectsAsFaults: request.returnsObjectsAsFaults || refreshes,
                                      includesPropertyValues: request.includesPropertyValues,
                                      batchSize: request.fetchBatchSize)
        if refreshes, case .objects(let objects) = output {
            try refreshRefetched(objects, readSince: started, fillingFaults: !request.returnsObjectsAsFaults
                                && request.fetchBatchSize == 0 && request.includesPropertyValues)
        }
        if !prefetching.isEmpty, case .objects(let objects) = output {
            // ManagedObjectContext+Prefetching.swift: one query per key path step.
            try prefetch(prefetching, for: objects)
        }
        return try output.typed(as: Result.self)
    }

    /// Gives the objects a fetch found loaded the rows the store holds now,
    /// their unsaved changes kept on top, and fills the other faults when the
    /// request wanted objects filled (``FetchRequest/shouldRefreshRefetchedObjects``).
    ///
    /// Every row is read before any object changes: a read that fails throws,
    /// and leaves every object as it was.
    private func refreshRefetched(_ objects: [ManagedObject], readSince started: UInt64, fillingFaults: Bool) throws {
        let loaded = objects.filter { !$0.isFault && !$0.isInserted }
        if !loaded.isEmpty {
            for node in try currentRows(for: loaded.map(\.objectID), readSince: started) {
                guard let object = registry[node.objectID] else { continue }
                merge(node, into: object)
                noteReadSucceeded(of: node.objectID)
            }
        }
        if fillingFaults { fireFaults(objects) }
    }

    /// The rows of `objectIDs` as the store holds them now: from the row cache
    /// only those cached since `started` (the fetch's own, when it read rows),
    /// the rest from the store — a row cached before may be one another
    /// coordinator's save left behind. For a child context, as its parent
    /// holds them. Rows that are gone are left out.
    private func currentRows(for objectIDs: [ObjectID], readSince started: UInt64) throws -> [IncrementalStoreNode] {
        guard parent == nil, let coordinator = persistentStoreCoordinator else { return try parentNodes(for: objectIDs) }
        // The age limit is the time since `started`, taken before the lookups:
        // a row cached before `started` is always older than it (read from the
        // store), one cached just after it may come out older too (read again).
        let sinceStarted = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let nodes = try coordinator.nodes(for: objectIDs, stalenessInterval: max(sinceStarted, .leastNonzeroMagnitude), in: self)
        // The cache keeps the current rows for other contexts' faults, as after any fetch.
        coordinator.didRead(nodes, for: self)
        return nodes
    }

    /// The number of objects a fetch would return.
    public func count<Result>(for request: FetchRequest<Result>) throws -> Int {
        assertOnQueue()
        var fetch = try storeFetch(for: request)
        fetch.resultType = .count
        let output = try executeFetch(fetch, includesPendingChanges: request.includesPendingChanges,
                                      returnsObjectsAsFaults: true, batchSize: 0)
        guard case .count(let count) = output else {
            throw PersistentStoreError(.ioFailure, url: nil, message: "a count of \(fetch.entity.name) came back as another kind of result")
        }
        return count
    }

    func storeFetch<Result>(for request: FetchRequest<Result>) throws -> StoreFetch {
        guard let model = persistentStoreCoordinator?.managedObjectModel else {
            throw ObjectGraphError.noStore(entity: request.entityName)
        }
        guard let entity = model.entitiesByName[request.entityName] else {
            throw ObjectGraphError.unknownEntity(request.entityName)
        }
        try request.predicate?.validate(for: entity)
        // ExpressionFetch.swift: nil unless the request computes values, groups or has a having predicate.
        let expressions = try ExpressionFetch(request: request, entity: entity)
        let names = expressions == nil ? request.propertiesToFetch?.map(\.name) : nil
        if expressions == nil {
            for sort in request.sortDescriptors {
                _ = try ToOneKeyPath(sort.keyPath, from: entity)
                if sort.relevanceQuery != nil { try PredicateSearch.validateRelevanceSort(sort, of: entity) }
            }
        }
        for key in names ?? [] {
            _ = try entity.property(forKey: key)
        }
        var fetch = StoreFetch(entity: entity, predicate: request.predicate, sortDescriptors: request.sortDescriptors,
                          fetchLimit: max(0, request.fetchLimit), fetchOffset: max(0, request.fetchOffset),
                          includesSubentities: request.includesSubentities, resultType: request.resultType,
                          propertiesToFetch: names,
                          returnsDistinctResults: request.returnsDistinctResults)
        fetch.affectedStoreIdentifiers = request.affectedStores.map { Set($0.map(\.identifier)) }
        fetch.expressions = expressions
        return fetch
    }

    /// Runs a fetch against the parent store, folding in this context's pending changes.
    func executeFetch(_ fetch: StoreFetch, includesPendingChanges: Bool,
                      returnsObjectsAsFaults: Bool, includesPropertyValues: Bool = true, batchSize: Int) throws -> FetchOutput {
        let pending = includesPendingChanges && fetch.resultType != .dictionary && hasPendingChanges(for: fetch)
        if pending {
            return try fetchMergingPendingChanges(fetch)
        }
        switch fetch.resultType {
        case .count:
            return .count(try parentCount(fetch))
        case .dictionary:
            return .dictionaries(try parentDictionaries(fetch))
        case .managedObjectID:
            return .objectIDs(try parentObjectIDs(fetch))
        case .managedObject:
            // IDs only: for batches, for a child context (its parent answers by
            // IDs), and when the caller does not want the rows.
            if batchSize > 0 || parent != nil || !includesPropertyValues {
                let ids = try parentObjectIDs(fetch)
                registry.reserveCapacity(registry.count + ids.count)
                let objects = ids.map { object(withFetched: $0) }
                if batchSize > 0 {
                    for start in stride(from: 0, to: ids.count, by: batchSize) {
                        let batch = FaultBatch(objectIDs: Array(ids[start..<min(start + batchSize, ids.count)]))
                        for id in batch.objectIDs where registry[id]?.isFault == true { faultBatches[id] = batch }
                    }
                }
                if !returnsObjectsAsFaults && batchSize == 0 && includesPropertyValues { objects.forEach { $0.fireFault() } }
                return .objects(objects)
            }
            guard returnsObjectsAsFaults else { return .objects(try materialize(try parentNodes(fetch), asFaults: false)) }
            var faults = fetch
            faults.returnsObjectsAsFaults = true
            var result = try parentResult(faults)
            if case .encodedNodes(let rows) = result {
                // The result lets go of the rows first: the array then has one
                // owner, and its rows move into the row cache rather than
                // being copied there (see `materialize(_:)`).
                result = .count(0)
                return .objects(materialize(consume rows))
            }
            switch result {
            case .nodes(let nodes): return .objects(try materialize(nodes, asFaults: true))
            case let other: throw Self.wrongAnswer(other, to: faults)
            }
        }
    }

    /// Faults for rows kept as bytes, which go to the coordinator's row cache
    /// undecoded: a fault decodes its row when it fires.
    ///
    /// The rows are consumed: read in place for their IDs (no copy of each,
    /// which cost a retain and a release of its ID's scope and of its bytes'
    /// chunk), then moved into the cache.
    private func materialize(_ rows: consuming [EncodedStoreNode]) -> [ManagedObject] {
        let objects = faults(for: rows) { $0.objectID }
        persistentStoreCoordinator?.didRead(consume rows, for: self)
        return objects
    }

    /// Objects for fetched rows: registered ones as they are, new ones as faults
    /// or filled. For faults, every row goes to the coordinator's cache (a
    /// registered object's too, as with rows kept as bytes: it is the store's
    /// current row, which another context's fault may fire from).
    private func materialize(_ nodes: consuming [IncrementalStoreNode], asFaults: Bool) throws -> [ManagedObject] {
        if asFaults {
            let objects = faults(for: nodes) { $0.objectID }
            persistentStoreCoordinator?.didRead(consume nodes, for: self)
            return objects
        }
        // Each row's values move into its object: a large fetch's rows are
        // long out of the cache by now, and copying them out would touch each
        // one twice more. The rows are taken from the back, each destroyed
        // where it is used up: the emptied array is then freed without the
        // runtime's generic destroy of every row (~85 instructions a row).
        var nodes = nodes
        let count = nodes.count
        // Not for none: the standard library then writes the count into the
        // process's one empty array, which ThreadSanitizer reports as a race
        // with every other thread reading an empty array.
        guard count > 0 else { return [] }
        prepareRegistry(forFetched: count)
        return [ManagedObject](unsafeUninitializedCapacity: count) { objects, initialized in
            // Nothing here throws: the count is set once, after the loop.
            guard let base = objects.baseAddress else { return }
            var index = count
            while var node = nodes.popLast() {
                index -= 1
                let object = registry.object(for: node.objectID) { newFault(for: $0) }
                // A registered object keeps what it holds; a fault (new or not) takes the row.
                if object.isFault { fill(object, from: &node) }
                (base + index).initialize(to: object)
            }
            initialized = count
        }
    }

    /// An object for each row, the registered one or a new fault, written
    /// straight into the result's storage with one registry probe each.
    ///
    /// Each ID is copied once, and that copy moves into the new fault:
    /// borrowed across the fault's initializer, it was retained and released
    /// around it as well.
    private func faults<Row>(for rows: borrowing [Row], objectID: (borrowing Row) -> ObjectID) -> [ManagedObject] {
        guard !rows.isEmpty else { return [] }   // as in materialize(_:asFaults:): the empty array is shared
        prepareRegistry(forFetched: rows.count)
        return rows.withUnsafeBufferPointer { rows in
            [ManagedObject](unsafeUninitializedCapacity: rows.count) { objects, initialized in
                // Nothing here throws: the count is set once, after the loop.
                guard let base = objects.baseAddress else { return }
                for index in rows.indices {
                    (base + index).initialize(to: registry.object(for: objectID(rows[index])) { newFault(for: $0) })
                }
                initialized = rows.count
            }
        }
    }

    /// Room in the registry for `count` fetched objects. Every object made
    /// for a fetch is alive until the caller drops the result: no sweep can
    /// free anything meanwhile, so none runs while they are registered.
    private func prepareRegistry(forFetched count: Int) {
        sweepRegistry()
        registry.reserveCapacity(registry.count + count)
        sweepThreshold = max(sweepThreshold, 2 * (registry.count + count))
    }

    // MARK: - Pending changes

    private func hasPendingChanges(for fetch: StoreFetch) -> Bool {
        if unsavedInserts.isEmpty && unsavedUpdates.isEmpty && unsavedDeletes.isEmpty { return false }
        let entities = Set(fetch.entities.map(ObjectIdentifier.init))
        func touches(_ changed: ChangedObjects) -> Bool {
            changed.objects.contains { entities.contains(ObjectIdentifier($0.entity)) }
        }
        return touches(unsavedInserts) || touches(unsavedUpdates) || touches(unsavedDeletes)
    }

    /// The store's matches without this context's deletes and stale updates,
    /// plus its matching inserts and updates, then sorted, offset and limited.
    private func fetchMergingPendingChanges(_ fetch: StoreFetch) throws -> FetchOutput {
        if fetch.resultType == .count { return .count(try countMergingPendingChanges(fetch)) }
        if fetch.fetchLimit > 0 { return try limitedFetchMergingPendingChanges(fetch) }
        var storeFetch = fetch
        storeFetch.resultType = .managedObjectID
        storeFetch.fetchLimit = 0
        storeFetch.fetchOffset = 0
        storeFetch.sortDescriptors = []
        var seen = Set<ObjectID>()
        var objects: [ManagedObject] = []
        for id in try parentObjectIDs(storeFetch) where !(registry[id].map { unsavedDeletes.contains($0) || unsavedUpdates.contains($0) } ?? false) {
            if seen.insert(id).inserted { objects.append(object(with: id)) }
        }
        objects += try pendingMatches(of: fetch).filter { !seen.contains($0.objectID) }
        if !fetch.sortDescriptors.isEmpty {
            objects = try FetchSort.sort(objects, by: fetch.sortDescriptors, from: fetch.entity)
        }
        return Self.output(objects, of: fetch)
    }

    /// A limited fetch with pending changes: the store's first (best, when
    /// sorted) `limit + offset` rows among the objects without changes here
    /// (one query, rows cached for the sort), merged with the inserted and
    /// updated objects that match now, sorted, then cut — rather than every
    /// matching ID, each fired to be sorted. Unsorted, the store's rows come
    /// first and the pending objects after them, as in an unlimited fetch.
    private func limitedFetchMergingPendingChanges(_ fetch: StoreFetch) throws -> FetchOutput {
        // The changed objects' stored rows may be among the store's best; asking
        // for that many more rows and dropping them here costs SQLite's top-N
        // sort a little, where excluding them in SQL costs a test per row.
        let changed = changedStoredIDs(of: fetch)
        var storeFetch = fetch
        storeFetch.resultType = .managedObject
        storeFetch.fetchLimit = fetch.fetchLimit + fetch.fetchOffset + changed.count
        storeFetch.fetchOffset = 0
        var objects: [ManagedObject]
        if parent == nil {
            objects = try materialize(try parentNodes(storeFetch), asFaults: true)
        } else {
            objects = try parentObjectIDs(storeFetch).map { object(withFetched: $0) }
        }
        // The store's rows come sorted: past the changed ones, its first `wanted`
        // are all it can contribute, and so are the pending objects' best `wanted`.
        let wanted = fetch.fetchLimit + fetch.fetchOffset
        objects.removeAll { changed.contains($0.objectID) }
        if fetch.sortDescriptors.isEmpty {
            return Self.output(objects.prefix(wanted) + (try pendingMatches(of: fetch)), of: fetch)
        }
        let pending = try FetchSort.first(wanted, of: pendingMatches(of: fetch), by: fetch.sortDescriptors, from: fetch.entity)
        objects = try FetchSort.sort(objects.prefix(wanted) + pending, by: fetch.sortDescriptors, from: fetch.entity)
        return Self.output(objects, of: fetch)
    }

    /// What a fetch with pending changes counts, without an object for each
    /// stored row: the store's count, less the changed (updated or deleted)
    /// objects whose stored rows it counted — one more store count, limited to
    /// their IDs — plus the inserted and updated objects that match now.
    private func countMergingPendingChanges(_ fetch: StoreFetch) throws -> Int {
        var whole = fetch
        whole.fetchLimit = 0
        whole.fetchOffset = 0
        whole.sortDescriptors = []
        var total = try parentCount(whole)
        let changed = changedStoredIDs(of: fetch)
        if !changed.isEmpty {
            var stored = whole
            let ids = FetchPredicate.objectIDs(in: Array(changed))
            stored.predicate = whole.predicate.map { FetchPredicate.and([ids, $0]) } ?? ids
            total -= try parentCount(stored)
        }
        total += try pendingMatches(of: fetch).count
        total = max(0, total - fetch.fetchOffset)
        return fetch.fetchLimit > 0 ? min(total, fetch.fetchLimit) : total
    }

    /// The stored objects of the fetch's entities with unsaved updates or deletions here.
    private func changedStoredIDs(of fetch: StoreFetch) -> Set<ObjectID> {
        let entities = Set(fetch.entities.map(ObjectIdentifier.init))
        return Set((unsavedUpdates.objects + unsavedDeletes.objects).map(\.objectID))
            .filter { !$0.isTemporaryID && entities.contains(ObjectIdentifier($0.entity)) }
    }

    /// The inserted and updated objects of the fetch's entities that match its
    /// predicate as they are now, each once, deleted ones left out.
    private func pendingMatches(of fetch: StoreFetch) throws -> [ManagedObject] {
        let entities = Set(fetch.entities.map(ObjectIdentifier.init))
        var seen = Set<ObjectID>()
        return try (unsavedInserts.objects + unsavedUpdates.objects).filter { candidate in
            guard entities.contains(ObjectIdentifier(candidate.entity)), !unsavedDeletes.contains(candidate),
                  try fetch.predicate?.evaluate(with: candidate) ?? true else { return false }
            return seen.insert(candidate.objectID).inserted
        }
    }

    /// Objects sorted as the fetch asks, offset and limited, as the fetch's result type.
    private static func output(_ objects: [ManagedObject], of fetch: StoreFetch) -> FetchOutput {
        var objects = objects
        if fetch.fetchOffset > 0 { objects = Array(objects.dropFirst(fetch.fetchOffset)) }
        if fetch.fetchLimit > 0 { objects = Array(objects.prefix(fetch.fetchLimit)) }
        return fetch.resultType == .managedObjectID ? .objectIDs(objects.map(\.objectID)) : .objects(objects)
    }

    // MARK: - Parent store

    private func parentResult(_ fetch: StoreFetch) throws -> StoreResult {
        if let parent {
            return try parent.performAndWait {
                switch try parent.executeFetch(fetch, includesPendingChanges: true, returnsObjectsAsFaults: true, batchSize: 0) {
                case .objects(let objects): return .objectIDs(objects.map(\.objectID))
                case .objectIDs(let ids): return .objectIDs(ids)
                case .count(let count): return .count(count)
                case .dictionaries(let rows): return .dictionaries(rows)
                }
            }
        }
        guard let coordinator = persistentStoreCoordinator else { throw ObjectGraphError.noStore(entity: fetch.entity.name) }
        return try coordinator.execute(fetch, in: self)
    }

    private func parentObjectIDs(_ fetch: StoreFetch) throws -> [ObjectID] {
        var fetch = fetch
        fetch.resultType = .managedObjectID
        switch try parentResult(fetch) {
        case .objectIDs(let ids): return ids
        case .nodes(let nodes): return nodes.map(\.objectID)
        case let other: throw Self.wrongAnswer(other, to: fetch)
        }
    }

    private func parentNodes(_ fetch: StoreFetch) throws -> [IncrementalStoreNode] {
        switch try parentResult(fetch) {
        case .nodes(let nodes): return nodes
        case let other: throw Self.wrongAnswer(other, to: fetch)
        }
    }

    private func parentCount(_ fetch: StoreFetch) throws -> Int {
        switch try parentResult(fetch) {
        case .count(let count): return count
        case .objectIDs(let ids): return ids.count
        case .nodes(let nodes): return nodes.count
        case let other: throw Self.wrongAnswer(other, to: fetch)
        }
    }

    private func parentDictionaries(_ fetch: StoreFetch) throws -> [[String: PropertyValue]] {
        switch try parentResult(fetch) {
        case .dictionaries(let rows): return rows
        case let other: throw Self.wrongAnswer(other, to: fetch)
        }
    }

    /// A store (a custom one, most likely) that answers a fetch with a result
    /// of another kind has failed: reading that as no rows would make an error data.
    private static func wrongAnswer(_ result: StoreResult, to fetch: StoreFetch) -> PersistentStoreError {
        PersistentStoreError(.ioFailure, url: nil, message: """
            the store answered a \(fetch.resultType) fetch of \(fetch.entity.name) with \(result.kindDescription)
            """)
    }
}

/// What a fetch produced, before it is cast to the request's result type.
enum FetchOutput {
    case objects([ManagedObject])
    case objectIDs([ObjectID])
    case dictionaries([[String: PropertyValue]])
    case count(Int)

    /// Throws unless `Result` can hold what the fetch returns, before anything is
    /// read: an empty result must not hide a request of the wrong type.
    static func checkResultType<Result>(_ type: Result.Type, for fetch: StoreFetch) throws {
        let fits: Bool
        let expected: String
        switch fetch.resultType {
        case .managedObject:
            let classes = fetch.entities.filter { !$0.isAbstract }.map(\.managedObjectClass)
            guard let misfit = classes.first(where: { !($0 is Result.Type) }) else { return }
            throw ObjectGraphError.wrongResultType(expected: "objects of class \(misfit)", requested: "\(Result.self)")
        case .managedObjectID: (fits, expected) = (ObjectID.self is Result.Type, "ObjectID")
        case .dictionary: (fits, expected) = ([String: Any].self is Result.Type, "[String: Any]")
        case .count: (fits, expected) = (Int.self is Result.Type, "Int")
        }
        if !fits { throw ObjectGraphError.wrongResultType(expected: expected, requested: "\(Result.self)") }
    }

    func typed<Result>(as type: Result.Type) throws -> [Result] {
        switch self {
        case .objects(let objects):
            // A dynamic cast costs hundreds of instructions, and a fetch's objects
            // are of one class or a few: for a class result type, cast the first
            // object of each class and reinterpret the rest, which are then
            // instances of a class known to be a `Result`.
            let resultIsClass = Result.self is AnyClass
            if resultIsClass, let first = objects.first, first is Result {
                // Objects all of the first's class (a fetch of one entity): the
                // array itself is reinterpreted, as the standard library does when
                // it downcasts an array of class references it has checked, and
                // no second array is built.
                let firstClass = ObjectIdentifier(Swift.type(of: first))
                if objects.allSatisfy({ ObjectIdentifier(Swift.type(of: $0)) == firstClass }) {
                    return unsafeBitCast(objects, to: [Result].self)
                }
            }
            var results: [Result] = []
            results.reserveCapacity(objects.count)
            var castableClass: ObjectIdentifier?
            for object in objects {
                let objectClass = ObjectIdentifier(Swift.type(of: object))
                if resultIsClass && objectClass == castableClass {
                    results.append(unsafeBitCast(object, to: Result.self))
                    continue
                }
                guard let typed = object as? Result else {
                    throw ObjectGraphError.wrongResultType(expected: "objects of class \(Swift.type(of: object))", requested: "\(Result.self)")
                }
                castableClass = objectClass
                results.append(typed)
            }
            return results
        case .objectIDs(let ids):
            guard let typed = ids as? [Result] else {
                throw ObjectGraphError.wrongResultType(expected: "ObjectID", requested: "\(Result.self)")
            }
            return typed
        case .dictionaries(let rows):
            let dictionaries: [[String: Any]] = rows.map { row in
                row.mapValues { value -> Any in value.anyValue(for: .double) ?? NSNull() }
            }
            guard let typed = dictionaries as? [Result] else {
                throw ObjectGraphError.wrongResultType(expected: "[String: Any]", requested: "\(Result.self)")
            }
            return typed
        case .count(let count):
            guard let typed = [count] as? [Result] else {
                throw ObjectGraphError.wrongResultType(expected: "Int", requested: "\(Result.self)")
            }
            return typed
        }
    }
}
