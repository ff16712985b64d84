import DataStack
@testable import DataStackSync
import Foundation
import Synchronization
import Testing

/// The merge's contract, one rule at a time: an insert from A at sequence 1,
/// then B's and C's changes, which saw the insert (base 1) and not each other.
@Suite("Sync merge contract")
struct SyncMergeContractTests {
    let object = UUID(uuidString: "10000000-0000-0000-0000-000000000001")!
    let x = UUID(uuidString: "20000000-0000-0000-0000-000000000001")!
    let y = UUID(uuidString: "20000000-0000-0000-0000-000000000002")!
    let z = UUID(uuidString: "20000000-0000-0000-0000-000000000003")!

    var insert: SyncChange {
        itemChange(.insert, object, by: Replica.a, at: 100, base: 0,
                   values: ["name": .string("first"), "count": .integer(1)], added: ["tags": [x, y]])
    }

    /// Folds `changes` as hub sequences 1, 2, … and returns the state and each change's effect.
    func fold(_ changes: [SyncChange], with merger: SyncMerger) throws -> (SyncObjectState?, [SyncEffect?]) {
        var state: SyncObjectState?
        var effects: [SyncEffect?] = []
        for (index, change) in changes.enumerated() {
            effects.append(try merger.apply(SequencedChange(sequence: Int64(index + 1), change: change), to: &state))
        }
        return (state, effects)
    }

    func name(_ state: SyncObjectState?) -> SyncValue? { state?.fields["name"]?.value }

    // MARK: - Concurrent values, per policy

