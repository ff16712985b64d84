import DataStack
import Foundation

// Snapshots: a replica that pulled the hub's log through P publishes what its
// ledger folded of it (each object's confirmed state, aliases, numbers, unique
// keys), so that the hub may purge through P and a replica that needs purged
// changes — a new one, or one whose registration was removed — starts again
// from it (re-seeds) and pulls on after P.
extension SyncEngine {
    /// Publishes to the hub a snapshot of its log through the sequence this
    /// replica has pulled, in pages of ``SyncOptions/chunkSize`` objects; the
    /// hub keeps it if no snapshot it holds is newer.
    ///
    /// The snapshot is each object's *confirmed* fold (``SyncObjectState/confirmed``),
    /// which the ledger keeps apart from the replica's own pending changes:
    /// a replica publishes with changes of its own still in its outbox or
    /// unconfirmed, and they reach others as changes, never through the snapshot.
    /// Waits for a cycle in progress; the ledger does not change while it reads.
    ///
    /// ```swift
    /// let published = try engine.publishSnapshot()
    /// _ = try hub.purge()   // PostgreSQLSyncHub: no further than published.through
    /// ```
    ///
    /// - Returns: The snapshot's sequence, how many objects it holds, and
    ///   whether the hub keeps it (false: it holds a newer one).
    /// - Throws: ``SyncError`` `.staleSnapshot` when the hub purged past this
    ///   replica's pulled sequence (sync first); `.offline`; `.hubFailure` for a
    ///   hub that keeps no snapshots.
    @discardableResult
    public func publishSnapshot() throws(SyncError) -> SyncSnapshotSummary {
        cycleLock.lock()
        defer { cycleLock.unlock() }
        let ledger = self.ledger.value
        let through = try ledger.read("reading the pull bookmark") { try ledger.integer("pulled") } ?? 0
        var after: UUID?
        var count = 0
        var staged = false
        while true {
            let (page, last) = try ledger.read("reading a page of the snapshot") { () throws -> ([SyncSnapshotObject], UUID?) in
                let rows = try ledger.objects(after: after, limit: options.chunkSize)
                var page: [SyncSnapshotObject] = []
                for row in rows {
                    let survivor = try ledger.alias(of: row.id)
                    let numbers = try ledger.numbers(of: row.id, through: through)
                    let keys = try ledger.keys(heldBy: row.id)
                    // An object the hub's log has nothing of yet (only pending changes here) is not in it.
                    let state = row.state.flatMap { $0.lastSequence > 0 ? $0.confirmedOnly : nil }
                    guard state != nil || survivor != nil || !numbers.isEmpty || !keys.isEmpty else { continue }
                    page.append(SyncSnapshotObject(objectID: row.id, entity: row.entity, state: state?.encoded(),
                                                   survivor: survivor, numbers: numbers, keys: keys))
                }
                return (page, rows.last?.id)
            }
            guard let last else { break }
            after = last
            guard !page.isEmpty else { continue }
            try hubCall { try options.hub.putSnapshotPage(page, through: through, publisher: replica) }
            count += page.count
            staged = true
        }
        // An empty snapshot is one too (a hub whose objects were all deleted): one empty page stages it.
        if !staged { try hubCall { try options.hub.putSnapshotPage([], through: through, publisher: replica) } }
        let kept = try hubCall { try options.hub.commitSnapshot(through: through, publisher: replica) }
        return SyncSnapshotSummary(through: through, objects: count, isKept: kept)
    }

