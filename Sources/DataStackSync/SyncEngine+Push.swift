import DataStack
import Foundation

// The push half of a cycle: the store's history since the last scan becomes
// changes in the outbox (each object named by its global ID, each change
// stamped by the hybrid clock at the time it was saved), then the outbox goes
// to the hub in chunks.
extension SyncEngine {
    /// Reads the local history after the scan bookmark into the outbox; the
    /// engine's own saves are skipped. The first scan of a replica exports
    /// every object the store holds, as inserts.
    func scanLocalHistory() throws(SyncError) {
        let ledger = self.ledger.value
        let coordinator = stack.writerCoordinator
        guard let store = coordinator.persistentStores.first else {
            throw SyncError(.localFailure, message: "the stack's writer coordinator has no store to sync")
        }
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.name = "sync scan"
        if try ledger.read("reading the scan bookmark", { try ledger.integer("scanned") }) == nil {
            try exportEverything(context, store: store)
        }
        while true {
            let scanned = try ledger.read("reading the scan bookmark") { try ledger.integer("scanned") } ?? 0
            var request = PersistentHistoryRequest.fetchHistory(after: PersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: scanned))
            request.fetchLimit = 100
            let transactions: [PersistentHistoryTransaction]
            do {
                transactions = try coordinator.fetchHistory(request, from: store)
            } catch let error as PersistentStoreError where error.code == .historyExpired {
                // Another process purged history this replica had not read: what it held is lost,
                // so every object is sent again, as it is now (its global ID kept).
                try exportEverything(context, store: store)
                continue
            } catch {
                throw SyncError(.localFailure, message: "the replica's history after transaction \(scanned) cannot be read: \(error)")
            }
            stack.retainHistory(after: PersistentHistoryToken(storeIdentifier: store.identifier, transactionNumber: scanned), for: historyReader)
            guard let last = transactions.last else { return }
            try ledger.write("recording local changes") {
                try context.performAndWait {
                    for transaction in transactions {
                        let milliseconds = Int64((transaction.timestamp.timeIntervalSince1970 * 1000).rounded(.down))
                        for change in transaction.changes ?? [] {
                            if transaction.author == options.transactionAuthor {
                                try recordCascade(change, at: milliseconds)
                            } else {
                                try record(change, at: milliseconds, in: context)
                            }
                        }
                    }
                    context.reset()
                }
                try ledger.setInteger(last.transactionNumber, for: "scanned")
                try saveClock()
            }
        }
    }

    /// The whole store as inserts, on a replica's first scan; the bookmark is
    /// taken first, so what is saved meanwhile is scanned again (as updates).
    private func exportEverything(_ context: ManagedObjectContext, store: any PersistentStore) throws(SyncError) {
        let ledger = self.ledger.value
        let token: PersistentHistoryToken?
        do {
            token = try stack.writerCoordinator.currentPersistentHistoryToken(fromStores: [store])
        } catch {
            throw SyncError(.localFailure, message: "the replica's history cannot be read: \(error)")
        }
        let milliseconds = Int64(Date().timeIntervalSince1970 * 1000)
        try ledger.write("exporting the store") {
            try context.performAndWait {
                for entity in stack.writerCoordinator.managedObjectModel.entities where !entity.isAbstract {
                    var request = FetchRequest<ManagedObject>(entityName: entity.name)
                    request.includesSubentities = false
                    for object in try context.fetch(request) {
                        try recordInsert(of: object, at: milliseconds)
                    }
                    context.reset()
                }
            }
            try ledger.setInteger(token?.transactionNumber ?? 0, for: "scanned")
        }
    }

    private func record(_ change: PersistentHistoryChange, at milliseconds: Int64, in context: ManagedObjectContext) throws {
        let objectID = change.changedObjectID
        switch change.changeType {
        case .insert:
            // Deleted since: its delete follows in the history, and the hub never needs the insert.
            guard let object = try? context.existingObject(with: objectID) else { return }
            try recordInsert(of: object, at: milliseconds)
        case .update:
            guard let object = try? context.existingObject(with: objectID) else { return }
            let names = change.updatedProperties ?? Set(object.entity.propertiesByName.keys)
            try recordUpdate(of: object, properties: names, at: milliseconds)
        case .delete:
            guard let primaryKey = objectID.primaryKey,
                  let globalID = try ledger.value.globalID(entity: objectID.entityName, primaryKey: primaryKey) else { return }
            try recordLocal(SyncChange(objectID: globalID, entity: objectID.entityName, kind: .delete,
                                       timestamp: clock.tick(physical: milliseconds), localSequence: 0, baseSequence: 0))
        }
    }

    /// The engine's own saves are what other replicas pushed, never sent back
    /// — except the deletes their delete rules cascaded to here: an object
    /// this replica made that another replica's delete took with it (a person
    /// of a deleted company) may exist elsewhere, where that delete found it
    /// not yet, so its delete travels as this replica's own.
    private func recordCascade(_ change: PersistentHistoryChange, at milliseconds: Int64) throws {
        let objectID = change.changedObjectID
        guard change.changeType == .delete, let primaryKey = objectID.primaryKey,
              let globalID = try ledger.value.globalID(entity: objectID.entityName, primaryKey: primaryKey),
              let known = try ledger.value.object(globalID), known.state?.effective.status == .alive else { return }
        try recordLocal(SyncChange(objectID: globalID, entity: objectID.entityName, kind: .delete,
                                   timestamp: clock.tick(physical: milliseconds), localSequence: 0, baseSequence: 0))
    }

    private func recordInsert(of object: ManagedObject, at milliseconds: Int64) throws {
        let names = Set(object.entity.propertiesByName.keys)
        var change = try changeValues(of: object, properties: names, knownMembers: [:])
        change.kind = .insert
        change.timestamp = clock.tick(physical: milliseconds)
        try recordLocal(change)
    }

    private func recordUpdate(of object: ManagedObject, properties: Set<String>, at milliseconds: Int64) throws {
        let globalID = try globalID(of: object.objectID)
        let state = try ledger.value.object(globalID)?.state
        var change = try changeValues(of: object, properties: properties, knownMembers: state.map(\.effective.presentMembers) ?? [:])
        guard !change.values.isEmpty || !change.added.isEmpty || !change.removed.isEmpty else { return }
        change.timestamp = clock.tick(physical: milliseconds)
        try recordLocal(change)
    }

    /// An update change of `object` with the values of `properties` that sync,
    /// and to-many adds and removes against the members the replica last synced.
    private func changeValues(of object: ManagedObject, properties: Set<String>,
                              knownMembers: [String: Set<UUID>]) throws -> SyncChange {
        let entity = object.entity
        var change = SyncChange(objectID: try globalID(of: object.objectID), entity: entity.name, kind: .update,
                                timestamp: clock.latest, localSequence: 0, baseSequence: 0)
        for name in properties.sorted() {
            guard let property = entity.propertiesByName[name], !property.isTransient else { continue }
            let value = try object.primitivePropertyValue(forKey: name)
            if let relationship = property as? RelationshipDescription {
                guard Self.syncs(relationship) else { continue }
                switch value {
                case .object(let id): change.values[name] = .object(try globalID(of: id))
                case .objects(let ids):
                    let members = try Set(ids.map { id in try globalID(of: id) })
                    let known = knownMembers[name] ?? []
                    if !members.subtracting(known).isEmpty { change.added[name] = members.subtracting(known) }
                    if !known.subtracting(members).isEmpty { change.removed[name] = known.subtracting(members) }
                default: change.values[name] = .null
                }
            } else if let syncValue = SyncValue(attributeValue: value) {
                change.values[name] = syncValue
            }
        }
        return change
    }

    /// Numbers a local change, folds it into its object's state and puts it in the outbox.
    private func recordLocal(_ change: SyncChange) throws {
        let ledger = self.ledger.value
        var change = change
        let next = (try ledger.integer("localSequence") ?? 0) + 1
        change.localSequence = next
        change.baseSequence = try ledger.integer("pulled") ?? 0
        try ledger.setInteger(next, for: "localSequence")
        let known = try ledger.object(change.objectID)
        var state = known?.state
        merger.recordLocal(change, in: &state)
        try ledger.setObject(change.objectID, entity: change.entity, primaryKey: change.kind == .delete ? nil : known?.primaryKey,
                             state: state)
        try ledger.appendToOutbox(change)
    }

    /// This engine's name for its hold on the stack's history.
    var historyReader: String { "DataStackSync \(replica.uuidString)" }

    /// Keeps the clock in the ledger, inside the transaction that recorded what it stamped.
    func saveClock() throws {
        let latest = clock.latest
        try ledger.value.setInteger(latest.milliseconds, for: "clock")
        try ledger.value.setInteger(Int64(latest.counter), for: "clockCounter")
    }

    /// The global ID of a local object, made (and kept) the first time it is needed.
    func globalID(of objectID: ObjectID) throws -> UUID {
        guard let primaryKey = objectID.primaryKey else {
            throw SyncError(.localFailure, message: "\(objectID) is not saved: it has no global ID")
        }
        let ledger = self.ledger.value
        if let known = try ledger.globalID(entity: objectID.entityName, primaryKey: primaryKey) { return known }
        let id = UUID()
        try ledger.setObject(id, entity: objectID.entityName, primaryKey: primaryKey, state: nil)
        return id
    }

    /// Whether a relationship travels: a to-one always; a to-many only when
    /// nothing else says the same thing — no inverse, or a to-many inverse whose
    /// side sorts after it. A to-many whose inverse is a to-one is carried by
    /// that to-one (setting it moves the member), so one fact never travels as two.
    static func syncs(_ relationship: RelationshipDescription) -> Bool {
        guard relationship.isToMany else { return true }
        guard let inverseName = relationship.inverseName,
              let inverse = relationship.destinationEntity?.relationshipsByName[inverseName] else { return true }
        guard inverse.isToMany else { return false }
        let mine = (relationship.entity?.rootEntity.name ?? "", relationship.name)
        let theirs = (inverse.entity?.rootEntity.name ?? "", inverse.name)
        return mine <= theirs
    }

    /// Sends the outbox to the hub, a chunk at a time, and clears what the hub holds.
    func pushOutbox() throws(SyncError) {
        let ledger = self.ledger.value
        while true {
            let chunk = try ledger.read("reading the outbox") { try ledger.outbox(limit: options.chunkSize) }
            guard let last = chunk.last else { return }
            let sequences = try hubCall { try options.hub.push(chunk) }
            guard sequences.count == chunk.count else {
                throw SyncError(.hubFailure, message: "the hub answered \(sequences.count) sequences for a push of \(chunk.count) changes")
            }
            try ledger.write("recording a push") {
                for (change, sequence) in zip(chunk, sequences) {
                    let known = try ledger.object(change.objectID)
                    var state = known?.state
                    merger.acknowledgePushed(change, sequence: sequence, in: &state)
                    try ledger.setObject(change.objectID, entity: change.entity, primaryKey: known?.primaryKey, state: state)
                }
                try ledger.removeFromOutbox(through: last.localSequence)
            }
            emit(.pushed(count: chunk.count, through: sequences.max() ?? 0))
        }
    }
}
