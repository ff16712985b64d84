import DataStack
@testable import DataStackSync
import Foundation
import Testing

/// A hub that keeps only chunk bytes, as the PostgreSQL hub does: each push's
/// new changes are encoded by the pusher's codec (one chunk per run of
/// sequences), each pull decodes them with the puller's. The in-memory hub
/// under it only gives the sequences and keeps the contract (idempotence).
final class ChunkWireHub: SyncHub, @unchecked Sendable {
    // @unchecked Sendable: `chunks` and `bytes` are guarded by `lock`.
    private let base = InMemorySyncHub()
    private let lock = NSLock()
    private var chunks: [(first: Int64, count: Int, bytes: [UInt8])] = []
    private var bytes = 0

    /// The bytes of every chunk stored so far.
    var storedBytes: Int { lock.withLock { bytes } }

    func register(replica: UUID, modelVersion: String) throws -> SyncRegistration {
        try base.register(replica: replica, modelVersion: modelVersion)
    }

    func push(_ changes: [SyncChange]) throws -> [Int64] { try push(changes, encodedBy: .modelFree) }

    func push(_ changes: [SyncChange], encodedBy codec: SyncCodec) throws -> [Int64] {
        try lock.withLock {
            let stored = chunks.last.map { $0.first + Int64($0.count) - 1 } ?? 0
            let sequences = try base.push(changes)
            var run: [SyncChange] = []
            var runFirst: Int64 = 0
            func flush() throws {
                guard !run.isEmpty else { return }
                let encoded = try codec.encode(run, firstSequence: runFirst)
                chunks.append((runFirst, run.count, encoded))
                bytes += encoded.count
                run = []
            }
            for (change, sequence) in zip(changes, sequences) where sequence > stored {
                if let last = run.last, last.replica != change.replica || runFirst + Int64(run.count) != sequence { try flush() }
                if run.isEmpty { runFirst = sequence }
                run.append(change)
            }
            try flush()
            return sequences
        }
    }

    func pull(after sequence: Int64, limit: Int) throws -> [SequencedChange] {
        try pull(after: sequence, limit: limit, decodedBy: .modelFree)
    }

    func pull(after sequence: Int64, limit: Int, decodedBy codec: SyncCodec) throws -> [SequencedChange] {
        let expected = try base.pull(after: sequence, limit: limit)
        return try lock.withLock {
            var learned: [Int64: UUID] = [:]
            var pulled: [SequencedChange] = []
            for chunk in chunks where chunk.first + Int64(chunk.count) > sequence + 1 && chunk.first <= sequence + Int64(limit) {
                let changes = try codec.decode(chunk.bytes, firstSequence: chunk.first, learned: &learned)
                for (index, change) in changes.enumerated() {
                    let at = chunk.first + Int64(index)
                    if at > sequence, at <= sequence + Int64(limit) { pulled.append(SequencedChange(sequence: at, change: change)) }
                }
            }
            // What the bytes say is what the values were.
            #expect(pulled == expected)
            return pulled
        }
    }

    func acknowledge(replica: UUID, through sequence: Int64) throws {
        try base.acknowledge(replica: replica, through: sequence)
    }
}

@Suite("Sync over chunk bytes")
struct SyncChunkWireTests {
    @Test("replicas syncing through chunk bytes converge; later chunks name objects by their inserts' numbers")
    func replicasConvergeOverChunks() async throws {
        let hub = ChunkWireHub()
        let a = try await SyncEngineTests.Replica(hub: hub)
        let b = try await SyncEngineTests.Replica(hub: hub)
        try a.save { context in
            let tag = try SyncEngineTests.insert("Tag", into: context)
            try tag.setValue("blue", forKey: "label")
            for index in 0..<20 {
                let company = try SyncEngineTests.insert("Company", into: context)
                try company.setValue("Company \(index)", forKey: "name")
                try company.setValue(Set([tag]), forKey: "tags")
                let person = try SyncEngineTests.insert("Person", into: context)
                try person.setValue("Person \(index)", forKey: "name")
                try person.setValue(company, forKey: "employer")
            }
        }
        try a.engine.syncNow()
        try b.engine.syncNow()
        #expect(try b.dump() == a.dump())

        // B's updates of objects A inserted: B learned their numbers from its pull.
        let before = hub.storedBytes
        try b.save { context in
            for index in 0..<20 {
                let company = try b.object("Company", named: "Company \(index)", in: context)
                try company.setValue(Int64(index * 10), forKey: "employees")
            }
        }
        try b.engine.syncNow()
        let perUpdate = Double(hub.storedBytes - before) / 20
        // Flags, entity, object number, count, property+tag, value: about 6 bytes, not 16 for a UUID alone.
        #expect(perUpdate < 10, "\(perUpdate) bytes per update")

        // Moves, deletes and to-many removes travel by number too, and converge.
        try a.save { context in
            let person = try a.object("Person", named: "Person 3", in: context)
            try person.setValue(try a.object("Company", named: "Company 7", in: context), forKey: "employer")
        }
        try a.update("Company", named: "Company 5") { company in try company.setValue(Set<ManagedObject>(), forKey: "tags") }
        try a.save { context in context.delete(try a.object("Company", named: "Company 9", in: context)) }
        try a.engine.syncNow()
        try b.engine.syncNow()
        try a.engine.syncNow()
        #expect(try b.dump() == a.dump())
        #expect(try a.dump().contains { $0.hasPrefix("Person:Person 3 ") && $0.contains("employer=Company:Company 7") })
    }
}
