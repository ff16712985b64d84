import DataStack
import Foundation

// The scan: the store's history since the last scan becomes changes in the
// outbox, each object named by its global ID, each change stamped by the
// hybrid clock at the time it was saved.
//
// In two phases, so that the app's saves never wait for it: the objects are
// read first, in a context, with no lock held but SQLite's read snapshot; then
// one short write transaction of the ledger — which shares the store's file,
// and so its one write lock — names them by global ID and records the changes.
extension SyncEngine {
    /// One history change as read from the store, before it is named by global IDs.
    struct ScannedChange {
        enum Value {
            case attribute(SyncValue)
            case toOne(ObjectID?)
            /// A to-many's members now; the ledger phase turns them into adds and removes.
            case toMany([ObjectID])
        }

        var kind: SyncChange.Kind
        /// Nil only for the placeholder of a transaction without changes.
        var objectID: ObjectID?
        var values: [String: Value] = [:]
        var milliseconds: Int64
        /// A delete the engine's own apply cascaded to (see ``record(_:)``).
        var isCascade = false
        /// Nothing to record (the engine's own insert or update, an object deleted
        /// since), kept so that a change's place in its transaction is its index here.
        var isSkipped = false
        /// Where the change is in the history, for the bookmark: its transaction and its place in it.
        var transaction: Int64 = 0
        var index = 0
        var isLastOfTransaction = true
    }

    /// The most changes one ledger transaction records: it holds the store
    /// file's write lock, which the app's saves wait for.
    package static let changesPerLedgerTransaction = 200

