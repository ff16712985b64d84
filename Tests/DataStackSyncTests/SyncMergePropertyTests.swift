import DataStack
@testable import DataStackSync
import Foundation
import Synchronization
import Testing

/// Property-based checks of the merge, driven by seeded SplitMix64 generators:
/// every failure names its seed, and the same seed replays it.
@Suite("Sync merge properties")
struct SyncMergePropertyTests {
    static let allPolicies: [SyncMergePolicy] = [.lastWriterWins, .hubWins, .replicaWins, .resolver("mix")]

    // MARK: - (a) Order of arrival

    @Test("lastWriterWins: concurrent changes folded in any order give one object, and the effects rebuild it",
          arguments: [SyncDeletePolicy.deleteWins, .editWins])
    func arrivalOrderDoesNotMatter(delete: SyncDeletePolicy) throws {
        let merger = try SyncTestModel.merger(policy: .lastWriterWins, delete: delete)
        for seed in UInt64(0)..<300 {
            var random = SplitMix64(seed: seed)
            let object = random.uuid()
            let pool = (0..<4).map { _ in random.uuid() }
            let insert = SyncChange(objectID: object, entity: "Item", kind: .insert,
                                    values: ["name": .string("start"), "count": .integer(0)], added: ["tags": [pool[0]]],
                                    timestamp: HybridTimestamp(milliseconds: 10, counter: 0, replica: random.uuid()),
                                    localSequence: 1, baseSequence: 0)
            // Concurrent changes: each from its own replica, all made having pulled only the insert.
            var changes: [SyncChange] = []
            for _ in 0..<Int.random(in: 2...6, using: &random) {
                let timestamp = HybridTimestamp(milliseconds: Int64.random(in: 20...25, using: &random),
                                                counter: UInt32.random(in: 0...1, using: &random), replica: random.uuid())
                if Int.random(in: 0..<6, using: &random) == 0 {
                    changes.append(SyncChange(objectID: object, entity: "Item", kind: .delete, timestamp: timestamp,
                                              localSequence: 1, baseSequence: 1))
                    continue
                }
                var values: [String: SyncValue] = [:]
                if Bool.random(using: &random) { values["name"] = .string("n\(Int.random(in: 0..<5, using: &random))") }
                if Bool.random(using: &random) { values["count"] = .integer(Int64.random(in: 0..<5, using: &random)) }
                if Bool.random(using: &random) { values["owner"] = .object(pool.randomElement(using: &random)!) }
                let added: Set<UUID> = Set(pool.filter { _ in Int.random(in: 0..<3, using: &random) == 0 })
                let removed: Set<UUID> = Set(pool.filter { _ in Int.random(in: 0..<3, using: &random) == 0 }).subtracting(added)
                changes.append(SyncChange(objectID: object, entity: "Item", kind: .update, values: values,
                                          added: added.isEmpty ? [:] : ["tags": added],
                                          removed: removed.isEmpty ? [:] : ["tags": removed],
                                          timestamp: timestamp, localSequence: 1, baseSequence: 1))
            }
            // Every order of up to 4 changes (24), 24 random orders of more.
            let orders = changes.count <= 4 ? permutations(of: changes)
                : (0..<24).map { _ in changes.shuffled(using: &random) }
            var results = Set<ObjectView>()
            for order in orders {
                var state: SyncObjectState?
                var store = ObjectView.absent
                for (index, change) in ([insert] + order).enumerated() {
                    if let effect = try merger.apply(SequencedChange(sequence: Int64(index + 1), change: change), to: &state) {
                        store = store.applying(effect)
                    }
                }
                #expect(store == ObjectView(state), "seed \(seed): the effects rebuild \(store), the state is \(ObjectView(state))")
                results.insert(ObjectView(state))
            }
            #expect(results.count == 1, "seed \(seed), \(delete): \(results.count) different results: \(results)")
        }
    }

    // MARK: - (b) Three replicas converge

    @Test("three replicas editing offline, pushing and pulling in random interleavings and chunks, converge",
          arguments: allPolicies)
    func threeReplicasConverge(policy: SyncMergePolicy) throws {
        var effects: [SyncDeletePolicy: [SyncEffect.Kind: Int]] = [:]
        for seed in UInt64(0)..<120 {
            let delete: SyncDeletePolicy = seed % 2 == 0 ? .deleteWins : .editWins
            var simulation = Simulation(seed: seed, merger: try SyncTestModel.merger(policy: policy, delete: delete))
            do {
                try simulation.run(label: "seed \(seed), \(policy), \(delete)")
            } catch is SimulationFailed {
                continue  // recorded; the next seed may fail otherwise
            }
            effects[delete, default: [:]].merge(simulation.effects) { $0 + $1 }
        }
        // The simulations exercise what they claim: every kind of effect, revivals under editWins only.
        for kind in [SyncEffect.Kind.insert, .update, .delete] {
            #expect(effects[.deleteWins]?[kind] ?? 0 > 0 && effects[.editWins]?[kind] ?? 0 > 0, "no \(kind) effect: \(effects)")
        }
        #expect(effects[.editWins]?[.revive] ?? 0 > 0 && effects[.deleteWins]?[.revive] == nil, "\(effects)")
    }
}

