import Foundation

// MARK: - Batch requests

extension ManagedObjectContext {
    /// Runs a batch update in the store, in one transaction, without managed
    /// objects (Core Data: `execute(_:)` with an `NSBatchUpdateRequest`).
    ///
    /// What a batch keeps that a save keeps: every changed row's version
    /// (`Z_OPT`) goes up by one, so a context that holds an older version of a
    /// row meets it as a merge conflict when it saves, as in Core Data;
    /// uniqueness constraints hold — a change that would give two rows the
    /// same key throws ``ObjectGraphError/Code-swift.struct/uniquenessConflict`` and changes
    /// nothing; a store that tracks persistent history records one transaction
    /// (author: ``transactionAuthor``) and one change per row.
    ///
    /// What it skips, as Core Data does: validation rules, `willSave`, the
    /// objects this context holds. They keep their values until merged; pass
    /// an ``BatchResultType/objectIDs`` result to
    /// ``mergeChanges(fromRemoteContextSave:into:)``. The coordinator's cached
    /// rows of the changed objects are dropped at once, so a merge or a fault
    /// reads the new rows (Core Data's `refresh` can return the old value here).
    ///
    /// The context posts ``didSaveNotification`` with the changed IDs after the
    /// batch, which Core Data does not: a batch writes rows like a save, and the
    /// one notification every listener already merges (a ``StackManager`` folding
    /// an importer's saves into its main context, contexts with
    /// ``automaticallyMergesChangesFromParent``) then takes batches too.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownEntity``, ``ObjectGraphError/Code-swift.struct/unknownKey``,
    ///   ``ObjectGraphError/Code-swift.struct/wrongValueType`` (a constant or a computed
    ///   value the attribute cannot hold), ``FetchExpressionError`` (arithmetic on something not a
    ///   number), a ``ObjectGraphError``, ``ObjectGraphError/Code-swift.struct/uniquenessConflict``, or
    ///   ``PersistentStoreError`` (a read-only store). Nothing is changed when it throws.
    @discardableResult
    public func execute(_ request: BatchUpdateRequest) throws -> BatchResult {
        assertOnQueue()
        let entity = try batchEntity(named: request.entityName)
        guard !request.propertiesToUpdate.isEmpty else { throw ObjectGraphError.nothingToUpdate(entity: entity.name) }
        let fetch = try batchFetch(entity: entity, predicate: request.predicate, includesSubentities: request.includesSubentities)
        var values: [(attribute: AttributeDescription, value: FetchExpression)] = []
        for key in request.propertiesToUpdate.keys.sorted() {
            guard let new = request.propertiesToUpdate[key] else { continue }
            guard let attribute = try entity.property(forKey: key) as? AttributeDescription else {
                throw ObjectGraphError.notAnAttribute(key: key, entity: entity.name)
            }
            values.append((attribute, try Self.resolve(new, for: attribute, in: entity)))
        }
        let changes = try executeBatch(.update(StoreBatchUpdate(fetch: fetch, values: values)), on: try batchStore(for: entity))
        return Self.result(changes, as: request.resultType, count: changes.updatedObjectIDs.count)
    }