    /// Reads the local history after the scan bookmark into the outbox; the
    /// engine's own saves are not sent back. The first scan of a replica
    /// exports every object the store holds, as inserts.
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
            guard !transactions.isEmpty else { return }
            // A transaction recorded in part before (a large one, or a crash): its first changes are in the outbox.
            let partial = try ledger.read("reading the scan bookmark") { () throws -> (Int64, Int64)? in
                guard let transaction = try ledger.integer("partialTransaction") else { return nil }
                return (transaction, try ledger.integer("partialOffset") ?? 0)
            }
            var changes = try read(transactions, in: context)
            if let partial, transactions.first?.transactionNumber == partial.0 {
                changes.removeFirst(min(Int(partial.1), changes.count))
            }
            // Short ledger transactions, each with its bookmark: the app's saves wait at most one.
            var start = changes.startIndex
            while start < changes.endIndex {
                let end = min(start + Self.changesPerLedgerTransaction, changes.endIndex)
                let group = changes[start..<end]
                try ledger.write("recording local changes") {
                    for change in group { try record(change) }
                    try setScanBookmark(after: group[group.index(before: group.endIndex)])
                    try saveClock()
                }
                start = end
            }
        }
    }

    /// Records how far the scan got: whole transactions by number, one
    /// recorded in part (a large one) by how many of its changes are recorded.
    private func setScanBookmark(after change: ScannedChange) throws {
        let ledger = self.ledger.value
        if change.isLastOfTransaction {
            try ledger.setInteger(change.transaction, for: "scanned")
            try ledger.removeKey("partialTransaction")
            try ledger.removeKey("partialOffset")
        } else {
            try ledger.setInteger(change.transaction, for: "partialTransaction")
            try ledger.setInteger(Int64(change.index + 1), for: "partialOffset")
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
        for entity in stack.writerCoordinator.managedObjectModel.entities where !entity.isAbstract {
            let changes: [ScannedChange]
            do {
                changes = try context.performAndWait {
                    defer { context.reset() }
                    var request = FetchRequest<ManagedObject>(entityName: entity.name)
                    request.includesSubentities = false
                    return try context.fetch(request).map { object in
                        try Self.scan(object, kind: .insert, properties: nil, at: milliseconds)
                    }
                }
            } catch {
                throw SyncError(.localFailure, message: "the replica's \(entity.name) objects cannot be read: \(error)")
            }
            try ledger.write("exporting the store") {
                for change in changes { try record(change) }
            }
        }
        try ledger.write("exporting the store") { try ledger.setInteger(token?.transactionNumber ?? 0, for: "scanned") }
    }

    // MARK: - Reading (no ledger)

    /// The changes of `transactions`, read from the objects as they are now.
    private func read(_ transactions: [PersistentHistoryTransaction], in context: ManagedObjectContext) throws(SyncError) -> [ScannedChange] {
        do {
            return try context.performAndWait {
                defer { context.reset() }
                var changes: [ScannedChange] = []
                for transaction in transactions {
                    let milliseconds = Int64((transaction.timestamp.timeIntervalSince1970 * 1000).rounded(.down))
                    let isOwn = transaction.author == options.transactionAuthor
                    let all = transaction.changes ?? []
                    for (index, change) in all.enumerated() {
                        let objectID = change.changedObjectID
                        var scanned: ScannedChange
                        switch change.changeType {
                        case .delete:
                            scanned = ScannedChange(kind: .delete, objectID: objectID, milliseconds: milliseconds, isCascade: isOwn)
                        case .insert, .update:
                            // The engine's own inserts and updates are other replicas' changes; an
                            // object deleted since has its delete later in the history, which is what counts.
                            if !isOwn, let object = try Self.existingObject(objectID, in: context) {
                                let properties = change.changeType == .insert ? nil : change.updatedProperties
                                scanned = try Self.scan(object, kind: change.changeType == .insert ? .insert : .update,
                                                        properties: properties, at: milliseconds)
                            } else {
                                scanned = ScannedChange(kind: .update, objectID: objectID, milliseconds: milliseconds, isSkipped: true)
                            }
                        }
                        scanned.transaction = transaction.transactionNumber
                        scanned.index = index
                        scanned.isLastOfTransaction = index == all.count - 1
                        changes.append(scanned)
                    }
                    if all.isEmpty {
                        // A transaction without changes still moves the bookmark.
                        var empty = ScannedChange(kind: .update, objectID: nil, milliseconds: milliseconds, isSkipped: true)
                        empty.transaction = transaction.transactionNumber
                        changes.append(empty)
                    }
                }
                return changes
            }
        } catch {
            throw SyncError(.localFailure, message: "the replica's changed objects cannot be read: \(error)")
        }
    }

    /// The object, or nil when it is gone from the store; a read that fails
    /// throws (it must not pass for a deleted object, whose change would be skipped).
    private static func existingObject(_ objectID: ObjectID, in context: ManagedObjectContext) throws -> ManagedObject? {
        do {
            return try context.existingObject(with: objectID)
        } catch let error as ObjectGraphError where error.code == .objectNotFound {
            return nil
        }
    }

    /// The values of `properties` (every one when nil) of `object` that sync.
    private static func scan(_ object: ManagedObject, kind: SyncChange.Kind, properties: Set<String>?,
                             at milliseconds: Int64) throws -> ScannedChange {
        let entity = object.entity
        var change = ScannedChange(kind: kind, objectID: object.objectID, milliseconds: milliseconds)
        for name in (properties ?? Set(entity.propertiesByName.keys)).sorted() {
            guard let property = entity.propertiesByName[name], !property.isTransient else { continue }
            let value = try object.primitivePropertyValue(forKey: name)
            if let relationship = property as? RelationshipDescription {
                guard syncs(relationship) else { continue }
                switch value {
                case .object(let id): change.values[name] = .toOne(id)
                case .objects(let ids): change.values[name] = .toMany(ids)
                default: change.values[name] = relationship.isToMany ? .toMany([]) : .toOne(nil)
                }
            } else if let syncValue = SyncValue(attributeValue: value) {
                change.values[name] = .attribute(syncValue)
            }
        }
        return change
    }

    // MARK: - Recording (in the ledger's write transaction)

    /// Names a scanned change by global IDs and records it; an update that
    /// changes nothing that syncs is dropped.
    private func record(_ scanned: ScannedChange) throws {
        guard !scanned.isSkipped, let objectID = scanned.objectID else { return }
        let ledger = self.ledger.value
        if scanned.kind == .delete {
            guard let primaryKey = objectID.primaryKey,
                  let globalID = try ledger.globalID(entity: objectID.entityName, primaryKey: primaryKey) else { return }
            // A cascade of the engine's own apply travels only for an object the others may still have.
            if scanned.isCascade, try ledger.object(globalID)?.state?.effective.status != .alive { return }
            try recordLocal(SyncChange(objectID: globalID, entity: objectID.entityName, kind: .delete,
                                       timestamp: clock.tick(physical: scanned.milliseconds), localSequence: 0, baseSequence: 0))
            return
        }
        let globalID = try self.globalID(of: objectID)
        let knownMembers = scanned.kind == .insert ? [:] : try ledger.object(globalID)?.state?.effective.presentMembers ?? [:]
        var change = SyncChange(objectID: globalID, entity: objectID.entityName, kind: scanned.kind,
                                timestamp: clock.latest, localSequence: 0, baseSequence: 0)
        for (name, value) in scanned.values {
            switch value {
            case .attribute(let value): change.values[name] = value
            case .toOne(let id): change.values[name] = try id.map { .object(try self.globalID(of: $0)) } ?? .null
            case .toMany(let ids):
                let members = try Set(ids.map { try self.globalID(of: $0) })
                let known = knownMembers[name] ?? []
                if !members.subtracting(known).isEmpty { change.added[name] = members.subtracting(known) }
                if !known.subtracting(members).isEmpty { change.removed[name] = known.subtracting(members) }
            }
        }
        guard change.kind == .insert || !change.values.isEmpty || !change.added.isEmpty || !change.removed.isEmpty else { return }
        change.timestamp = clock.tick(physical: scanned.milliseconds)
        try recordLocal(change)
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

    /// The global ID of a local object, made (and kept) the first time it is needed.
    private func globalID(of objectID: ObjectID) throws -> UUID {
        guard let primaryKey = objectID.primaryKey else {
            throw SyncError(.localFailure, message: "\(objectID) is not saved: it has no global ID")
        }
        let ledger = self.ledger.value
        if let known = try ledger.globalID(entity: objectID.entityName, primaryKey: primaryKey) { return known }
        let id = UUID()
        try ledger.setObject(id, entity: objectID.entityName, primaryKey: primaryKey, state: nil)
        return id
    }
}