/// Every order of `items` (Heap's algorithm).
private func permutations<T>(of items: [T]) -> [[T]] {
    var items = items
    var result: [[T]] = []
    func generate(_ count: Int) {
        guard count > 1 else {
            result.append(items)
            return
        }
        for index in 0..<count {
            generate(count - 1)
            items.swapAt(count % 2 == 0 ? index : 0, count - 1)
        }
    }
    generate(items.count)
    return result
}

/// Stops a simulation after its first failed check: later ones follow from it.
private struct SimulationFailed: Error {}

/// Records a failed check, naming the seed, and stops the simulation.
private func check(_ condition: Bool, _ message: @autoclosure () -> String,
                   sourceLocation: SourceLocation = #_sourceLocation) throws(SimulationFailed) {
    guard condition else {
        Issue.record(Comment(rawValue: message()), sourceLocation: sourceLocation)
        throw SimulationFailed()
    }
}

/// Three replicas and a hub that is an array: each replica edits its store,
/// records the change, pushes a prefix of what it has not pushed, pulls
/// chunks of the log, now and then pushes or pulls a chunk again.
private struct Simulation {
    struct SimReplica {
        let id: UUID
        let clock: HybridLogicalClock
        var states: [UUID: SyncObjectState] = [:]
        var store: [UUID: ObjectView] = [:]
        var bookmark: Int64 = 0
        var localSequence: Int64 = 0
        var unpushed: [SyncChange] = []
        var pushed: [SyncChange] = []
    }

    var random: SplitMix64
    let merger: SyncMerger
    var replicas: [SimReplica]
    var log: [SyncChange] = []
    var objects: [UUID] = []
    let tags: [UUID]
    /// The effects pulls had, by kind.
    var effects: [SyncEffect.Kind: Int] = [:]