    /// Runs a batch delete in the store, in one transaction, without managed
    /// objects (Core Data: `execute(_:)` with an `NSBatchDeleteRequest`).
    ///
    /// Delete rules are applied in the store (see ``BatchDeletePlan``):
    /// cascade and nullify as a context applies them, and deny refuses the
    /// request naming the object and the relationship. Core Data documents
    /// none of this for its batch delete; applying the rules is the choice
    /// here because a batch delete that left dangling to-ones behind would
    /// make the next fault of a related object fail, and a silent cascade
    /// gap would leave orphans no fetch could tell from live rows.
    ///
    /// Versions, cached rows, history, the did-save notification and merging
    /// are as for ``execute(_:)-(BatchUpdateRequest)``. Object IDs of several
    /// stores are refused (``ObjectGraphError/Code-swift.struct/severalStores``):
    /// one transaction cannot span them.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownEntity``, a ``ObjectGraphError``,
    ///   or ``PersistentStoreError`` (a read-only store). Nothing is changed when it throws.
    @discardableResult
    public func execute(_ request: BatchDeleteRequest) throws -> BatchResult {
        assertOnQueue()
        var changes = BatchChanges()
        switch request.selection {
        case .matching(let name, let predicate, let includesSubentities):
            let entity = try batchEntity(named: name)
            let fetch = try batchFetch(entity: entity, predicate: predicate, includesSubentities: includesSubentities)
            changes = try executeBatch(.delete(.matching(fetch)), on: try batchStore(for: entity))
        case .objectIDs(let ids):
            guard let coordinator = persistentStoreCoordinator else { throw ObjectGraphError.noStore(entity: ids.first?.entity.name ?? "") }
            var byStore: [ObjectIdentifier: (store: any PersistentStore, ids: [ObjectID])] = [:]
            for id in ids where !id.isTemporaryID {
                let store = try coordinator.store(for: id)
                byStore[ObjectIdentifier(store), default: (store, [])].ids.append(id)
            }
            guard byStore.count <= 1 else {
                throw ObjectGraphError.severalStores(entity: ids.first?.entity.name ?? "", stores: byStore.count)
            }
            if let (store, ids) = byStore.values.first {
                changes = try executeBatch(.delete(.objectIDs(ids)), on: try batchStore(store, entity: ids[0].entity))
            }
        }
        return Self.result(changes, as: request.resultType, count: changes.deletedObjectIDs.count)
    }

    /// Inserts rows in the store, in one transaction, without managed objects
    /// (Core Data: `execute(_:)` with an `NSBatchInsertRequest`).
    ///
    /// Each row is a row of the request's entity exactly (never a subentity),
    /// at version (`Z_OPT`) 1, its primary key taken from one block allocated
    /// for the whole request. Attributes a row leaves out get the model's
    /// default; a non-optional attribute left without a value refuses the
    /// request, naming the row and the key. No other validation runs, as in Core Data.
    ///
    /// Uniqueness constraints hold, and what a row does whose key is already
    /// held — by a stored row or an earlier row of the request — follows this
    /// context's ``mergePolicy``, as Core Data's batch insert follows the
    /// executing context's (there is no policy on the request itself):
    /// - ``MergePolicy/error`` (the default): the request fails with
    ///   ``ObjectGraphError/Code-swift.struct/duplicateKey``
    ///   and nothing is written.
    /// - ``MergePolicy/mergeByPropertyObjectTrump`` and ``MergePolicy/overwrite``:
    ///   an upsert. The values the row gives replace the holder's; the
    ///   attributes it leaves out keep theirs (Core Data is reported to reset
    ///   them to their defaults, which would make an upsert of a few columns
    ///   wipe the rest). A stored row updated this way gets its version bumped
    ///   and is reported, and merged, as updated; an earlier row of the same
    ///   request simply takes the later values and stays an insert.
    /// - ``MergePolicy/mergeByPropertyStoreTrump`` and ``MergePolicy/rollback``:
    ///   the holder is kept as it is and the row dropped; it is not reported.
    ///
    /// A holder of another entity of the hierarchy (a `Truck` holding the plate
    /// a `Car` row brings) is never overwritten, as its row has other columns:
    /// under an object-trump policy the request fails with
    /// ``ObjectGraphError/Code-swift.struct/duplicateKey``.
    ///
    /// History, the coordinator's cached rows, the did-save notification (now
    /// with the inserted IDs, so a ``StackManager``'s main context and its
    /// fetched results controllers see the rows appear) and merging are as for
    /// ``execute(_:)-(BatchUpdateRequest)``; a store that tracks history records
    /// one insert change per inserted row and one update change per upserted
    /// row, naming the columns the upsert wrote.
    ///
    /// - Complexity: O(*n*) for *n* rows, each read, converted and written once;
    ///   the SQLite store keeps one row in memory at a time (plus the IDs it reports).
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownEntity``, ``ObjectGraphError/Code-swift.struct/abstractEntity``,
    ///   ``ObjectGraphError/Code-swift.struct/unknownKey``, ``ObjectGraphError/Code-swift.struct/notAnAttribute``
    ///   (a relationship), ``ObjectGraphError/Code-swift.struct/wrongValueType`` and
    ///   ``ObjectGraphError/Code-swift.struct/valueOutOfRange`` (a value),
    ///   ``ObjectGraphError/Code-swift.struct/missingValue``,
    ///   ``ObjectGraphError/Code-swift.struct/duplicateKey``, or
    ///   ``PersistentStoreError`` (a read-only store). Nothing is changed when it throws.
    @discardableResult
    public func execute(_ request: BatchInsertRequest) throws -> BatchResult {
        assertOnQueue()
        let entity = try batchEntity(named: request.entityName)
        guard !entity.isAbstract else { throw ObjectGraphError.abstractEntity(entity.name) }
        let onConflict: StoreBatchInsert.OnConflict = switch mergePolicy {
        case .error: .fail
        case .mergeByPropertyObjectTrump, .overwrite: .overwrite
        case .mergeByPropertyStoreTrump, .rollback: .keep
        }
        let insert = StoreBatchInsert(entity: entity, rows: request.rows, onConflict: onConflict)
        let changes = try executeBatch(.insert(insert), on: try batchStore(for: entity))
        return Self.result(changes, as: request.resultType, count: changes.inserted.count + changes.updatedObjectIDs.count)
    }

