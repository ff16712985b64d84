import Foundation

/// Merges pulled changes into what a replica knows of an object, field by
/// field, and says what its store must change.
///
/// ```swift
/// let merger = SyncMerger(policies: try SyncPolicies(model: model))
/// merger.recordLocal(saved, in: &state)                       // a local save, not pushed yet
/// merger.acknowledgePushed(saved, sequence: 41, in: &state)   // the push returned 41
/// let effect = try merger.apply(pulled, to: &state)           // nil: the store is right already
/// ```
///
/// Every replica folds the hub's log in sequence order, its own unpushed
/// changes after it (``SyncObjectState``). Where two versions of one field,
/// one to-many member or the object's existence meet, the later one in hub
/// order is *incoming*, the earlier *current*:
///
/// - The same change twice (equal timestamps: an own change pulled back, a
///   chunk applied again) changes nothing. A pulled change at or below the
///   state's ``SyncObjectState/lastSequence`` is skipped whole.
/// - Incoming saw current (``SyncVersion/saw(_:)``): incoming wins, whatever the policy.
/// - Otherwise they are concurrent, and the property's ``SyncMergePolicy``
///   decides: ``SyncMergePolicy/lastWriterWins`` the greater timestamp,
///   ``SyncMergePolicy/hubWins`` current, ``SyncMergePolicy/replicaWins``
///   incoming, ``SyncMergePolicy/resolver(_:)`` the resolver's value with
///   incoming's version. To-many members merge one by one, as adds and removes.
///
/// Deletes follow the entity's ``SyncDeletePolicy``:
///
/// - ``SyncDeletePolicy/deleteWins``: once folded, a delete stays; every
///   later insert or update of the object is dropped.
/// - ``SyncDeletePolicy/editWins``: a delete folded after an edit it did not
///   see (another replica's, with a sequence above the delete's base) is
///   dropped; an update folded after a delete it did not see revives the
///   object with every value the state knows plus the update's. An update
///   that saw the delete while the object is deleted cannot come from a
///   well-behaved replica (its store no longer had the object); it is ignored.
///
/// A second delete of a deleted object changes nothing: the first stays in force.
/// An update of an object the state does not know (its insert was never
/// folded, say after a snapshot) makes it known: the effect is an insert.
///
/// - Complexity: ``apply(_:to:)`` is O(*v* + *p*·*v*), *v* = the values and
///   members the change and the state carry, *p* = the object's pending changes (usually 0).
///
/// ## Topics
/// - ``apply(_:to:)``
/// - ``recordLocal(_:in:)``
/// - ``acknowledgePushed(_:sequence:in:)``
/// - ``SyncEffect``
/// - ``SyncConflict``
public struct SyncMerger: Sendable {
    /// The policies the merge follows.
    public let policies: SyncPolicies

    public init(policies: SyncPolicies) {
        self.policies = policies
    }

    // MARK: - Pulled changes

    /// Folds a change pulled from the hub into `state` (nil: the object was
    /// never seen) and returns what the replica's store must change, nil when nothing.
    ///
    /// Pulled changes must be applied in hub sequence order, the engine
    /// saving the state with its pull bookmark: one at or below the state's
    /// ``SyncObjectState/lastSequence`` counts as applied already.
    ///
    /// Throws ``SyncError`` `.notInModel` naming the entity or property for a
    /// change the model cannot hold (an entity or stored property it lacks,
    /// a value for a to-many relationship, adds for an attribute), and
    /// `.localFailure` for a state of another object or entity; `state` is
    /// unchanged then.
    public func apply(_ sequenced: SequencedChange, to state: inout SyncObjectState?) throws(SyncError) -> SyncEffect? {
        let change = sequenced.change
        let entity = try validated(change, sequence: sequenced.sequence)
        var current = state ?? SyncObjectState(objectID: change.objectID, entity: change.entity)
        guard current.objectID == change.objectID, current.entity == change.entity else {
            throw SyncError(.localFailure, message: """
                the sync state of \(current.entity) \(current.objectID) was given change \(sequenced.sequence) \
                of \(change.entity) \(change.objectID)
                """)
        }
        guard sequenced.sequence > current.lastSequence else { return nil }  // folded already: a chunk applied again
        let before = current.effective
        current.pending.removeAll { $0.change.timestamp == change.timestamp }  // an own change pulled back
        fold(change, sequence: sequenced.sequence, into: &current.confirmed, entity: entity, objectID: change.objectID)
        current.lastSequence = sequenced.sequence
        refold(&current)
        state = current
        return effect(from: before, to: current.effective, objectID: change.objectID, entity: change.entity)
    }