    init(seed: UInt64, merger: SyncMerger) {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9 &+ 17)
        var replicas: [SimReplica] = []
        for offset in [0, 3, -2] as [Int64] {
            let id = random.uuid()
            replicas.append(SimReplica(id: id, clock: HybridLogicalClock(replica: id, now: Self.steppingClock(from: 1_000 + offset))))
        }
        tags = (0..<5).map { _ in random.uuid() }
        self.random = random
        self.merger = merger
        self.replicas = replicas
    }

    /// A clock that steps 1 ms per read, from `start`: replicas' clocks disagree by a few ms.
    static func steppingClock(from start: Int64) -> @Sendable () -> Int64 {
        let ticks = Mutex<Int64>(start)
        return {
            ticks.withLock { now in
                now += 1
                return now
            }
        }
    }

    mutating func run(label: String) throws {
        for _ in 0..<Int.random(in: 40...140, using: &random) {
            let index = Int.random(in: 0..<replicas.count, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6: try edit(index, label: label)
            case 6, 7: push(index, count: Int.random(in: 1...4, using: &random))
            default: try pull(index, limit: Int.random(in: 1...5, using: &random), label: label)
            }
            if Int.random(in: 0..<20, using: &random) == 0 { try pullAgain(index, label: label) }
        }
        for index in replicas.indices { push(index, count: .max) }
        for index in replicas.indices { try pull(index, limit: .max, label: label) }
        let first = replicas[0]
        for replica in replicas {
            for object in objects {
                let view = ObjectView(replica.states[object])
                try check(view == ObjectView(first.states[object]),
                          "\(label): replicas disagree on \(object): \(view) ≠ \(ObjectView(first.states[object]))")
                try check(view == (replica.store[object] ?? .absent), "\(label): a store is not its state")
                try check(replica.states[object].map { $0.effective == $0.confirmed && $0.pending.isEmpty } ?? true,
                          "\(label): pending changes left")
            }
        }
        // Every replica's confirmed folds are the same, versions included.
        for replica in replicas.dropFirst() {
            for object in objects {
                try check(replica.states[object]?.confirmed == first.states[object]?.confirmed, "\(label): confirmed folds differ")
            }
        }
    }

    /// A local save: an insert, an update of an object the store shows, or its delete.
    mutating func edit(_ index: Int, label: String) throws {
        var replica = replicas[index]
        let alive = objects.filter { replica.store[$0]?.alive == true }
        let kind: SyncChange.Kind = alive.isEmpty || Int.random(in: 0..<5, using: &random) == 0 ? .insert
            : Int.random(in: 0..<8, using: &random) == 0 ? .delete : .update
        let object = kind == .insert ? random.uuid() : alive.randomElement(using: &random)!
        var values: [String: SyncValue] = [:]
        var added: [String: Set<UUID>] = [:]
        var removed: [String: Set<UUID>] = [:]
        if kind != .delete {
            if kind == .insert || Bool.random(using: &random) { values["name"] = .string("\(Int.random(in: 0..<4, using: &random))") }
            if kind == .insert || Bool.random(using: &random) { values["count"] = .integer(Int64.random(in: 0..<4, using: &random)) }
            let present = replica.store[object]?.members["tags"] ?? []
            let add = Set(tags.filter { !present.contains($0) && Int.random(in: 0..<3, using: &random) == 0 })
            let remove = Set(present.filter { _ in Int.random(in: 0..<3, using: &random) == 0 })
            if !add.isEmpty { added["tags"] = add }
            if !remove.isEmpty { removed["tags"] = remove }
        }
        replica.localSequence += 1
        let change = SyncChange(objectID: object, entity: "Item", kind: kind, values: values, added: added, removed: removed,
                                timestamp: replica.clock.tick(), localSequence: replica.localSequence,
                                baseSequence: replica.bookmark)
        if kind == .insert { objects.append(object) }
        replica.store[object] = (replica.store[object] ?? .absent).applying(change)
        var state = replica.states[object]
        merger.recordLocal(change, in: &state)
        replica.states[object] = state
        try check(ObjectView(state) == replica.store[object]!, "\(label): a local change shows in the state as in the store")
        replica.unpushed.append(change)
        replicas[index] = replica
    }

    /// Pushes up to `count` of the replica's unpushed changes, in order; the hub keeps a change once.
    mutating func push(_ index: Int, count: Int) {
        var replica = replicas[index]
        let batch = Array(replica.unpushed.prefix(count))
        replica.unpushed.removeFirst(batch.count)
        // Now and then a push is retried whole (its answer was lost): the hub keeps each change once.
        let retried = !replica.pushed.isEmpty && Int.random(in: 0..<4, using: &random) == 0 ? [replica.pushed.last!] : []
        for change in retried + batch {
            let sequence: Int64
            if let held = log.firstIndex(where: { $0.replica == change.replica && $0.localSequence == change.localSequence }) {
                sequence = Int64(held + 1)
            } else {
                log.append(change)
                sequence = Int64(log.count)
            }
            var state = replica.states[change.objectID]
            merger.acknowledgePushed(change, sequence: sequence, in: &state)
            replica.states[change.objectID] = state
        }
        replica.pushed.append(contentsOf: batch)
        replicas[index] = replica
    }

    /// Pulls up to `limit` changes after the replica's bookmark and applies them to its store.
    mutating func pull(_ index: Int, limit: Int, label: String) throws {
        var replica = replicas[index]
        let start = Int(replica.bookmark)
        let end = min(log.count, start + min(limit, log.count))
        for position in start..<end {
            let change = log[position]
            replica.clock.receive(change.timestamp)
            var state = replica.states[change.objectID]
            if let effect = try merger.apply(SequencedChange(sequence: Int64(position + 1), change: change), to: &state) {
                effects[effect.kind, default: 0] += 1
                replica.store[change.objectID] = (replica.store[change.objectID] ?? .absent).applying(effect)
            }
            replica.states[change.objectID] = state
            try check(ObjectView(state) == (replica.store[change.objectID] ?? .absent),
                    "\(label): after change \(position + 1) the store is not the state")
            replica.bookmark = Int64(position + 1)
        }
        replicas[index] = replica
    }

    /// Applies the last chunk pulled again (a crash before the bookmark was saved): nothing changes.
    mutating func pullAgain(_ index: Int, label: String) throws {
        let replica = replicas[index]
        let start = max(0, Int(replica.bookmark) - 3)
        for position in start..<Int(replica.bookmark) {
            var state = replica.states[log[position].objectID]
            let before = state
            let effect = try merger.apply(SequencedChange(sequence: Int64(position + 1), change: log[position]), to: &state)
            try check(effect == nil && state == before, "\(label): change \(position + 1) applied again changed something")
        }
    }
}
