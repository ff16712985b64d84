import DataStack
import Foundation

// Uniqueness across replicas: two replicas that insert the same unique key
// offline converge to one object. The survivor is the object holding the key
// when the other's insert is folded in the hub's order (the key index: taken
// by an insert, freed by a delete); the other becomes an alias of it — its
// changes, and every reference to it, are the survivor's from then on, and
// its values merge into the survivor's field by field under the same
// policies as any two concurrent changes. Every replica folds the same log in
// the same order, so every replica picks the same survivor — including the
// replica that made the alias, whose own insert is decided when the hub sends
// it back, not when another's insert of the key arrives (ChunkFold's
// awaited twins).
extension SyncEngine {
    /// Folds one pulled change into the chunk, merging an insert whose
    /// unique key is held into the key's holder.
    func fold(_ sequenced: SequencedChange, into fold: inout ChunkFold, lookup: UniqueKeyLookup) throws {
        var change = try resolvingAliases(sequenced.change, fold.aliases)
        let inserted = change.objectID
        let keys = uniqueKeys(entity: change.entity, values: change.values)
        // The hub's order has the object for the first time: a change pulled again, or an
        // insert of an object deleted since, takes no key.
        if change.kind == .insert, !keys.isEmpty,
           try state(inserted, &fold, entity: change.entity).state?.confirmed.status ?? .unknown == .unknown {
            if let holder = try keyHolder(of: keys, &fold), holder != inserted {
                // The key's holder came first in the hub's order: this one merges into it.
                try merge(inserted, into: holder, entity: change.entity, &fold)
                change.objectID = holder
            } else if let twin = try ownTwin(of: change, lookup: lookup, &fold), twin != inserted {
                // This replica's own insert of the key is in its store, and later in the hub's
                // order: whether it merges into this one or keeps the key (this one deleted
                // before it) is decided when it comes back. The chunk goes on until then.
                fold.awaitedTwins.insert(twin)
            }
        }
        fold.awaitedTwins.remove(inserted)
        let before = try state(change.objectID, &fold, entity: change.entity).state
        var state = before
        _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: change), to: &state)
        fold.states[change.objectID]?.state = state
        try noteKeys(of: change.objectID, entity: change.entity, before: before?.confirmed, after: state?.confirmed, &fold)
    }

    /// Makes `id` an alias of `survivor`: its pending changes are the
    /// survivor's, folded after what the hub's order has of it, and its row,
    /// if it has one here, is the survivor's where no row shows the survivor yet.
    ///
    /// Two rows cannot both be here: they would hold one key, which the
    /// store's constraint refuses (the survivor's row was made in this chunk,
    /// after this replica's twin, only if the twin had left the store).
    private func merge(_ id: UUID, into survivor: UUID, entity: String, _ fold: inout ChunkFold) throws {
        let merged = try state(id, &fold, entity: entity)
        let kept = try state(survivor, &fold, entity: entity)
        fold.aliases[id] = survivor
        var survivorState = kept.state
        for pending in merged.state?.pending ?? [] {
            var moved = pending.change
            moved.objectID = survivor
            merger.recordLocal(moved, in: &survivorState)
            if let pushed = pending.sequence { merger.acknowledgePushed(moved, sequence: pushed, in: &survivorState) }
        }
        var row = kept.primaryKey
        // A row the survivor's state does not show is none: recorded before a save that failed.
        if fold.shown[survivor]?.status != .alive, let twinRow = merged.primaryKey {
            // The row shows the twin; it is to show the survivor.
            row = twinRow
            fold.shown[survivor] = fold.shown[id] ?? merged.state?.effective ?? SyncObjectState.Fold()
        }
        fold.states[survivor] = (kept.entity, row, survivorState)
        fold.states[id] = (merged.entity, nil, nil)
    }

    /// Keeps the key index in the hub's order: an object's keys are held from
    /// its insert (as folded from the hub) until its delete.
    private func noteKeys(of id: UUID, entity: String, before: SyncObjectState.Fold?, after: SyncObjectState.Fold?,
                          _ fold: inout ChunkFold) throws {
        let wasAlive = before?.status == .alive
        let isAlive = after?.status == .alive
        if !wasAlive, isAlive, let after {
            for key in uniqueKeys(entity: entity, values: after.values) where try keyHolder(of: [key], &fold) == nil {
                fold.keyHolders[key] = .some(id)
            }
        } else if wasAlive, !isAlive, let before {
            for key in uniqueKeys(entity: entity, values: before.values) where try keyHolder(of: [key], &fold) == id {
                fold.keyHolders[key] = .some(nil)
            }
        }
    }

    /// The object holding one of `keys` in the hub's order, as this chunk has left it.
    private func keyHolder(of keys: [String], _ fold: inout ChunkFold) throws -> UUID? {
        for key in keys {
            if let changed = fold.keyHolders[key] {
                if let holder = changed { return holder }
                continue
            }
            if let holder = try ledger.value.keyHolder(key) { return try ledger.value.survivor(of: holder) }
        }
        return nil
    }

    /// This replica's own object, in the store and not yet confirmed by the
    /// hub, that holds the change's unique key.
    private func ownTwin(of change: SyncChange, lookup: UniqueKeyLookup, _ fold: inout ChunkFold) throws -> UUID? {
        guard let objectID = try lookup.object(matching: change), let primaryKey = objectID.primaryKey else { return nil }
        // An object this replica saved and has not scanned yet has no global ID: the store's
        // unique index refuses the apply, and the next attempt scans it first.
        guard let known = try ledger.value.globalID(entity: objectID.entityName, primaryKey: primaryKey) else { return nil }
        let twin = try ledger.value.survivor(of: known)
        // Only an insert of this replica's that the hub has not sent back: an object the hub's
        // order has (alive: the key index named it; deleted: its row goes in this apply) is none.
        guard let twinState = try state(twin, &fold, entity: change.entity).state,
              twinState.confirmed.status == .unknown,
              twinState.pending.contains(where: { $0.change.kind == .insert }) else { return nil }
        return twin
    }

    /// An object's entry in the chunk, read from the ledger the first time.
    private func state(_ id: UUID, _ fold: inout ChunkFold, entity: String) throws
        -> (entity: String, primaryKey: Int64?, state: SyncObjectState?) {
        if let known = fold.states[id] { return known }
        let known = try ledger.value.object(id) ?? (entity, nil, nil)
        fold.states[id] = known
        fold.shown[id] = known.state?.effective ?? SyncObjectState.Fold()
        return known
    }

    /// The change with every global ID it names replaced by its survivor's.
    private func resolvingAliases(_ change: SyncChange, _ chunkAliases: [UUID: UUID]) throws -> SyncChange {
        func survivor(_ id: UUID) throws -> UUID {
            var current = try ledger.value.survivor(of: id)
            while let next = chunkAliases[current], next != current { current = next }
            return current
        }
        var resolved = change
        resolved.objectID = try survivor(change.objectID)
        for (name, value) in change.values {
            if case .object(let id) = value { resolved.values[name] = .object(try survivor(id)) }
        }
        resolved.added = try change.added.mapValues { try Set($0.map(survivor)) }
        resolved.removed = try change.removed.mapValues { try Set($0.map(survivor)) }
        return resolved
    }

    /// The unique keys `values` give an object of `entity`, one per
    /// uniqueness constraint of the entity (and its superentities) whose
    /// attributes they all set, none of them nil; a constraint naming a
    /// relationship is left to the store.
    private func uniqueKeys(entity name: String, values: [String: SyncValue]) -> [String] {
        guard let entity = stack.writerCoordinator.managedObjectModel.entitiesByName[name] else { return [] }
        var keys: [String] = []
        var level: EntityDescription? = entity
        while let current = level {
            for constraint in current.uniquenessConstraints {
                let parts = constraint.map { name -> SyncValue? in
                    guard current.attributesByName[name] != nil, let value = values[name], value != .null else { return nil }
                    return value
                }
                guard parts.allSatisfy({ $0 != nil }) else { continue }
                keys.append("\(current.name)|\(constraint.joined(separator: ","))|\(parts.map { "\($0!)" }.joined(separator: "|"))")
            }
            level = current.superentity
        }
        return keys
    }

    func uniqueKeyLookup() -> UniqueKeyLookup {
        UniqueKeyLookup(coordinator: stack.writerCoordinator)
    }
}

/// Finds the stored object that holds a change's unique key.
struct UniqueKeyLookup {
    let context: ManagedObjectContext

    init(coordinator: PersistentStoreCoordinator) {
        context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.name = "sync unique keys"
    }

    func object(matching change: SyncChange) throws -> ObjectID? {
        guard let entity = context.persistentStoreCoordinator?.managedObjectModel.entitiesByName[change.entity] else { return nil }
        var level: EntityDescription? = entity
        while let current = level {
            for constraint in current.uniquenessConstraints {
                var format: [String] = []
                var arguments: [Any] = []
                for name in constraint {
                    guard let attribute = current.attributesByName[name], let value = change.values[name], value != .null,
                          let swift = try value.swiftValue(for: attribute, entity: current.name) else { break }
                    format.append("\(name) == %@")
                    arguments.append(swift)
                }
                guard format.count == constraint.count else { continue }
                var request = FetchRequest<ManagedObject>(entityName: current.name,
                                                          predicate: try FetchPredicate(format: format.joined(separator: " AND "), argumentArray: arguments))
                request.fetchLimit = 1
                let found = try context.performAndWait { try context.fetch(request).first?.objectID }
                if let found { return found }
            }
            level = current.superentity
        }
        return nil
    }
}