    // MARK: - Local changes

    /// Records the replica's own change, saved to its store and not pushed
    /// yet: it folds after everything pulled until the hub sends it back.
    /// Recording the same change again changes nothing.
    ///
    /// The store shows the change already, so there is no effect. A local
    /// change comes from the replica's own model; were it to name a property
    /// the policies lack, that property merges as ``SyncMergePolicy/lastWriterWins``.
    public func recordLocal(_ change: SyncChange, in state: inout SyncObjectState?) {
        var current = state ?? SyncObjectState(objectID: change.objectID, entity: change.entity)
        guard !current.pending.contains(where: { $0.change.timestamp == change.timestamp }) else { return }
        current.pending.append(SyncObjectState.PendingChange(change: change, sequence: nil))
        fold(change, sequence: nil, into: &current.effective, entity: entityPolicies(change.entity), objectID: change.objectID)
        state = current
    }

    /// Records the hub sequence a push returned for the replica's own
    /// change. The change stays pending — changes pulled later may still come
    /// before it — until the hub sends it back. Nothing happens for a change
    /// that is not pending (sent back already).
    public func acknowledgePushed(_ change: SyncChange, sequence: Int64, in state: inout SyncObjectState?) {
        guard var current = state,
              let index = current.pending.firstIndex(where: { $0.change.timestamp == change.timestamp }) else { return }
        current.pending[index].sequence = sequence
        refold(&current)
        state = current
    }

    // MARK: - Folding

    /// The entity's policies, checking that the model holds everything `change` says.
    private func validated(_ change: SyncChange, sequence: Int64) throws(SyncError) -> SyncPolicies.EntityPolicies {
        let origin = "change \(sequence) (replica \(change.replica.uuidString), local \(change.localSequence))"
        guard let entity = policies.policies(of: change.entity) else {
            throw SyncError(.notInModel, message: "\(origin) is of entity \(change.entity), which the model does not have")
        }
        for name in change.values.keys.sorted() {
            switch entity.properties[name]?.kind {
            case .value: continue
            case .toMany:
                throw SyncError(.notInModel, message: """
                    \(origin) sets \(change.entity).\(name) to a value; it is a to-many relationship, which changes by adds and removes
                    """)
            case nil:
                throw SyncError(.notInModel, message: "\(origin) sets \(change.entity).\(name), which the model does not have")
            }
        }
        for name in Set(change.added.keys).union(change.removed.keys).sorted() {
            switch entity.properties[name]?.kind {
            case .toMany: continue
            case .value:
                throw SyncError(.notInModel, message: """
                    \(origin) adds or removes objects of \(change.entity).\(name), which is not a to-many relationship
                    """)
            case nil:
                throw SyncError(.notInModel, message: "\(origin) changes \(change.entity).\(name), which the model does not have")
            }
        }
        return entity
    }

    /// The entity's policies, or the defaults for an entity the model lacks.
    private func entityPolicies(_ entity: String) -> SyncPolicies.EntityPolicies {
        policies.policies(of: entity) ?? SyncPolicies.EntityPolicies(delete: .deleteWins, properties: [:])
    }

    /// Sets `state.effective` to its confirmed fold with its pending changes folded after it.
    private func refold(_ state: inout SyncObjectState) {
        var fold = state.confirmed
        let entity = entityPolicies(state.entity)
        for pending in state.pending {
            self.fold(pending.change, sequence: pending.sequence, into: &fold, entity: entity, objectID: state.objectID)
        }
        state.effective = fold
    }

