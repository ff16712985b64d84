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
    /// Unique keys inserted by this chunk (not in the store yet), to their objects.
    var insertedKeys: [String: UUID] = [:]

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
        let keys = uniqueKeys(of: change)
        if change.kind == .insert, !keys.isEmpty, try state(change.objectID, &fold, entity: change.entity).state == nil,
           let twin = try twin(of: change, keys: keys, fold: &fold, lookup: lookup), twin != change.objectID {
            let twinState = try state(twin, &fold, entity: change.entity)
            if twinState.state?.confirmed.status == .alive {
                // The twin's insert came first: this one merges into it.
                fold.aliases[change.objectID] = twin
                change.objectID = twin
            } else {
                // The twin is this replica's own insert, not back from the hub yet: it comes
                // later in the hub's order, so it merges into this one. Its row becomes this
                // one's; its pending changes are this one's, refolded after what was pulled.
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
                for key in keys { fold.insertedKeys[key] = change.objectID }
                return
            }
        }
        var state = try state(change.objectID, &fold, entity: change.entity).state
        _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: change), to: &state)
        fold.states[change.objectID]?.state = state
        if change.kind == .insert { for key in keys { fold.insertedKeys[key] = change.objectID } }
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

    /// The change's unique keys, one per uniqueness constraint of its entity
    /// (and its superentities) whose attributes it sets, none of them nil; a
    /// constraint naming a relationship is left to the store.
    private func uniqueKeys(of change: SyncChange) -> [String] {
        guard let entity = stack.writerCoordinator.managedObjectModel.entitiesByName[change.entity] else { return [] }
        var keys: [String] = []
        var level: EntityDescription? = entity
        while let current = level {
            for constraint in current.uniquenessConstraints {
                let values = constraint.map { name -> SyncValue? in
                    guard current.attributesByName[name] != nil, let value = change.values[name], value != .null else { return nil }
                    return value
                }
                guard values.allSatisfy({ $0 != nil }) else { continue }
                keys.append("\(current.name)|\(constraint.joined(separator: ","))|\(values.map { "\($0!)" }.joined(separator: "|"))")
            }
            level = current.superentity
        }
        return keys
    }

    /// Another live object already holding one of `keys`: inserted earlier in
    /// this chunk, or in the store — and not deleted since, by this chunk or
    /// before (a key freed by a delete may be taken again).
    private func twin(of change: SyncChange, keys: [String], fold: inout ChunkFold, lookup: UniqueKeyLookup) throws -> UUID? {
        func isAlive(_ id: UUID) throws -> Bool {
            try state(id, &fold, entity: change.entity).state.map { $0.effective.status == .alive } ?? true
        }
        for key in keys {
            if let inserted = fold.insertedKeys[key], try isAlive(inserted) { return inserted }
        }
        guard let objectID = try lookup.object(matching: change), let primaryKey = objectID.primaryKey else { return nil }
        // An object this replica saved and has not scanned yet has no global ID: the store's
        // unique index refuses the apply, and the next attempt scans it first.
        guard let known = try ledger.value.globalID(entity: objectID.entityName, primaryKey: primaryKey) else { return nil }
        let twin = try ledger.value.survivor(of: known)
        return try isAlive(twin) ? twin : nil
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
