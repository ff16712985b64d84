import DataStack
import Foundation

// The pull half of a cycle: the hub's changes after the last applied sequence,
// a chunk at a time, folded into each object's merge state; what the fold
// says the store must change is saved through one context of the stack's
// writer coordinator, so the stack merges it into the main context like any
// importer's save.
extension SyncEngine {
    func pullAndApply() throws(SyncError) {
        let ledger = self.ledger.value
        var reseeded = false
        while true {
            let pulled = try ledger.read("reading the pull bookmark") { try ledger.integer("pulled") } ?? 0
            notePulled(through: pulled)
            // Pull and fold a chunk (SyncEngine+Chunk.swift).
            var fold = ChunkFold()
            let chunk: [SequencedChange]
            do {
                chunk = try pullAndFold(after: pulled, into: &fold)
            } catch let error where error.code == .snapshotRequired && !reseeded {
                // The changes needed next were purged: start again from the hub's snapshot
                // (SyncEngine+Snapshot.swift), once a cycle, and pull on after it.
                try reseed()
                reseeded = true
                continue
            }
            guard let last = chunk.last else { return }
            let effects = fold.effects(merger)
            let rows = try apply(effects, knownRows: fold.states.mapValues { ($0.entity, $0.primaryKey) }, aliases: fold.aliases,
                                 mergedRows: fold.mergedRows)
            try ledger.write("recording a pull") {
                for (id, survivor) in fold.aliases { try ledger.setAlias(id, survivor: survivor) }
                for (key, holder) in fold.keyHolders { try ledger.setKeyHolder(holder, for: key) }
                // Rows given up first: the row of a merged-away object may now be its survivor's.
                let ordered = fold.states.sorted { ($0.value.primaryKey == nil ? 0 : 1) < ($1.value.primaryKey == nil ? 0 : 1) }
                for (id, known) in ordered {
                    let row = rows[id] ?? known.primaryKey.map { Optional($0) } ?? nil
                    try ledger.setObject(id, entity: known.entity, primaryKey: row, state: known.state)
                }
                try ledger.setInteger(last.sequence, for: "pulled")
                try saveClock()
            }
            notePulled(through: last.sequence)
            try hubCall { try options.hub.acknowledge(replica: replica, through: last.sequence) }
            for conflict in fold.keyConflicts { emit(.uniqueKeyConflict(conflict)) }
            emit(.pulled(count: chunk.count, objectsChanged: effects.count, through: last.sequence))
        }
    }

    /// The ID of the row `primaryKey` of `entity` in `store`. An entity the
    /// model lacks means the ledger and the model disagree: an error, never
    /// "no row" (which would make the object again).
    static func rowID(entity: String, primaryKey: Int64, in store: any PersistentStore,
                      model: ManagedObjectModel) throws(SyncError) -> ObjectID {
        guard let description = model.entitiesByName[entity] else {
            throw SyncError(.localFailure, message: "the sync ledger names a row of \(entity), which the model lacks")
        }
        return store.newObjectID(for: description, primaryKey: primaryKey)
    }