    /// Folds one change after everything `fold` holds.
    private func fold(_ change: SyncChange, sequence: Int64?, into fold: inout SyncObjectState.Fold,
                      entity: SyncPolicies.EntityPolicies, objectID: UUID) {
        let version = SyncVersion(change, sequence: sequence)
        if change.kind == .delete {
            guard fold.deletion == nil else { return }  // deleted already: the first delete stays in force
            if entity.delete == .editWins,
               fold.lastEdits.contains(where: { $0.key != version.replica && $0.value > version.baseSequence }) {
                return  // an edit the delete did not see wins over it
            }
            fold.deletion = version
            return
        }
        if let deletion = fold.deletion {
            guard entity.delete == .editWins, !version.saw(deletion) else { return }
            fold.deletion = nil  // an edit concurrent with the delete revives the object
        }
        fold.isKnown = true
        if let sequence { fold.lastEdits[version.replica] = max(fold.lastEdits[version.replica] ?? sequence, sequence) }
        for (name, value) in change.values {
            let incoming = SyncObjectState.FieldVersion(value: value, version: version)
            guard let current = fold.fields[name] else {
                fold.fields[name] = incoming
                continue
            }
            let policy = entity.properties[name]?.merge ?? .lastWriterWins
            fold.fields[name] = merged(current: current, incoming: incoming, policy: policy) { current, incoming in
                SyncConflict(entity: change.entity, property: name, objectID: objectID, current: current, incoming: incoming)
            }
        }
        for (members, isPresent) in [(change.added, true), (change.removed, false)] {
            for (name, objects) in members {
                let policy = entity.properties[name]?.merge ?? .lastWriterWins
                var versions = fold.members[name] ?? [:]
                for object in objects {
                    let incoming = SyncObjectState.MemberVersion(isPresent: isPresent, version: version)
                    guard let current = versions[object] else {
                        versions[object] = incoming
                        continue
                    }
                    let field = merged(
                        current: SyncObjectState.FieldVersion(value: .bool(current.isPresent), version: current.version),
                        incoming: SyncObjectState.FieldVersion(value: .bool(isPresent), version: version),
                        policy: policy
                    ) { current, incoming in
                        SyncConflict(entity: change.entity, property: name, objectID: objectID, current: current, incoming: incoming)
                    }
                    versions[object] = SyncObjectState.MemberVersion(isPresent: field.value == .bool(true), version: field.version)
                }
                fold.members[name] = versions
            }
        }
    }

    /// The version that wins when `incoming` follows `current` in hub order.
    private func merged(current: SyncObjectState.FieldVersion, incoming: SyncObjectState.FieldVersion, policy: SyncMergePolicy,
                        conflict: (SyncValue, SyncValue) -> SyncConflict) -> SyncObjectState.FieldVersion {
        if incoming.version.isSameChange(as: current.version) {
            var same = current  // seen twice: only a sequence learnt now is new
            if same.version.sequence == nil { same.version.sequence = incoming.version.sequence }
            return same
        }
        if incoming.version.saw(current.version) { return incoming }
        switch policy {
        case .lastWriterWins: return incoming.version.timestamp > current.version.timestamp ? incoming : current
        case .hubWins: return current
        case .replicaWins: return incoming
        case .resolver(let name):
            // SyncPolicies refuses a model naming a resolver it lacks; only a
            // property unknown to the policies gets here without one.
            guard let resolver = policies.resolvers[name] else {
                return incoming.version.timestamp > current.version.timestamp ? incoming : current
            }
            return SyncObjectState.FieldVersion(value: resolver(conflict(current.value, incoming.value)), version: incoming.version)
        }
    }

    // MARK: - Effects

    /// What the store, showing `before`, must change to show `after`.
    func effect(from before: SyncObjectState.Fold, to after: SyncObjectState.Fold,
                        objectID: UUID, entity: String) -> SyncEffect? {
        switch (before.status, after.status) {
        case (.unknown, .alive), (.deleted, .alive):
            return SyncEffect(objectID: objectID, entity: entity, kind: before.status == .deleted ? .revive : .insert,
                              values: after.values, added: after.presentMembers)
        case (.alive, .deleted), (.alive, .unknown):
            return SyncEffect(objectID: objectID, entity: entity, kind: .delete)
        case (.alive, .alive):
            var values: [String: SyncValue] = [:]
            for (name, field) in after.fields where before.fields[name]?.value != field.value { values[name] = field.value }
            var added: [String: Set<UUID>] = [:]
            var removed: [String: Set<UUID>] = [:]
            let was = before.presentMembers
            let now = after.presentMembers
            for name in Set(was.keys).union(now.keys) {
                let old = was[name] ?? []
                let new = now[name] ?? []
                if !new.subtracting(old).isEmpty { added[name] = new.subtracting(old) }
                if !old.subtracting(new).isEmpty { removed[name] = old.subtracting(new) }
            }
            guard !values.isEmpty || !added.isEmpty || !removed.isEmpty else { return nil }
            return SyncEffect(objectID: objectID, entity: entity, kind: .update, values: values, added: added, removed: removed)
        case (.unknown, _), (.deleted, _):
            return nil
        }
    }
}