    /// Merges changes made elsewhere — a batch request, another process — into
    /// contexts (Core Data: `NSManagedObjectContext.mergeChanges(fromRemoteContextSave:into:)`).
    ///
    /// Each context merges on its own queue, and this returns when all have:
    /// registered objects that changed are refreshed, deleted ones removed,
    /// as ``mergeChanges(fromContextDidSave:)`` does. Typed rather than Core
    /// Data's dictionary of ID arrays: a ``BatchResult/objectIDs(_:)`` result
    /// carries exactly this value.
    public static func mergeChanges(fromRemoteContextSave changes: ContextDidSave, into contexts: [ManagedObjectContext]) {
        for context in contexts {
            context.performAndWait { _ = context.mergeChanges(fromContextDidSave: changes) }
        }
    }

    // MARK: - Resolving a request

    private func batchEntity(named name: String) throws -> EntityDescription {
        guard let model = persistentStoreCoordinator?.managedObjectModel else { throw ObjectGraphError.noStore(entity: name) }
        guard let entity = model.entitiesByName[name] else { throw ObjectGraphError.unknownEntity(name) }
        return entity
    }

    private func batchFetch(entity: EntityDescription, predicate: FetchPredicate?, includesSubentities: Bool) throws -> StoreFetch {
        do {
            try predicate?.validate(for: entity)
        } catch {
            throw ObjectGraphError.predicateDoesNotCompile(predicate: predicate?.description ?? "", entity: entity.name,
                                                           reason: "\(error)")
        }
        return StoreFetch(entity: entity, predicate: predicate, sortDescriptors: [], fetchLimit: 0, fetchOffset: 0,
                          includesSubentities: includesSubentities, resultType: .managedObject,
                          propertiesToFetch: nil, returnsDistinctResults: false)
    }

    /// The one store holding the entity; several are refused (Core Data would
    /// run the request on each, but not in one transaction).
    private func batchStore(for entity: EntityDescription) throws -> any BatchRequestStore {
        guard let coordinator = persistentStoreCoordinator else { throw ObjectGraphError.noStore(entity: entity.name) }
        let holding = coordinator.persistentStores.filter { store in
            coordinator.managedObjectModel.entities(forConfigurationName: store.configurationName)
                .contains { $0 === entity.rootEntity || $0 === entity }
        }
        guard holding.count <= 1 else { throw ObjectGraphError.severalStores(entity: entity.name, stores: holding.count) }
        return try batchStore(try coordinator.store(for: entity), entity: entity)
    }

