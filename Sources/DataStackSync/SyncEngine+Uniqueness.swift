import DataStack
import Foundation

/// What folding one pulled chunk produced: each object's state (read once,
/// written once) and what its row showed before the chunk, and the objects
/// merged into another because they carried the same unique key.
struct ChunkFold {
    var states: [UUID: (entity: String, primaryKey: Int64?, state: SyncObjectState?)] = [:]
    /// What each object's row showed when the chunk first touched it.
    var shown: [UUID: SyncObjectState.Fold] = [:]
    /// Global IDs merged away in this chunk, to their survivors: their rows, if any, are the survivors' now.
    var aliases: [UUID: UUID] = [:]
    /// Unique keys whose holder in the hub's order this chunk changed: the
    /// object whose insert took the key, or nil where a delete freed it.
    var keyHolders: [String: UUID?] = [:]

    /// What the store must change, one effect per object: the chunk's net
    /// result, so an object inserted and deleted within it is never made, and
    /// a reference to one deleted within it finds nothing.
    func effects(_ merger: SyncMerger) -> [SyncEffect] {
        states.compactMap { id, entry in
            guard aliases[id] == nil else { return nil }
            return merger.effect(from: shown[id] ?? SyncObjectState.Fold(), to: entry.state?.effective ?? SyncObjectState.Fold(),
                                 objectID: id, entity: entry.entity)
        }
    }
}

// Uniqueness across replicas: two replicas that insert the same unique key
// offline converge to one object. The survivor is the object whose insert
// came first in the hub's order (a replica's own insert not yet back from the
// hub comes after every pulled one); the other becomes an alias of it — its
// changes, and every reference to it, are the survivor's from then on, and
// its values merge into the survivor's field by field under the same
// policies as any two concurrent changes. Every replica sees the inserts in
// the same order, so every replica picks the same survivor.
extension SyncEngine {
    /// Folds one pulled change into the chunk, merging a unique-key twin.
    func fold(_ sequenced: SequencedChange, into fold: inout ChunkFold, lookup: UniqueKeyLookup) throws {
        var change = try resolvingAliases(sequenced.change, fold.aliases)
        let keys = uniqueKeys(entity: change.entity, values: change.values)
        if change.kind == .insert, !keys.isEmpty, try state(change.objectID, &fold, entity: change.entity).state == nil {
            if let holder = try keyHolder(of: keys, &fold), holder != change.objectID {
                // The key's holder came first in the hub's order: this one merges into it.
                fold.aliases[change.objectID] = holder
                change.objectID = holder
            } else if let twin = try ownTwin(of: change, lookup: lookup, &fold), twin != change.objectID {
                // The twin is this replica's own insert, not back from the hub yet: it comes
                // later in the hub's order, so it merges into this one. Its row becomes this
                // one's; its pending changes are this one's, refolded after what was pulled.
                let twinState = try state(twin, &fold, entity: change.entity)
                fold.aliases[twin] = change.objectID
                var merged: SyncObjectState?
                _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: change), to: &merged)
                for pending in twinState.state?.pending ?? [] {
                    var moved = pending.change
                    moved.objectID = change.objectID
                    merger.recordLocal(moved, in: &merged)
                    if let pushed = pending.sequence { merger.acknowledgePushed(moved, sequence: pushed, in: &merged) }
                }
                // The row shows the twin; it is to show this one.
                fold.shown[change.objectID] = fold.shown[twin] ?? twinState.state?.effective ?? SyncObjectState.Fold()
                fold.states[change.objectID] = (change.entity, twinState.primaryKey, merged)
                fold.states[twin] = (twinState.entity, nil, nil)
                for key in keys { fold.keyHolders[key] = .some(change.objectID) }
                return
            }
        }
        let before = try state(change.objectID, &fold, entity: change.entity).state
        var state = before
        _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: change), to: &state)
        fold.states[change.objectID]?.state = state
        try noteKeys(of: change.objectID, entity: change.entity, before: before?.confirmed, after: state?.confirmed, &fold)
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
