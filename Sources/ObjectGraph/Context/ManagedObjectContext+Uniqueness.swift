import Foundation

// MARK: - Uniqueness constraints

/// Uniqueness constraints (`EntityDescription.uniquenessConstraints`) are checked
/// when a root context saves, after validation and before anything is written
/// (Core Data's `NSConstraintConflict` handling):
///
/// - the inserted and updated objects are grouped by each constraint's values
///   (a constraint covers its entity and the entity's subentities; a value of nil
///   never conflicts, as in a SQLite unique index);
/// - the store is asked for a row holding the same values (one indexed query per
///   tuple), leaving out rows this context deletes or has changed;
/// - with ``MergePolicy/error`` the save throws
///   ``ObjectGraphError/Code-swift.struct/uniquenessConflict`` and nothing changes; with the
///   other policies the duplicates collapse into one object.
///
/// A row another writer saves after this check is refused by the store (a
/// unique index) inside its write transaction; the store hands that conflict
/// to the save's ``SaveConflictResolver`` (``ContextConflictResolver``), which
/// checks again there, against rows that stay put, and collapses the same way.
///
/// How duplicates collapse (Core Data documents little of it; these are the
/// choices made here):
/// - The survivor is the row already in the store when there is one: if the
///   context has that row's object (or the row is of another entity of the
///   hierarchy) that object survives; otherwise the oldest inserted duplicate
///   takes over the row's identity (it becomes an update of that row, with the
///   row's ID), so the other objects' relationships to it are kept. Values of
///   properties the survivor's entity lacks are dropped.
///   Without a stored row, the oldest object survives (an existing object before
///   inserted ones, inserted ones in creation order).
/// - Values (attributes and to-one relationships), "object trump"
///   (``MergePolicy/mergeByPropertyObjectTrump`` and ``MergePolicy/overwrite``):
///   every value the duplicates set wins over the stored row, the newest
///   duplicate last. "Store trump" (``MergePolicy/mergeByPropertyStoreTrump`` and
///   ``MergePolicy/rollback``): the stored row's values win, the duplicates only
///   fill its nil values (oldest first); an existing object whose edit made it
///   collide with another stored row has the edited constraint values undone.
///   Without a stored row, the oldest object counts as the stored one.
/// - An existing object that collides with another stored row under object
///   trump survives, and that other row is merged into it and deleted.
/// - To-many relationships are merged: the survivor keeps every destination of
///   every duplicate (Core Data drops the discarded objects' relationships).
/// - The other duplicates leave the context: inserted ones are never saved,
///   existing ones are deleted. Objects that pointed at them now point at the
///   survivor. ``ManagedObject/prepareForDeletion()`` is called on them.
extension ManagedObjectContext {
    /// A constraint as checked: its entity, keys and the keys' slots.
    private struct Constraint: Hashable {
        let entity: ObjectIdentifier
        let keys: [String]
        let indexes: [Int]
        let declaringEntity: EntityDescription

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.entity == rhs.entity && lhs.keys == rhs.keys }
        func hash(into hasher: inout Hasher) {
            hasher.combine(entity)
            hasher.combine(keys)
        }
    }

    private struct Conflict {
        let constraint: Constraint
        /// The context's objects holding the values, oldest first.
        let objects: [ManagedObject]
        /// The stored row holding them that the context has not changed.
        let databaseID: ObjectID?

        var reported: UniquenessConflict {
            UniquenessConflict(entityName: constraint.declaringEntity.name, constraint: constraint.keys,
                               objectIDs: objects.map(\.objectID), databaseObjectID: databaseID)
        }
    }

    /// Checks the uniqueness constraints of the objects this save writes and
    /// resolves conflicts with the merge policy.
    ///
    /// - Returns: the IDs of the duplicates removed, with their survivors.
    /// - Throws: ``ObjectGraphError/Code-swift.struct/uniquenessConflict`` under ``MergePolicy/error``.
    /// - Parameter absent: values the first search need not look up in the
    ///   store (``UniqueValuesFoundAbsent``); later rounds look everything up.
    func resolveUniquenessConflicts(skippingLookupOf absent: UniqueValuesFoundAbsent? = nil) throws -> [ObjectID: ManagedObject] {
        // Most models declare no constraints: then a save pays nothing here.
        guard persistentStoreCoordinator?.managedObjectModel.entities.contains(where: { !$0.uniquenessConstraints.isEmpty }) == true else {
            return [:]
        }
        var survivors: [ObjectID: ManagedObject] = [:]
        for round in 0..<4 {
            let conflicts = try findUniquenessConflicts(skippingLookupOf: round == 0 ? absent : nil)
            if conflicts.isEmpty { return survivors }
            let objectWins: Bool
            switch mergePolicy {
            case .error: throw ObjectGraphError.uniquenessConflict(conflicts.map(\.reported))
            case .mergeByPropertyObjectTrump, .overwrite: objectWins = true
            case .mergeByPropertyStoreTrump, .rollback: objectWins = false
            }
            for conflict in conflicts { try collapse(conflict, objectWins: objectWins, survivors: &survivors) }
        }
        let remaining = try findUniquenessConflicts()
        if !remaining.isEmpty { throw ObjectGraphError.uniquenessConflict(remaining.map(\.reported)) }
        return survivors
    }

    // MARK: - Finding conflicts

    /// The values of one constraint's keys in an object: the first key's
    /// value apart, so that the common constraint of one key makes no array
    /// per object.
    private struct Tuple: Hashable {
        let first: PropertyValue
        let rest: [PropertyValue]

        /// The values at `indexes` of `slots`; nil when one of them is nil (it never conflicts).
        init?(_ slots: ContiguousArray<PropertyValue>, at indexes: [Int]) {
            first = slots[indexes[0]]
            if first.isNull { return nil }
            if indexes.count == 1 {
                rest = []
            } else {
                let rest = indexes.dropFirst().map { slots[$0] }
                if rest.contains(where: \.isNull) { return nil }
                self.rest = rest
            }
        }

        var values: [PropertyValue] { [first] + rest }
    }

    /// The first object of a save holding a tuple of a constraint, and
    /// whether the store is asked for a row holding it: an inserted object, or
    /// an existing object that changed it, holds it.
    private struct FirstHolder {
        let object: ManagedObject
        var isLookedUp: Bool
    }

    // One pass over the saved objects, one hashed insert per object and
    // constraint: its constraints by position (no hashing of the constraint's
    // keys), a tuple with no array for a constraint of one key, and a list
    // only for the tuples several objects hold.
    /// The conflicts of the constraints as the store holds its rows now,
    /// every value looked up: what the check before a save would report.
    func uniquenessConflictsNow() throws -> [UniquenessConflict] {
        try findUniquenessConflicts().map(\.reported)
    }

    private func findUniquenessConflicts(skippingLookupOf absent: UniqueValuesFoundAbsent? = nil) throws -> [Conflict] {
        // The constraint whose objects the fetcher vouched for, when each still holds its value:
        // its objects are counted, not grouped (see UniqueValuesFoundAbsent.holders).
        let vouched = try vouchedHolderCount(absent)
        var vouchedPosition = -1
        var vouchedSeen = 0
        var constraints: [Constraint] = []
        var positionsByEntity: [ObjectIdentifier: [Int]] = [:]
        // The last entity's positions: a save's objects come mostly in runs of one entity.
        var lastEntity: EntityDescription?
        var lastPositions: [Int] = []
        func positions(of entity: EntityDescription) -> [Int] {
            if entity === lastEntity { return lastPositions }
            lastEntity = entity
            lastPositions = positionsOfEntity(entity)
            return lastPositions
        }
        func positionsOfEntity(_ entity: EntityDescription) -> [Int] {
            if let known = positionsByEntity[ObjectIdentifier(entity)] { return known }
            var found: [Int] = []
            var current: EntityDescription? = entity
            while let step = current {
                for keys in step.uniquenessConstraints where !keys.isEmpty {
                    let indexes = keys.compactMap { step.propertiesByName[$0]?.index }
                    guard indexes.count == keys.count else { continue }
                    // A superentity's constraint is one constraint for it and all its subentities.
                    let constraint = Constraint(entity: ObjectIdentifier(step), keys: keys, indexes: indexes, declaringEntity: step)
                    if let known = constraints.firstIndex(of: constraint) {
                        found.append(known)
                    } else {
                        if vouched != nil, let absent, step === absent.entity, keys == [absent.key] { vouchedPosition = constraints.count }
                        found.append(constraints.count)
                        constraints.append(constraint)
                    }
                }
                current = step.superentity
            }
            positionsByEntity[ObjectIdentifier(entity)] = found
            return found
        }

        // By constraint position: the first holder of each tuple, and the further
        // holders of the tuples several objects hold.
        var firsts: [[Tuple: FirstHolder]] = []
        var more: [[Tuple: [ManagedObject]]] = []
        let saved = unsavedInserts.objects + unsavedUpdates.objects
        for object in saved where !object.isDeleted {
            let entityPositions = positions(of: object.entity)
            if entityPositions.isEmpty { continue }
            if entityPositions.count == 1 && entityPositions[0] == vouchedPosition {
                vouchedSeen += 1
                continue
            }
            while firsts.count < constraints.count {
                firsts.append(Dictionary(minimumCapacity: firsts.count == vouchedPosition ? 0 : saved.count))
                more.append([:])
            }
            try object.loadValues()
            let slots = object.slots
            let snapshot = object.isInserted ? nil : object.snapshot
            for position in entityPositions {
                if position == vouchedPosition {
                    vouchedSeen += 1
                    continue
                }
                let indexes = constraints[position].indexes
                guard let tuple = Tuple(slots, at: indexes) else { continue }
                // An existing object whose values did not change keeps the row it has.
                let unchanged = snapshot.map { snapshot in indexes.allSatisfy { snapshot[$0] == slots[$0] } } ?? false
                if let first = firsts[position].updateValue(FirstHolder(object: object, isLookedUp: !unchanged), forKey: tuple) {
                    firsts[position][tuple] = FirstHolder(object: first.object, isLookedUp: first.isLookedUp || !unchanged)
                    more[position][tuple, default: []].append(object)
                }
            }
        }
        if vouchedPosition >= 0 && vouchedSeen != vouched {
            // An object the fetcher did not vouch for holds the constraint too: group them all.
            return try findUniquenessConflicts(skippingLookupOf: absent?.withoutHolders)
        }
        if firsts.allSatisfy(\.isEmpty) { return [] }

        var stored: [[Tuple: ObjectID]] = Array(repeating: [:], count: firsts.count)
        if let coordinator = persistentStoreCoordinator {
            for position in firsts.indices {
                let constraint = constraints[position]
                // Dropped: no store holding the entity means no stored row to find, and the
                // coordinator's save throws noStore for its objects itself.
                guard let store = try? coordinator.store(for: constraint.declaringEntity) as? any UniquenessCheckingStore else { continue }
                // Values a fetch just found in no row: the store's unique index refuses them if a
                // row took them since, and the save's resolver looks them up then.
                let skipped = absent.flatMap { absent in
                    absent.entity === constraint.declaringEntity && constraint.keys == [absent.key] && store is any DuplicateRefusingStore
                        ? absent.values : nil
                }
                let tuples = firsts[position].compactMap { entry -> Tuple? in
                    guard entry.value.isLookedUp else { return nil }
                    if let skipped, skipped.contains(entry.key.first) { return nil }
                    return entry.key
                }
                if tuples.isEmpty { continue }
                let ids = try store.objectIDs(of: constraint.declaringEntity, matching: constraint.keys, values: tuples.map(\.values))
                for (tuple, id) in zip(tuples, ids) { if let id { stored[position][tuple] = id } }
            }
        }

        var conflicts: [Conflict] = []
        for position in firsts.indices {
            // Only a tuple several objects hold, or a stored row holds, can conflict.
            var candidates = Array(more[position].keys)
            for tuple in stored[position].keys where more[position][tuple] == nil { candidates.append(tuple) }
            for tuple in candidates {
                guard let first = firsts[position][tuple] else { continue }
                let objects = [first.object] + (more[position][tuple] ?? [])
                var databaseID = stored[position][tuple]
                if let id = databaseID {
                    if objects.contains(where: { $0.objectID == id }) {
                        databaseID = nil
                    } else if let registered = registry[id], registered.hasChanges {
                        // Deleted here, or changed here: its row's values are not what it will hold.
                        databaseID = nil
                    }
                }
                guard objects.count > 1 || databaseID != nil else { continue }
                conflicts.append(Conflict(constraint: constraints[position], objects: objects.sorted(by: Self.isOlder), databaseID: databaseID))
            }
        }
        return conflicts.sorted {
            ($0.constraint.declaringEntity.name, $0.constraint.keys.joined(separator: ","))
                < ($1.constraint.declaringEntity.name, $1.constraint.keys.joined(separator: ","))
        }
    }

    /// How many of the objects a fetcher vouched for (``UniqueValuesFoundAbsent/holders``)
    /// this save writes, when every one of them this save writes still holds
    /// the value it was vouched for (an existing one also in its snapshot: its
    /// row holds it), and the store refuses duplicates itself (the inserted
    /// ones' values are not looked up); nil otherwise.
    ///
    /// Why: the holders' values are distinct, so when they are all the objects
    /// the save writes under the constraint (the caller counts those) no two
    /// of them conflict, and none is looked up in the store — the inserted ones
    /// hold values no row held (``UniqueValuesFoundAbsent``), the existing ones
    /// their own rows' values. Grouping them by value hashed each object's
    /// value for nothing: ~2,000 instructions an object of an upsert's chunk.
    private func vouchedHolderCount(_ absent: UniqueValuesFoundAbsent?) throws -> Int? {
        // `try?` on the store lookup: an entity no store holds is not this shortcut's to
        // report; nil sends the check down its full path, which meets the error itself.
        guard let absent, !absent.holders.isEmpty,
              let keyIndex = absent.entity.propertiesByName[absent.key]?.index,
              (try? persistentStoreCoordinator?.store(for: absent.entity)) is any DuplicateRefusingStore else { return nil }
        var count = 0
        for (object, value) in absent.holders {
            guard object.managedObjectContext === self, !object.isDeleted else { continue }
            let isInserted = unsavedInserts.contains(object)
            guard isInserted || unsavedUpdates.contains(object) else { continue }
            guard !object.isFault, object.slotValue(at: keyIndex) == value else { return nil }
            if !isInserted {
                guard !object.isInserted, let snapshot = object.snapshot, snapshot[keyIndex] == value else { return nil }
            }
            count += 1
        }
        return count
    }

    /// Existing objects (by primary key) before inserted ones (in creation order).
    private static func isOlder(_ lhs: ManagedObject, _ rhs: ManagedObject) -> Bool {
        switch (lhs.objectID.key, rhs.objectID.key) {
        case let (.permanent(a), .permanent(b)): a < b
        case (.permanent, .temporary): true
        case (.temporary, .permanent): false
        case let (.temporary(a), .temporary(b)): a < b
        }
    }

    // MARK: - Collapsing duplicates

    /// Makes the duplicates of one conflict one object: a survivor (the
    /// row's object, an existing object, or the oldest duplicate) takes the
    /// merged values and every to-many destination, references move to it,
    /// and the others are deleted (inserted ones simply leave the context).
    private func collapse(_ conflict: Conflict, objectWins: Bool, survivors: inout [ObjectID: ManagedObject]) throws {
        guard let participants = participants(in: conflict, objectWins: objectWins) else { return }
        // What each duplicate set, before anything moves.
        var changes: [ObjectIdentifier: [Int]] = [:]
        for object in participants {
            try object.loadValues()
            changes[ObjectIdentifier(object)] = object.entity.slotProperties.indices.filter { index in
                let property = object.entity.slotProperties[index]
                return !property.isTransient && (property as? RelationshipDescription)?.isToMany != true
                    && Self.hasChanged(object, at: index)
            }
        }
        var choice = try survivor(of: conflict, among: participants, objectWins: objectWins, survivors: &survivors)
        fireFaults(choice.others)
        for other in choice.others { try other.loadValues() }
        choice.others.removeAll { $0.isDeleted }

        let merged = mergedValues(of: choice, participants: participants, changes: changes, objectWins: objectWins)
        try gatherToManys(into: choice.survivor, from: choice.others)
        try retire(choice.others, into: choice.survivor, taking: merged, survivors: &survivors)
    }

    /// The objects of this context that take part in a conflict, or nil when
    /// nothing is left to collapse. When the store wins over existing objects
    /// edited into its row, their edits are undone and they leave the conflict.
    private func participants(in conflict: Conflict, objectWins: Bool) -> [ManagedObject]? {
        var participants = conflict.objects.filter { $0.managedObjectContext === self && !$0.isDeleted }
        if conflict.databaseID != nil && !objectWins {
            for object in participants where !object.isInserted {
                for index in conflict.constraint.indexes { object.writeSlot(object.snapshot?[index] ?? .null, at: index) }
            }
            participants.removeAll { !$0.isInserted }
            if participants.isEmpty { return nil }
        }
        return participants.count + (conflict.databaseID == nil ? 0 : 1) > 1 ? participants : nil
    }

    /// Which object survives a conflict, the others that merge into it, and
    /// the stored row's values when the survivor stands for the row.
    private struct SurvivorChoice {
        let survivor: ManagedObject
        var others: [ManagedObject]
        let storedValues: ContiguousArray<PropertyValue>?
    }

    private func survivor(of conflict: Conflict, among participants: [ManagedObject], objectWins: Bool,
                          survivors: inout [ObjectID: ManagedObject]) throws -> SurvivorChoice {
        guard let databaseID = conflict.databaseID else {
            return SurvivorChoice(survivor: participants[0], others: Array(participants.dropFirst()), storedValues: nil)
        }
        if objectWins, let existing = participants.first(where: { !$0.isInserted }) {
            // An existing object collided with another row: the row joins it.
            return SurvivorChoice(survivor: existing, others: participants.filter { $0 !== existing } + [object(with: databaseID)],
                                  storedValues: nil)
        }
        if let registered = registry[databaseID] ?? (databaseID.entity.name == participants[0].entity.name ? nil : object(with: databaseID)) {
            // The row's object, when the context has it or when the row is of
            // another entity (a subentity sharing the constraint): it survives.
            try registered.loadValues()
            return SurvivorChoice(survivor: registered, others: participants, storedValues: registered.slots)
        }
        // No object of the row here: the oldest duplicate becomes it.
        let node = try parentNode(for: databaseID)
        try takeOver(databaseID, node: node, by: participants[0], survivors: &survivors)
        return SurvivorChoice(survivor: participants[0], others: Array(participants.dropFirst()), storedValues: node.values)
    }

    /// The survivor's attributes and to-one relationships after the merge:
    /// each contributor's changes from the oldest to the newest (all of them
    /// when the objects win, else only into what is nil), then what a row
    /// that leaves still has where the result is nil.
    private func mergedValues(of choice: SurvivorChoice, participants: [ManagedObject], changes: [ObjectIdentifier: [Int]],
                              objectWins: Bool) -> ContiguousArray<PropertyValue> {
        let survivor = choice.survivor
        let properties = survivor.entity.slotProperties
        var merged = choice.storedValues ?? survivor.slots
        for contributor in participants.sorted(by: Self.isOlder) where choice.storedValues != nil || contributor !== survivor {
            for index in changes[ObjectIdentifier(contributor)] ?? [] where Self.shares(index, of: survivor, with: contributor) {
                if objectWins || merged[index].isNull { merged[index] = contributor.slots[index] }
            }
        }
        for other in choice.others where !participants.contains(where: { $0 === other }) {
            for index in properties.indices where merged[index].isNull && Self.shares(index, of: survivor, with: other) {
                if (properties[index] as? RelationshipDescription)?.isToMany == true || properties[index].isTransient { continue }
                merged[index] = other.slots[index]
            }
        }
        return merged
    }

    /// To-many relationships: the survivor gathers every destination of the others.
    private func gatherToManys(into survivor: ManagedObject, from others: [ManagedObject]) throws {
        for case let relationship as RelationshipDescription in survivor.entity.slotProperties
        where relationship.isToMany && !relationship.isTransient {
            let sharing = others.filter { Self.shares(relationship.index, of: survivor, with: $0) }
            guard !sharing.isEmpty else { continue }
            var destinations = try survivor.relatedObjects(survivor.slots[relationship.index], for: relationship)
            var present = Set(destinations.map(\.objectID))
            for other in sharing {
                for destination in try other.relatedObjects(other.slots[relationship.index], for: relationship)
                where present.insert(destination.objectID).inserted {
                    destinations.append(destination)
                }
                try other.setRelationship(relationship, toObjects: [])
            }
            try survivor.setRelationship(relationship, toObjects: destinations)
        }
    }

    /// The others let go of what they point at; references to them move to
    /// the survivor, which takes the merged values; then they are deleted.
    private func retire(_ others: [ManagedObject], into survivor: ManagedObject, taking merged: ContiguousArray<PropertyValue>,
                        survivors: inout [ObjectID: ManagedObject]) throws {
        var remap: [ObjectID: ObjectID] = [:]
        for other in others {
            for case let relationship as RelationshipDescription in other.entity.slotProperties where !relationship.isToMany {
                try other.setRelationship(relationship, toObjects: [])
            }
            remap[other.objectID] = survivor.objectID
        }
        for (index, property) in survivor.entity.slotProperties.enumerated() where !property.isTransient && merged[index] != survivor.slots[index] {
            if let relationship = property as? RelationshipDescription {
                guard !relationship.isToMany else { continue }
                var target: [ManagedObject] = []
                if case .object(let id) = merged[index] { target = [object(with: remap[id] ?? id)] }
                try survivor.setRelationship(relationship, toObjects: target)
            } else {
                survivor.writeSlot(merged[index], at: index)
            }
        }
        remapReferences(remap)
        for other in others {
            let id = other.objectID
            let wasInserted = other.isInserted
            delete(other)
            if wasInserted {
                // Never saved: it simply leaves the context.
                registry[id] = nil
                other.flags.formIntersection(.changeLists)
                other.managedObjectContext = nil
            }
            survivors[id] = survivor
        }
    }

    /// Whether slot `index` of `survivor` is the same property in `other` (a
    /// subentity's extra slots are not the survivor's).
    private static func shares(_ index: Int, of survivor: ManagedObject, with other: ManagedObject) -> Bool {
        other.entity.slotProperties.indices.contains(index) && other.entity.slotProperties[index] === survivor.entity.slotProperties[index]
    }

    /// Whether an object set a value: for an inserted object, one other than the
    /// default; for an existing one, one other than its last saved value.
    private static func hasChanged(_ object: ManagedObject, at index: Int) -> Bool {
        if let snapshot = object.snapshot, !object.isInserted { return object.slots[index] != snapshot[index] }
        return object.slots[index] != ManagedObject.initialValue(of: object.entity.slotProperties[index])
    }

    /// Makes an inserted object the object of a stored row: it takes the row's ID
    /// and version and becomes an update of it; its to-many relationships keep
    /// the row's destinations too.
    private func takeOver(_ rowID: ObjectID, node: IncrementalStoreNode, by object: ManagedObject,
                          survivors: inout [ObjectID: ManagedObject]) throws {
        let temporaryID = object.objectID
        var toManys: [(RelationshipDescription, [ObjectID])] = []
        for case let relationship as RelationshipDescription in object.entity.slotProperties where relationship.isToMany && !relationship.isTransient {
            let stored = try persistentStoreCoordinator?.objectIDs(for: relationship, of: rowID, in: self) ?? []
            toManys.append((relationship, stored))
        }
        registry[temporaryID] = nil
        unsavedInserts.remove(object)
        pendingChanges.forgetInserted(object)
        object.objectID = rowID
        object.flags.remove(.inserted)
        object.flags.insert(.updated)
        registry[rowID] = object
        unsavedUpdates.insert(object)
        pendingChanges.noteUpdated(rowID)
        object.snapshot = node.values
        object.snapshotVersion = node.version
        remapReferences([temporaryID: rowID])
        for (relationship, stored) in toManys {
            var ids = stored
            var present = Set(ids)
            for id in try object.objectIDs(for: relationship) where present.insert(id).inserted { ids.append(id) }
            object.slots[relationship.index] = .objects(ids)
        }
        survivors[temporaryID] = object
    }

    /// Replaces IDs in the relationship slots of every loaded registered object.
    private func remapReferences(_ mapping: [ObjectID: ObjectID]) {
        guard !mapping.isEmpty else { return }
        for object in registry.objects {
            guard object.state == .loaded, object.entity.hasRelationships else { continue }
            for case let relationship as RelationshipDescription in object.entity.slotProperties {
                let value = object.slots[relationship.index]
                let remapped = value.remappingIDs(mapping)
                if remapped != value {
                    object.slots[relationship.index] = remapped
                    objectDidChange(object)
                }
            }
        }
    }
}