    private func batchStore(_ store: any PersistentStore, entity: EntityDescription) throws -> any BatchRequestStore {
        if store.isReadOnly { throw PersistentStoreError.readOnly(url: store.url) }
        guard let batching = store as? any BatchRequestStore else {
            throw ObjectGraphError.unsupportedStore(type: store.type.rawValue, entity: entity.name)
        }
        return batching
    }

    /// A new value checked against its attribute: a constant converted as
    /// key-value coding converts it; an expression kept to the row's own
    /// attributes, type-checked as a fetch's, and of a type the attribute holds.
    private static func resolve(_ value: FetchExpression, for attribute: AttributeDescription,
                                in entity: EntityDescription) throws -> FetchExpression {
        if case .constant(let constant) = value.node {
            let converted = try PropertyValue(constant.anyValue(for: attribute.type) ?? NSNull(), for: attribute.type,
                                              key: attribute.name, entity: entity.name)
            return .constant(converted)
        }
        guard try readsTheRowOnly(value.node, in: entity) else {
            throw ObjectGraphError.notComputedFromTheRow(key: attribute.name, entity: entity.name, expression: "\(value)")
        }
        let type = try value.check(for: entity, at: "propertiesToUpdate['\(attribute.name)']")
        guard let type, attribute.type.holds(computed: type) else {
            throw ObjectGraphError.wrongValueType(key: attribute.name, entity: entity.name, expected: attribute.type.valueDescription,
                                                  actual: "\(value) (\(type?.rawValue ?? "an object"))")
        }
        return value
    }

    /// Whether every key path of `node` is an attribute of the row itself and
    /// there is no aggregate: an `UPDATE` sets each row on its own, so it can
    /// neither join another table nor reduce several rows.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey``, as for any unknown key.
    private static func readsTheRowOnly(_ node: FetchExpression.Node, in entity: EntityDescription) throws -> Bool {
        switch node {
        case .constant:
            true
        case .keyPath(let keys):
            try keys.count == 1 && entity.property(forKey: keys[0]) is AttributeDescription
        case .arithmetic(_, let lhs, let rhs):
            try readsTheRowOnly(lhs, in: entity) && readsTheRowOnly(rhs, in: entity)
        case .aggregate:
            false
        }
    }

    // MARK: - Running it

    /// Runs a resolved request, tells the coordinator what changed (it drops
    /// those cached rows), and tells listeners as a save would.
    private func executeBatch(_ request: StoreBatchRequest, on store: any BatchRequestStore) throws -> BatchChanges {
        let changes = try store.execute(request, in: self)
        persistentStoreCoordinator?.objectsDidChange(updated: changes.updatedObjectIDs, deleted: changes.deletedObjectIDs)
        if !changes.isEmpty {
            post(.didSave(changes.asSave))
        }
        return changes
    }

    private static func result(_ changes: BatchChanges, as type: BatchResultType, count: Int) -> BatchResult {
        switch type {
        case .statusOnly: .statusOnly
        case .count: .count(count)
        case .objectIDs: .objectIDs(changes.asSave)
        }
    }
}

extension AttributeType {
    /// Whether an attribute of this type holds a computed value of type
    /// `computed`: the same type, or any integer or floating-point number for
    /// a number (truncated into an integer). Anything else would need a
    /// conversion SQL does not make the way key-value coding does.
    func holds(computed: AttributeType) -> Bool {
        let numbers: Set<AttributeType> = [.integer16, .integer32, .integer64, .double, .float]
        return computed == self || numbers.contains(self) && numbers.contains(computed)
    }
}
