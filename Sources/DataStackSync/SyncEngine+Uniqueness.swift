import DataStack
import Foundation

// Uniqueness across replicas: two replicas that insert the same unique key
// offline converge to one object. The survivor is the object holding the key
// when the other's insert is folded in the hub's order (the key index: taken
// by an insert or update, freed by a delete or update); the other becomes an
// alias of it — its changes, and every reference to it, are the survivor's
// from then on, and its values merge into the survivor's field by field under
// the same policies as any two concurrent changes. Every replica folds the same log in
// the same order, so every replica picks the same survivor — including the
// replica that made the alias, whose own insert is decided when the hub sends
// it back, not when another's insert of the key arrives (ChunkFold's
// awaited twins). An update onto a held key loses that attribute, reported
// as a conflict, on every replica alike.
extension SyncEngine {
    /// Folds one pulled change into the chunk, merging an insert whose
    /// unique key is held into the key's holder, and keeping from a change
    /// the attributes that would give its object a key another holds.
    func fold(_ sequenced: SequencedChange, into fold: inout ChunkFold, lookup: UniqueKeyLookup) throws {
        var change = try resolvingAliases(sequenced.change, fold.aliases)
        let keys = uniqueKeys(entity: change.entity, values: change.values)
        // The hub's order has the object for the first time: a change pulled again, or an
        // insert of an object deleted since, takes no key.
        if change.kind == .insert, !keys.isEmpty,
           try state(change.objectID, &fold, entity: change.entity).state?.confirmed.status ?? .unknown == .unknown,
           let holder = try keyHolder(of: keys, &fold), holder != change.objectID {
            // The key's holder came first in the hub's order: this one merges into it.
            try merge(change.objectID, into: holder, entity: change.entity, &fold)
            change.objectID = holder
        }
        let id = change.objectID
        let before = try state(id, &fold, entity: change.entity).state
        var state = before
        _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: change), to: &state)
        // A change that would give its object a key another object holds in the hub's order
        // (an update, or an insert's second constraint) loses that key's attributes, here
        // and on every replica alike; the object keeps the values it had.
        let lost = try keysTaken(by: id, entity: change.entity, before: before?.confirmed, after: state?.confirmed)
            .filter { try ![nil, id].contains(keyHolder(of: [$0], &fold)) }
            .flatMap(Self.attributes(ofKey:)).filter { change.values[$0] != nil }
        if !lost.isEmpty {
            var kept = change
            for name in Set(lost).sorted() {
                kept.values[name] = nil
                fold.keyConflicts.append(SyncConflict(entity: change.entity, property: name, objectID: id,
                                                      current: before?.confirmed.fields[name]?.value ?? .null,
                                                      incoming: change.values[name] ?? .null))
            }
            state = before
            _ = try merger.apply(SequencedChange(sequence: sequenced.sequence, change: kept), to: &state)
        }
        fold.states[id]?.state = state
        let taken = try noteKeys(of: id, entity: change.entity, before: before?.confirmed, after: state?.confirmed, &fold)
        try awaitOwnTwins(holding: taken, of: id, entity: change.entity, values: state?.confirmed.values ?? [:],
                          lookup: lookup, &fold)
    }

    /// Where a key this change gave `id` is held, in this replica's store,
    /// by another of its own objects through a change the hub has not sent
    /// back (an insert or an update of the key), the chunk goes on until it
    /// has: whether that change keeps the key — `id` deleted or moved off it
    /// before — is decided then, in the hub's order. Until then the store
    /// cannot show both.
    private func awaitOwnTwins(holding taken: [String], of id: UUID, entity: String, values: [String: SyncValue],
                               lookup: UniqueKeyLookup, _ fold: inout ChunkFold) throws {
        guard !taken.isEmpty,
              let objectID = try lookup.object(entity: entity, values: values), let primaryKey = objectID.primaryKey,
              // An object this replica saved and has not scanned yet has no global ID: the store's
              // unique index refuses the apply, and the next attempt scans it first.
              let known = try ledger.value.globalID(entity: objectID.entityName, primaryKey: primaryKey) else { return }
        var twin = try ledger.value.survivor(of: known)
        while let next = fold.aliases[twin], next != twin { twin = next }
        guard twin != id, let twinState = try state(twin, &fold, entity: objectID.entityName).state else { return }
        let confirmedKeys = twinState.confirmed.status == .alive
            ? Set(uniqueKeys(entity: twinState.entity, values: twinState.confirmed.values)) : []
        let names = Set(taken.filter { !confirmedKeys.contains($0) }.flatMap(Self.attributes(ofKey:)))
        guard twinState.pending.contains(where: { !names.isDisjoint(with: $0.change.values.keys) }) else { return }
        fold.awaitedTwins[twin, default: []].formUnion(names)
    }

    /// Makes `id` an alias of `survivor`: its pending changes are the
    /// survivor's, folded after what the hub's order has of it, and its row,
    /// if it has one here, is the survivor's where no row shows the survivor
    /// yet; where one does (the survivor took the key by an update), the
    /// twin's row goes (ChunkFold's merged rows).
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
        if let twinRow = merged.primaryKey {
            // A row the survivor's state does not show is none: recorded before a save that failed.
            if fold.shown[survivor]?.status != .alive {
                // The row shows the twin; it is to show the survivor.
                row = twinRow
                fold.shown[survivor] = fold.shown[id] ?? merged.state?.effective ?? SyncObjectState.Fold()
            } else {
                // Both have rows (the survivor took the key by an update): the twin's goes, its
                // to-many members moving to the survivor's.
                fold.mergedRows.append((entity: merged.entity, primaryKey: twinRow, into: survivor))
            }
        }
        fold.states[survivor] = (kept.entity, row, survivorState)
        fold.states[id] = (merged.entity, nil, nil)
    }

    /// Keeps the key index in the hub's order: an object holds a key from
    /// the insert or update that gave it the key (as folded from the hub, the
    /// key free) until the delete or update that took it away. Returns the
    /// keys `id` took.
    private func noteKeys(of id: UUID, entity: String, before: SyncObjectState.Fold?, after: SyncObjectState.Fold?,
                          _ fold: inout ChunkFold) throws -> [String] {
        let had = before?.status == .alive ? uniqueKeys(entity: entity, values: before?.values ?? [:]) : []
        let has = after?.status == .alive ? uniqueKeys(entity: entity, values: after?.values ?? [:]) : []
        for key in had where !has.contains(key) {
            if try keyHolder(of: [key], &fold) == id { fold.keyHolders[key] = .some(nil) }
        }
        var taken: [String] = []
        for key in has where !had.contains(key) {
            guard try keyHolder(of: [key], &fold) == nil else { continue }
            fold.keyHolders[key] = .some(id)
            taken.append(key)
        }
        return taken
    }

    /// The keys `after` gives an object that `before` did not.
    private func keysTaken(by id: UUID, entity: String, before: SyncObjectState.Fold?, after: SyncObjectState.Fold?) -> [String] {
        guard let after, after.status == .alive else { return [] }
        let had = before?.status == .alive ? Set(uniqueKeys(entity: entity, values: before?.values ?? [:])) : []
        return uniqueKeys(entity: entity, values: after.values).filter { !had.contains($0) }
    }

    /// The attributes of a key made by ``uniqueKeys(entity:values:)``.
    static func attributes(ofKey key: String) -> [String] {
        let parts = key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        return parts.count > 1 ? parts[1].split(separator: ",").map(String.init) : []
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

extension SyncEngine {
    /// Deletes the rows of objects merged into a survivor that has a row of
    /// its own (ChunkFold's merged rows), first moving their to-many members
    /// to the survivor's row: a to-one pointing at the merged row (the
    /// inverse of such a to-many) then points at the survivor's, as its
    /// state, naming the merged object's alias, says.
    func removeMergedRows(_ rows: [(entity: String, primaryKey: Int64, into: UUID)], in context: ManagedObjectContext,
                          store: any PersistentStore, survivor object: (UUID) throws -> ManagedObject?) throws {
        for row in rows {
            let objectID = try Self.rowID(entity: row.entity, primaryKey: row.primaryKey, in: store,
                                          model: stack.writerCoordinator.managedObjectModel)
            let merged: ManagedObject
            do {
                merged = try context.existingObject(with: objectID)
            } catch let error as ObjectGraphError where error.code == .objectNotFound {
                continue   // gone already (a crash after the save, before the ledger recorded it)
            }
            if let survivor = try object(row.into), survivor !== merged {
                for (name, relationship) in merged.entity.relationshipsByName.sorted(by: { $0.key < $1.key })
                where relationship.isToMany && survivor.entity.relationshipsByName[name] != nil {
                    let moving = try merged.objectIDs(forRelationshipNamed: name).map { try context.existingObject(with: $0) }
                    guard !moving.isEmpty else { continue }
                    var members = try survivor.objectIDs(forRelationshipNamed: name).map { try context.existingObject(with: $0) }
                    for member in moving where !members.contains(where: { $0 === member }) { members.append(member) }
                    try survivor.setValue(relationship.isOrdered ? members as Any : Set(members) as Any, forKey: name)
                }
            }
            context.delete(merged)
        }
    }

    /// The effects in the order their rows are to be written: an update
    /// that moves a row off a unique value another effect gives some row
    /// comes before that effect (a chain of moves, the last first), so that
    /// the store's unique index, checked row by row, never sees a value twice.
    func keyReleasingFirst(_ effects: [SyncEffect], object: (UUID) throws -> ManagedObject?) throws -> [SyncEffect] {
        let model = stack.writerCoordinator.managedObjectModel
        func uniqueAttributes(_ name: String) -> [String] {
            var names: Set<String> = []
            var level = model.entitiesByName[name]
            while let current = level {
                for constraint in current.uniquenessConstraints { names.formUnion(constraint) }
                level = current.superentity
            }
            return names.sorted()
        }
        // What each effect gives, as `attribute=value`, and which effects' rows hold such a value now.
        let gives = effects.map { effect in
            Set(uniqueAttributes(effect.entity).compactMap { name in effect.values[name].map { "\(name)=\($0)" } })
        }
        let given = gives.reduce(into: Set<String>()) { $0.formUnion($1) }
        guard !given.isEmpty else { return effects }
        var holders: [String: [Int]] = [:]
        for (index, effect) in effects.enumerated() where effect.kind == .update {
            guard let row = try object(effect.objectID) else { continue }
            for name in uniqueAttributes(effect.entity) where effect.values[name] != nil {
                guard let stored = SyncValue(attributeValue: try row.primitivePropertyValue(forKey: name)) else { continue }
                let value = "\(name)=\(stored)"
                if given.contains(value) { holders[value, default: []].append(index) }
            }
        }
        guard !holders.isEmpty else { return effects }
        var ordered: [SyncEffect] = []
        var placed = Set<Int>()
        var visiting = Set<Int>()
        func place(_ index: Int) {
            // A cycle (two rows swapping values) cannot come from the hub's order, which lets
            // a move take only a free key; were one here, the store would refuse the save.
            guard !placed.contains(index), visiting.insert(index).inserted else { return }
            for value in gives[index].sorted() {
                for holder in holders[value] ?? [] where holder != index { place(holder) }
            }
            placed.insert(index)
            ordered.append(effects[index])
        }
        for index in effects.indices { place(index) }
        return ordered
    }
}
