import DataStack
@testable import DataStackSync
import Foundation

/// The model the merge tests sync: an `Item` with a name, a count, a to-one
/// `owner` and a to-many `tags`; a `SpecialItem` inheriting them with a
/// `note`; a `Tag`. Every property of Item gets `policy`; Item gets `delete`.
enum SyncTestModel {
    static func make(policy: SyncMergePolicy = .lastWriterWins, delete: SyncDeletePolicy = .deleteWins,
                     notePolicy: String? = nil) -> ManagedObjectModel {
        let tag = EntityDescription(name: "Tag", properties: [AttributeDescription(name: "label", type: .string)])
        let itemProperties: [PropertyDescription] = [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "count", type: .integer64),
            RelationshipDescription(name: "owner", destination: "Tag"),
            RelationshipDescription(name: "tags", destination: "Tag", isToMany: true),
        ]
        for property in itemProperties { property.userInfo[SyncMergePolicy.userInfoKey] = policy.userInfoValue }
        let transient = AttributeDescription(name: "scratch", type: .string)
        transient.isTransient = true
        let item = EntityDescription(name: "Item", properties: itemProperties + [transient])
        item.userInfo[SyncDeletePolicy.userInfoKey] = delete == .editWins ? "editWins" : "deleteWins"
        let note = AttributeDescription(name: "note", type: .string)
        if let notePolicy { note.userInfo[SyncMergePolicy.userInfoKey] = notePolicy }
        let special = EntityDescription(name: "SpecialItem", properties: [note])
        item.subentities = [special]
        return ManagedObjectModel(entities: [item, special, tag])
    }

    /// A resolver that depends on both values and their order: a conflict
    /// settled with the values swapped gives another answer.
    static let mix: SyncResolver = { conflict in
        switch (conflict.current, conflict.incoming) {
        case let (.integer(a), .integer(b)): .integer((a &* 31 &+ b) % 1000)
        case let (.string(a), .string(b)): .string(String((a + "|" + b).suffix(7)))
        case let (.bool(a), .bool(b)): .bool(a != b)
        default: conflict.incoming
        }
    }

    static func merger(policy: SyncMergePolicy = .lastWriterWins, delete: SyncDeletePolicy = .deleteWins) throws -> SyncMerger {
        SyncMerger(policies: try SyncPolicies(model: make(policy: policy, delete: delete), resolvers: ["mix": mix]))
    }
}

/// Replica IDs that order A < B < C.
enum Replica {
    static let a = UUID(uuidString: "00000000-0000-0000-0000-00000000000A")!
    static let b = UUID(uuidString: "00000000-0000-0000-0000-00000000000B")!
    static let c = UUID(uuidString: "00000000-0000-0000-0000-00000000000C")!
}

/// A change of an `Item`, stamped at `ms` by `replica`.
func itemChange(_ kind: SyncChange.Kind, _ object: UUID, by replica: UUID, at ms: Int64, base: Int64,
                local: Int64 = 1, values: [String: SyncValue] = [:],
                added: [String: Set<UUID>] = [:], removed: [String: Set<UUID>] = [:]) -> SyncChange {
    SyncChange(objectID: object, entity: "Item", kind: kind, values: values, added: added, removed: removed,
               timestamp: HybridTimestamp(milliseconds: ms, counter: 0, replica: replica),
               localSequence: local, baseSequence: base)
}

/// What a store shows of one object: what merges must agree on.
struct ObjectView: Hashable, CustomStringConvertible {
    var alive: Bool
    var values: [String: SyncValue]
    var members: [String: Set<UUID>]

    static let absent = ObjectView(alive: false, values: [:], members: [:])

    /// A state's effective object (deleted and unknown objects show as absent).
    init(_ state: SyncObjectState?) {
        guard let state, state.status == .alive else {
            self = .absent
            return
        }
        self.init(alive: true, values: state.effective.values, members: state.effective.presentMembers)
    }

    init(alive: Bool, values: [String: SyncValue], members: [String: Set<UUID>]) {
        self.alive = alive
        self.values = alive ? values : [:]
        self.members = alive ? members.filter { !$0.value.isEmpty } : [:]
    }

    /// This view after the store applied `effect`.
    func applying(_ effect: SyncEffect) -> ObjectView {
        switch effect.kind {
        case .insert, .revive:
            return ObjectView(alive: true, values: effect.values, members: effect.added)
        case .delete:
            return .absent
        case .update:
            var view = self
            view.values.merge(effect.values) { $1 }
            for (name, objects) in effect.added { view.members[name, default: []].formUnion(objects) }
            for (name, objects) in effect.removed { view.members[name, default: []].subtract(objects) }
            return ObjectView(alive: alive, values: view.values, members: view.members)
        }
    }

    /// This view after the replica's own store saved `change`.
    func applying(_ change: SyncChange) -> ObjectView {
        switch change.kind {
        case .insert:
            return ObjectView(alive: true, values: change.values, members: change.added)
        case .delete:
            return .absent
        case .update:
            var view = self
            view.values.merge(change.values) { $1 }
            for (name, objects) in change.added { view.members[name, default: []].formUnion(objects) }
            for (name, objects) in change.removed { view.members[name, default: []].subtract(objects) }
            return ObjectView(alive: alive, values: view.values, members: view.members)
        }
    }

    var description: String {
        alive ? "alive \(values.sorted { $0.key < $1.key }) \(members.mapValues { $0.count })" : "absent"
    }
}

/// A seeded SplitMix64 (Steele et al. 2014): the same seed, the same sequence, on every machine.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func uuid() -> UUID {
        let high = next()
        let low = next()
        return withUnsafeBytes(of: (high, low)) { raw in
            UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                        raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }
}