    /// Starts again from the hub's snapshot, the changes this replica needs
    /// next having been purged; the cycle pushed its outbox before.
    ///
    /// Each page's objects get the snapshot's confirmed state with the
    /// replica's pending changes folded after it (those the snapshot holds
    /// dropped), and the store changes from what it shows to that, through
    /// the same apply as a pulled chunk. Objects the replica holds that the
    /// snapshot lacks lose their confirmed part (the hub deleted them, and
    /// the delete was purged); its own pending inserts stay. A last pass sets
    /// the relationships again, for references to objects of later pages.
    /// `pulled` moves to the snapshot's sequence only at the end: a re-seed
    /// cut short starts again, and finds the pages done changing nothing.
    func reseed() throws(SyncError) {
        setStatus(.reseeding)
        // A replica whose registration was removed (taken for gone) is registered again: the hub
        // waits for its acknowledgments from now on.
        try register()
        let ledger = self.ledger.value
        var seen = Set<UUID>()
        var keys = Set<String>()
        var sequence: Int64?
        var restarts = 0
        var after: UUID?
        while true {
            guard let page = try hubCall({ try options.hub.snapshotPage(after: after, limit: options.chunkSize) }) else {
                throw SyncError(.snapshotRequired, message: """
                    the changes replica \(replica) needs next were purged from the hub, and the hub holds no snapshot: \
                    a replica that synced past the purge publishes one (SyncEngine.publishSnapshot())
                    """)
            }
            if let sequence, sequence != page.sequence {
                // A newer snapshot replaced the one being read: read the newer one from its start.
                restarts += 1
                guard restarts < 5 else {
                    throw SyncError(.concurrentSave, message: "the hub's snapshot was replaced \(restarts) times while replica \(replica) read it")
                }
                (seen, keys, after) = ([], [], nil)
                continue
            }
            sequence = page.sequence
            guard let last = page.objects.last else { break }
            try applySnapshotPage(page, seen: &seen, keys: &keys)
            after = last.objectID
        }
        let through = sequence ?? 0
        try removeObjectsNotIn(seen, through: through)
        try setRelationships(of: seen)
        try ledger.write("recording the re-seed") {
            try ledger.removeKeys(except: keys)
            try ledger.setInteger(through, for: "pulled")
            try saveClock()
        }
        notePulled(through: through)
        try hubCall { try options.hub.acknowledge(replica: replica, through: through) }
        emit(.reseeded(through: through, objects: seen.count))
        setStatus(.pulling)
    }

    /// Applies one page: every object's bytes are checked first, so a damaged
    /// page applies nothing (`.corruptChange` naming the object).
    private func applySnapshotPage(_ page: SyncSnapshotPage, seen: inout Set<UUID>, keys: inout Set<String>) throws(SyncError) {
        let ledger = self.ledger.value
        var decoded: [(object: SyncSnapshotObject, state: SyncObjectState?)] = []
        for object in page.objects {
            let origin = "the hub's snapshot through sequence \(page.sequence) has \(object.entity) \(object.objectID.uuidString)"
            guard merger.policies.policies(of: object.entity) != nil else {
                throw SyncError(.notInModel, message: "\(origin), an entity the model does not have")
            }
            do throws(SyncError) {
                let state = try object.state.map { bytes throws(SyncError) in try SyncObjectState(encoded: bytes) }
                if let state, state.objectID != object.objectID || state.entity != object.entity || !state.pending.isEmpty {
                    throw SyncError(.corruptChange, message: "its state is of \(state.entity) \(state.objectID), with \(state.pending.count) pending changes")
                }
                decoded.append((object, state))
            } catch {
                throw SyncError(.corruptChange, message: "\(origin) with damaged bytes: \(error.message)")
            }
        }
        var states: [UUID: (entity: String, primaryKey: Int64?, state: SyncObjectState?)] = [:]
        var effects: [SyncEffect] = []
        try ledger.read("reading states to re-seed") {
            for (object, snapshot) in decoded {
                let known = try ledger.object(object.objectID)
                // An alias has no state: its row, if any, goes; its survivor's entry makes the survivor's.
                let state = object.survivor != nil ? nil : merger.reseeded(known?.state, snapshot: snapshot, through: page.sequence)
                if let effect = merger.effect(from: known?.state?.effective ?? SyncObjectState.Fold(),
                                              to: state?.effective ?? SyncObjectState.Fold(),
                                              objectID: object.objectID, entity: object.entity) {
                    effects.append(effect)
                }
                states[object.objectID] = (object.entity, known?.primaryKey, state)
            }
        }
        try applyAndRecord(effects, states) {
            for (object, _) in decoded {
                if let survivor = object.survivor { try ledger.setAlias(object.objectID, survivor: survivor) }
                for number in object.numbers { try ledger.recordNumber(number, of: object.objectID) }
                for key in object.keys { try ledger.setKeyHolder(object.objectID, for: key) }
            }
        }
        for (object, _) in decoded {
            seen.insert(object.objectID)
            keys.formUnion(object.keys)
        }
    }