    @Test("lastWriterWins: the greater timestamp wins in either hub order; the loser has no effect")
    func lastWriterWins() throws {
        let merger = try SyncTestModel.merger(policy: .lastWriterWins)
        let b = itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["name": .string("b")])
        let c = itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["name": .string("c")])
        let (first, firstEffects) = try fold([insert, b, c], with: merger)
        #expect(name(first) == .string("b"))
        #expect(firstEffects[2] == nil)
        let (second, secondEffects) = try fold([insert, c, b], with: merger)
        #expect(name(second) == .string("b"))
        #expect(secondEffects[2] == SyncEffect(objectID: object, entity: "Item", kind: .update, values: ["name": .string("b")]))
    }

    @Test("hubWins: the change the hub held first stays, whatever the timestamps")
    func hubWins() throws {
        let merger = try SyncTestModel.merger(policy: .hubWins)
        let b = itemChange(.update, object, by: Replica.b, at: 200, base: 1, values: ["name": .string("b")])
        let c = itemChange(.update, object, by: Replica.c, at: 900, base: 1, values: ["name": .string("c")])
        let (state, effects) = try fold([insert, b, c], with: merger)
        #expect(name(state) == .string("b"))
        #expect(effects[2] == nil)
    }

    @Test("replicaWins: the change that reached the hub last wins, whatever the timestamps")
    func replicaWins() throws {
        let merger = try SyncTestModel.merger(policy: .replicaWins)
        let b = itemChange(.update, object, by: Replica.b, at: 900, base: 1, values: ["name": .string("b")])
        let c = itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["name": .string("c")])
        let (state, effects) = try fold([insert, b, c], with: merger)
        #expect(name(state) == .string("c"))
        #expect(effects[2]?.values == ["name": .string("c")])
    }

    @Test("resolver: gets entity, property, object, current then incoming, and its value takes incoming's version")
    func resolver() throws {
        let seen = Recorder()
        let policies = try SyncPolicies(model: SyncTestModel.make(policy: .resolver("join")), resolvers: ["join": { conflict in
            seen.record(conflict)
            guard case .string(let a) = conflict.current, case .string(let b) = conflict.incoming else { return conflict.incoming }
            return .string(a + "+" + b)
        }])
        let merger = SyncMerger(policies: policies)
        let b = itemChange(.update, object, by: Replica.b, at: 900, base: 1, values: ["name": .string("b")])
        let c = itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["name": .string("c")])
        let (state, effects) = try fold([insert, b, c], with: merger)
        #expect(name(state) == .string("b+c"))
        #expect(state?.fields["name"]?.version.timestamp == c.timestamp)
        #expect(effects[2]?.values == ["name": .string("b+c")])
        #expect(seen.conflicts == [SyncConflict(entity: "Item", property: "name", objectID: object,
                                                current: .string("b"), incoming: .string("c"))])
    }

    @Test("changes to different properties of one object both survive")
    func differentPropertiesBothSurvive() throws {
        let merger = try SyncTestModel.merger(policy: .hubWins)
        let b = itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["name": .string("b")])
        let c = itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["count": .integer(7)])
        let (state, _) = try fold([insert, b, c], with: merger)
        #expect(state?.effective.values == ["name": .string("b"), "count": .integer(7)])
    }

    @Test("a change that saw another wins over it under every policy, even with a smaller timestamp")
    func sawAlwaysWins() throws {
        for policy in [SyncMergePolicy.lastWriterWins, .hubWins, .replicaWins, .resolver("mix")] {
            let merger = try SyncTestModel.merger(policy: policy)
            let b = itemChange(.update, object, by: Replica.b, at: 900, base: 1, values: ["name": .string("b")])
            let c = itemChange(.update, object, by: Replica.c, at: 200, base: 2, values: ["name": .string("c")])  // pulled 2 = b
            let (state, effects) = try fold([insert, b, c], with: merger)
            #expect(name(state) == .string("c"), "policy \(policy)")
            #expect(effects[2]?.values == ["name": .string("c")], "policy \(policy)")
        }
    }

    @Test("a replica's own later change wins over its earlier one it had not pulled back, under hubWins too")
    func ownLaterChangeWins() throws {
        let merger = try SyncTestModel.merger(policy: .hubWins)
        let first = itemChange(.update, object, by: Replica.b, at: 300, base: 1, local: 1, values: ["name": .string("b1")])
        let second = itemChange(.update, object, by: Replica.b, at: 301, base: 1, local: 2, values: ["name": .string("b2")])
        let (state, _) = try fold([insert, first, second], with: merger)
        #expect(name(state) == .string("b2"))
    }

    // MARK: - To-many

    @Test("to-many: A adds z while B removes y: both happen; the set is never replaced whole")
    func toManyAddsAndRemoves() throws {
        let merger = try SyncTestModel.merger(policy: .hubWins)
        let add = itemChange(.update, object, by: Replica.b, at: 300, base: 1, added: ["tags": [z]])
        let remove = itemChange(.update, object, by: Replica.c, at: 200, base: 1, removed: ["tags": [y]])
        let (state, effects) = try fold([insert, add, remove], with: merger)
        #expect(state?.effective.presentMembers == ["tags": [x, z]])
        #expect(effects[1] == SyncEffect(objectID: object, entity: "Item", kind: .update, added: ["tags": [z]]))
        #expect(effects[2] == SyncEffect(objectID: object, entity: "Item", kind: .update, removed: ["tags": [y]]))
    }

    @Test("to-many: a concurrent add and remove of one member follow the relationship's policy")
    func toManySameMember() throws {
        let add = itemChange(.update, object, by: Replica.b, at: 200, base: 1, added: ["tags": [z]])
        let remove = itemChange(.update, object, by: Replica.c, at: 300, base: 1, removed: ["tags": [z]])
        let lww = try fold([insert, add, remove], with: try SyncTestModel.merger(policy: .lastWriterWins)).0
        #expect(lww?.effective.presentMembers["tags"] == [x, y])
        let hub = try fold([insert, add, remove], with: try SyncTestModel.merger(policy: .hubWins)).0
        #expect(hub?.effective.presentMembers["tags"] == [x, y, z])
        // mix on two bools: present iff they differ (true, false → true).
        let resolved = try fold([insert, add, remove], with: try SyncTestModel.merger(policy: .resolver("mix"))).0
        #expect(resolved?.effective.presentMembers["tags"] == [x, y, z])
    }

    // MARK: - Deletes

    @Test("deleteWins: a delete and a concurrent update leave the object deleted in either order")
    func deleteWins() throws {
        let merger = try SyncTestModel.merger(delete: .deleteWins)
        let delete = itemChange(.delete, object, by: Replica.b, at: 200, base: 1)
        let update = itemChange(.update, object, by: Replica.c, at: 300, base: 1, values: ["name": .string("c")])
        let (first, firstEffects) = try fold([insert, delete, update], with: merger)
        #expect(first?.status == .deleted)
        #expect(firstEffects[1]?.kind == .delete)
        #expect(firstEffects[2] == nil)
        let (second, secondEffects) = try fold([insert, update, delete], with: merger)
        #expect(second?.status == .deleted)
        #expect(secondEffects[2]?.kind == .delete)
    }

    @Test("editWins: an update concurrent with a delete revives the object with every known value, in either order")
    func editWins() throws {
        let merger = try SyncTestModel.merger(delete: .editWins)
        let delete = itemChange(.delete, object, by: Replica.b, at: 200, base: 1)
        let update = itemChange(.update, object, by: Replica.c, at: 300, base: 1, values: ["count": .integer(5)])
        let (first, firstEffects) = try fold([insert, delete, update], with: merger)
        #expect(first?.status == .alive)
        #expect(firstEffects[1]?.kind == .delete)
        #expect(firstEffects[2] == SyncEffect(objectID: object, entity: "Item", kind: .revive,
                                              values: ["name": .string("first"), "count": .integer(5)], added: ["tags": [x, y]]))
        let (second, secondEffects) = try fold([insert, update, delete], with: merger)
        #expect(second?.status == .alive)
        #expect(secondEffects[2] == nil)
        #expect(ObjectView(first) == ObjectView(second))
    }

    @Test("editWins: an update that saw the delete (impossible from a well-behaved replica) is ignored")
    func updateThatSawTheDelete() throws {
        let merger = try SyncTestModel.merger(delete: .editWins)
        let delete = itemChange(.delete, object, by: Replica.b, at: 200, base: 1)
        let late = itemChange(.update, object, by: Replica.c, at: 300, base: 2, values: ["count": .integer(5)])
        let (state, effects) = try fold([insert, delete, late], with: merger)
        #expect(state?.status == .deleted)
        #expect(effects[2] == nil)
    }

    @Test("a local delete meets a pulled concurrent update: deleteWins keeps it deleted, editWins revives it")
    func localDeleteMeetsPulledUpdate() throws {
        for (policy, expected) in [(SyncDeletePolicy.deleteWins, ObjectView.absent),
                                   (.editWins, ObjectView(alive: true, values: ["name": .string("c"), "count": .integer(1)],
                                                          members: ["tags": [x, y]]))] {
            let merger = try SyncTestModel.merger(delete: policy)
            var state: SyncObjectState?
            _ = try merger.apply(SequencedChange(sequence: 1, change: insert), to: &state)
            let delete = itemChange(.delete, object, by: Replica.b, at: 200, base: 1)
            merger.recordLocal(delete, in: &state)
            #expect(state?.status == .deleted)
            let update = itemChange(.update, object, by: Replica.c, at: 300, base: 1, values: ["name": .string("c")])
            let effect = try merger.apply(SequencedChange(sequence: 2, change: update), to: &state)
            #expect(ObjectView(state) == expected, "policy \(policy)")
            #expect(effect?.kind == (policy == .editWins ? .revive : nil))
            // The delete comes back from the hub: nothing changes.
            #expect(try merger.apply(SequencedChange(sequence: 3, change: delete), to: &state) == nil)
            #expect(ObjectView(state) == expected)
            #expect(state?.pending.isEmpty == true)
        }
    }

    // MARK: - Idempotence and own changes

    @Test("a change applied twice is applied once; a chunk applied again changes nothing")
    func idempotence() throws {
        let merger = try SyncTestModel.merger(policy: .replicaWins)
        let chunk = [insert,
                     itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["name": .string("b")], added: ["tags": [z]]),
                     itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["name": .string("c")], removed: ["tags": [x]])]
            .enumerated().map { SequencedChange(sequence: Int64($0.offset + 1), change: $0.element) }
        var state: SyncObjectState?
        _ = try merger.apply(chunk[0], to: &state)
        _ = try merger.apply(chunk[1], to: &state)
        let once = state
        #expect(try merger.apply(chunk[1], to: &state) == nil)
        #expect(state == once)
        _ = try merger.apply(chunk[2], to: &state)
        let whole = state
        for change in chunk { #expect(try merger.apply(change, to: &state) == nil) }
        #expect(state == whole)
        // The same change under a new sequence (a replica that pushed it twice to a hub that kept both):
        // same timestamps, so nothing changes but the sequence.
        #expect(try merger.apply(SequencedChange(sequence: 4, change: chunk[2].change), to: &state) == nil)
        #expect(ObjectView(state) == ObjectView(whole))
    }

    @Test("an own change pulled back has no effect and leaves pending; its sequence becomes known")
    func ownChangeEcho() throws {
        let merger = try SyncTestModel.merger(policy: .hubWins)
        var state: SyncObjectState?
        _ = try merger.apply(SequencedChange(sequence: 1, change: insert), to: &state)
        let mine = itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["name": .string("mine")])
        merger.recordLocal(mine, in: &state)
        merger.recordLocal(mine, in: &state)
        #expect(state?.pending.count == 1)
        #expect(name(state) == .string("mine"))
        merger.acknowledgePushed(mine, sequence: 2, in: &state)
        #expect(state?.pending.first?.sequence == 2)
        #expect(try merger.apply(SequencedChange(sequence: 2, change: mine), to: &state) == nil)
        #expect(state?.pending.isEmpty == true)
        #expect(state?.confirmed.fields["name"] == SyncObjectState.FieldVersion(
            value: .string("mine"), version: SyncVersion(mine, sequence: 2)))
        #expect(state?.effective == state?.confirmed)
    }

    @Test("a pulled change meets a local pending one: hub order puts the pulled one first")
    func pulledMeetsPending() throws {
        // hubWins: the pulled change was on the hub first, so it wins; the local value is superseded.
        let hub = try SyncTestModel.merger(policy: .hubWins)
        var state: SyncObjectState?
        _ = try hub.apply(SequencedChange(sequence: 1, change: insert), to: &state)
        let mine = itemChange(.update, object, by: Replica.b, at: 900, base: 1, values: ["name": .string("mine")])
        let theirs = itemChange(.update, object, by: Replica.c, at: 200, base: 1, values: ["name": .string("theirs")])
        hub.recordLocal(mine, in: &state)
        let effect = try hub.apply(SequencedChange(sequence: 2, change: theirs), to: &state)
        #expect(effect?.values == ["name": .string("theirs")])
        #expect(try hub.apply(SequencedChange(sequence: 3, change: mine), to: &state) == nil)
        #expect(name(state) == .string("theirs"))
        // lastWriterWins: the local change has the greater timestamp, so the pulled one changes nothing.
        let lww = try SyncTestModel.merger(policy: .lastWriterWins)
        var other: SyncObjectState?
        _ = try lww.apply(SequencedChange(sequence: 1, change: insert), to: &other)
        lww.recordLocal(mine, in: &other)
        #expect(try lww.apply(SequencedChange(sequence: 2, change: theirs), to: &other) == nil)
        #expect(name(other) == .string("mine"))
    }

    @Test("a pulled change for an object never seen inserts it; a delete of one never seen has no effect")
    func unknownObjects() throws {
        let merger = try SyncTestModel.merger()
        var state: SyncObjectState?
        let update = itemChange(.update, object, by: Replica.b, at: 300, base: 0, values: ["name": .string("b")])
        #expect(try merger.apply(SequencedChange(sequence: 5, change: update), to: &state)?.kind == .insert)
        var other: SyncObjectState?
        #expect(try merger.apply(SequencedChange(sequence: 5, change: itemChange(.delete, object, by: Replica.b, at: 300, base: 0)),
                                 to: &other) == nil)
        #expect(other?.status == .deleted)
    }

    // MARK: - Bad input

    @Test("a change naming what the model lacks throws notInModel naming it, and leaves the state alone")
    func notInModel() throws {
        let merger = try SyncTestModel.merger()
        var state: SyncObjectState?
        _ = try merger.apply(SequencedChange(sequence: 1, change: insert), to: &state)
        let before = state
        var bad: [(SyncChange, String)] = [
            (itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["colour": .string("red")]), "Item.colour"),
            (itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["tags": .null]), "Item.tags"),
            (itemChange(.update, object, by: Replica.b, at: 300, base: 1, added: ["name": [x]]), "Item.name"),
            (itemChange(.update, object, by: Replica.b, at: 300, base: 1, removed: ["gone": [x]]), "Item.gone"),
            (itemChange(.update, object, by: Replica.b, at: 300, base: 1, values: ["scratch": .string("t")]), "Item.scratch"),
        ]
        var otherEntity = itemChange(.update, object, by: Replica.b, at: 300, base: 1)
        otherEntity.entity = "Planet"
        bad.append((otherEntity, "entity Planet"))
        for (change, named) in bad {
            #expect {
                try merger.apply(SequencedChange(sequence: 2, change: change), to: &state)
            } throws: { error in
                (error as? SyncError)?.code == .notInModel && "\(error)".contains(named)
            }
            #expect(state == before)
        }
        var wrongEntity = itemChange(.update, object, by: Replica.b, at: 300, base: 1)
        wrongEntity.entity = "Tag"
        #expect(throws: SyncError.self) { try merger.apply(SequencedChange(sequence: 2, change: wrongEntity), to: &state) }
    }

    @Test("policies: bad user info and missing resolvers throw notInModel naming entity.property; inherited ones apply")
    func policies() throws {
        #expect {
            try SyncPolicies(model: SyncTestModel.make(notePolicy: "loudestWins"))
        } throws: { error in
            (error as? SyncError)?.code == .notInModel && "\(error)".contains("SpecialItem.note") && "\(error)".contains("loudestWins")
        }
        #expect {
            try SyncPolicies(model: SyncTestModel.make(policy: .resolver("nobody")), resolvers: ["mix": SyncTestModel.mix])
        } throws: { error in
            (error as? SyncError)?.code == .notInModel && "\(error)".contains("Item.") && "\(error)".contains("nobody")
        }
        let model = SyncTestModel.make(policy: .hubWins, delete: .editWins)
        model.entitiesByName["Tag"]?.userInfo[SyncDeletePolicy.userInfoKey] = "sometimes"
        #expect {
            try SyncPolicies(model: model)
        } throws: { error in
            (error as? SyncError)?.code == .notInModel && "\(error)".contains("Tag")
        }
        let policies = try SyncPolicies(model: SyncTestModel.make(policy: .hubWins, delete: .editWins, notePolicy: "replicaWins"))
        #expect(policies.mergePolicy(entity: "SpecialItem", property: "name") == .hubWins)
        #expect(policies.mergePolicy(entity: "SpecialItem", property: "note") == .replicaWins)
        #expect(policies.mergePolicy(entity: "Item", property: "note") == nil)
        #expect(policies.mergePolicy(entity: "Item", property: "scratch") == nil)
        #expect(policies.deletePolicy(entity: "SpecialItem") == .editWins)
        #expect(policies.deletePolicy(entity: "Tag") == .deleteWins)
    }
}

/// Records the conflicts a resolver was given (the resolver is `@Sendable`).
final class Recorder: Sendable {
    private let storage = Mutex<[SyncConflict]>([])
    func record(_ conflict: SyncConflict) { storage.withLock { $0.append(conflict) } }
    var conflicts: [SyncConflict] { storage.withLock { $0 } }
}