    /// Saves what the effects say through a context on the writer coordinator;
    /// returns the rows of objects that were made or deleted here (nil: deleted).
    func apply(_ effects: [SyncEffect], knownRows: [UUID: (entity: String, primaryKey: Int64?)],
               aliases: [UUID: UUID], mergedRows: [(entity: String, primaryKey: Int64, into: UUID)]) throws(SyncError) -> [UUID: Int64?] {
        guard !effects.isEmpty || !mergedRows.isEmpty else { return [:] }
        let coordinator = stack.writerCoordinator
        let model = coordinator.managedObjectModel
        guard let store = coordinator.persistentStores.first else {
            throw SyncError(.localFailure, message: "the stack's writer coordinator has no store to apply changes to")
        }
        let context = stack.importerContext()
        context.name = "sync"
        context.transactionAuthor = options.transactionAuthor
        // A local save between this context's reads and its save is not overwritten: the save
        // throws, and the next cycle reads that save's history first, then folds again.
        context.mergePolicy = .error
        do {
            return try context.performAndWait {
                var objects: [UUID: ManagedObject] = [:]
                var rows: [UUID: Int64?] = [:]
                var deleted = Set<UUID>()
                /// The object of a global ID in this context: made by this chunk, or saved here before, and not deleted by it.
                func object(_ named: UUID) throws -> ManagedObject? {
                    // A state may still name an object merged into another (a unique-key twin).
                    var id = try ledger.value.survivor(of: named)
                    while let next = aliases[id], next != id { id = next }
                    if deleted.contains(id) { return nil }
                    if let made = objects[id] { return made }
                    let known = try knownRows[id] ?? ledger.value.object(id).map { ($0.entity, $0.primaryKey) }
                    guard let known, let primaryKey = known.primaryKey else { return nil }
                    let objectID = try Self.rowID(entity: known.entity, primaryKey: primaryKey, in: store, model: model)
                    do {
                        let found = try context.existingObject(with: objectID)
                        objects[id] = found
                        return found
                    } catch let error as ObjectGraphError where error.code == .objectNotFound {
                        return nil   // recorded before a save that never happened (a crash): made again below
                    }
                }
                try removeMergedRows(mergedRows, in: context, store: store, survivor: object)
                // Deletes first, so nothing else of the chunk refers to what they delete;
                // then the new objects, so that relationships within the chunk find each other.
                for effect in effects where effect.kind == .delete {
                    if let target = try object(effect.objectID) { context.delete(target) }
                    deleted.insert(effect.objectID)
                    rows[effect.objectID] = .some(nil)
                }
                for effect in effects where effect.kind == .insert || effect.kind == .revive {
                    guard try object(effect.objectID) == nil else { continue }
                    guard let entity = model.entitiesByName[effect.entity] else {
                        throw SyncError(.notInModel, message: "a pulled change inserts a \(effect.entity), which the model lacks")
                    }
                    objects[effect.objectID] = ManagedObject.make(entity: entity, in: context)
                }
                for effect in try keyReleasingFirst(effects.filter { $0.kind != .delete }, object: object) {
                    guard let target = try object(effect.objectID) else { continue }
                    let entity = target.entity
                    for (name, value) in effect.values.sorted(by: { $0.key < $1.key }) {
                        guard let property = entity.propertiesByName[name] else {
                            throw SyncError(.notInModel, message: "a pulled change sets \(entity.name).\(name), which the model lacks")
                        }
                        if property is RelationshipDescription {
                            if case .object(let id) = value {
                                // A destination deleted here (or never known) leaves the relationship empty, as a delete would.
                                try target.setValue(try object(id), forKey: name)
                            } else {
                                try target.setValue(nil, forKey: name)
                            }
                        } else if let attribute = property as? AttributeDescription {
                            try target.setValue(try value.swiftValue(for: attribute, entity: entity.name), forKey: name)
                        }
                    }
                    for name in Set(effect.added.keys).union(effect.removed.keys).sorted() {
                        guard let relationship = entity.relationshipsByName[name], relationship.isToMany else {
                            throw SyncError(.notInModel, message: "a pulled change changes the members of \(entity.name).\(name), which is no to-many of the model")
                        }
                        var members = try target.objectIDs(forRelationshipNamed: name).map { try context.existingObject(with: $0) }
                        let removed = try Set((effect.removed[name] ?? []).compactMap { try object($0)?.objectID })
                        members.removeAll { removed.contains($0.objectID) }
                        for id in (effect.added[name] ?? []).sorted(by: { $0.uuidString < $1.uuidString }) {
                            if let member = try object(id), !members.contains(where: { $0 === member }) { members.append(member) }
                        }
                        try target.setValue(relationship.isOrdered ? members as Any : Set(members) as Any, forKey: name)
                    }
                }
                let inserted = objects.filter { $0.value.objectID.isTemporaryID }
                try context.obtainPermanentIDs(for: Array(inserted.values))
                // The rows are recorded before the save: a crash after it finds them, and updates them.
                try ledger.value.write("recording rows of pulled objects") {
                    for (id, made) in inserted {
                        try ledger.value.setObject(id, entity: made.entity.name, primaryKey: made.objectID.primaryKey,
                                                   state: ledger.value.object(id)?.state)
                        rows[id] = made.objectID.primaryKey
                    }
                }
                try context.save()
                return rows
            }
        } catch let error as SyncError {
            throw error
        } catch let error as ObjectGraphError where error.code == .mergeConflict || error.code == .uniquenessConflict {
            throw SyncError(.concurrentSave, message: "a local save changed what pulled changes change; applying again: \(error)")
        } catch {
            throw SyncError(.localFailure, message: "pulled changes could not be saved to the replica's store: \(error)")
        }
    }
}

extension ManagedObject {
    /// An object of `entity` inserted into `context`, of the entity's class.
    static func make(entity: EntityDescription, in context: ManagedObjectContext) -> ManagedObject {
        entity.managedObjectClass.init(entity: entity, insertInto: context)
    }
}