    /// Takes the confirmed part from the objects the snapshot lacks: the hub
    /// deleted them, and purged the delete. What stays is the replica's own
    /// pending changes (its inserts not on the hub yet); an object without
    /// any is deleted here.
    private func removeObjectsNotIn(_ seen: Set<UUID>, through sequence: Int64) throws(SyncError) {
        let ledger = self.ledger.value
        var after: UUID?
        while true {
            let rows = try ledger.read("reading objects to re-seed") { try ledger.objects(after: after, limit: options.chunkSize) }
            guard let last = rows.last else { return }
            after = last.id
            var states: [UUID: (entity: String, primaryKey: Int64?, state: SyncObjectState?)] = [:]
            var effects: [SyncEffect] = []
            for row in rows where !seen.contains(row.id) {
                guard let current = row.state, current.lastSequence > 0 else { continue }  // nothing confirmed: nothing to take
                let state = merger.reseeded(current, snapshot: nil, through: sequence)
                if let effect = merger.effect(from: current.effective, to: state?.effective ?? SyncObjectState.Fold(),
                                              objectID: row.id, entity: row.entity) {
                    effects.append(effect)
                }
                states[row.id] = (row.entity, row.primaryKey, state)
            }
            try applyAndRecord(effects, states) {}
        }
    }

    /// Sets every to-one and to-many member the snapshot's objects have, as
    /// their states say: a page's object that names one of a later page
    /// found nothing when its page was applied.
    private func setRelationships(of objects: Set<UUID>) throws(SyncError) {
        let ledger = self.ledger.value
        let ordered = objects.sorted { $0.uuidString < $1.uuidString }
        for start in stride(from: 0, to: ordered.count, by: max(options.chunkSize, 1)) {
            let batch = ordered[start..<min(ordered.count, start + max(options.chunkSize, 1))]
            let effects = try ledger.read("reading relationships to re-seed") { () throws -> [SyncEffect] in
                try batch.compactMap { id throws -> SyncEffect? in
                    guard let known = try ledger.object(id), let state = known.state, state.status == .alive else { return nil }
                    let references = state.effective.fields.compactMapValues { field -> SyncValue? in
                        if case .object = field.value { return field.value }
                        return nil
                    }
                    let members = state.effective.presentMembers
                    guard !references.isEmpty || !members.isEmpty else { return nil }
                    return SyncEffect(objectID: id, entity: known.entity, kind: .update, values: references, added: members)
                }
            }
            _ = try apply(effects, knownRows: [:], aliases: [:], mergedRows: [])
        }
    }

    /// Applies effects and records the objects' rows and states (rows given
    /// up first, as a pull does), with whatever else `record` writes, in one ledger transaction.
    private func applyAndRecord(_ effects: [SyncEffect], _ states: [UUID: (entity: String, primaryKey: Int64?, state: SyncObjectState?)],
                                _ record: () throws -> Void) throws(SyncError) {
        let ledger = self.ledger.value
        let rows = try apply(effects, knownRows: states.mapValues { ($0.entity, $0.primaryKey) }, aliases: [:], mergedRows: [])
        try ledger.write("recording re-seeded objects") {
            try record()
            let resolved = states.map { id, known in (id, known, rows[id] ?? known.primaryKey.map { Optional($0) } ?? nil) }
            for (id, known, row) in resolved.sorted(by: { ($0.2 == nil ? 0 : 1) < ($1.2 == nil ? 0 : 1) }) {
                try ledger.setObject(id, entity: known.entity, primaryKey: row, state: known.state)
            }
        }
    }
}

/// What ``SyncEngine/publishSnapshot()`` published.
public struct SyncSnapshotSummary: Sendable, Hashable {
    /// The last hub sequence the snapshot folds.
    public var through: Int64
    /// How many objects it holds.
    public var objects: Int
    /// Whether the hub keeps it: false when it holds a newer one.
    public var isKept: Bool

    public init(through: Int64, objects: Int, isKept: Bool) {
        self.through = through
        self.objects = objects
        self.isKept = isKept
    }
}
