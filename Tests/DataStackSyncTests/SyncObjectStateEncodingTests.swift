@testable import DataStackSync
import Foundation
import Testing

@Suite("Sync object state encoding")
struct SyncObjectStateEncodingTests {
    /// A state with every part filled: fields of several kinds, members added
    /// and removed, a delete and a revival (editWins), and pending changes,
    /// one acknowledged.
    static func fullState() throws -> SyncObjectState {
        let merger = try SyncTestModel.merger(policy: .lastWriterWins, delete: .editWins)
        let object = UUID(uuidString: "30000000-0000-0000-0000-000000000001")!
        let x = UUID(uuidString: "30000000-0000-0000-0000-000000000002")!
        let y = UUID(uuidString: "30000000-0000-0000-0000-000000000003")!
        var state: SyncObjectState?
        let pulled = [
            itemChange(.insert, object, by: Replica.a, at: 100, base: 0,
                       values: ["name": .string("Zürich"), "count": .integer(-3), "owner": .object(x)], added: ["tags": [x, y]]),
            itemChange(.delete, object, by: Replica.b, at: 200, base: 1),
            itemChange(.update, object, by: Replica.c, at: 150, base: 1, values: ["count": .integer(4)], removed: ["tags": [y]]),
        ]
        for (index, change) in pulled.enumerated() {
            _ = try merger.apply(SequencedChange(sequence: Int64(index + 1), change: change), to: &state)
        }
        let first = itemChange(.update, object, by: Replica.a, at: 400, base: 3, local: 2, values: ["name": .null])
        let second = itemChange(.update, object, by: Replica.a, at: 401, base: 3, local: 3, added: ["tags": [y]])
        merger.recordLocal(first, in: &state)
        merger.recordLocal(second, in: &state)
        merger.acknowledgePushed(first, sequence: 9, in: &state)
        return try #require(state)
    }

    @Test("a state survives the round trip, pending changes and both folds included, with one encoding")
    func roundTrip() throws {
        let state = try Self.fullState()
        #expect(state.status == .alive)
        #expect(state.confirmed.lastEdits.count == 2)
        #expect(state.pending.count == 2)
        let bytes = state.encoded()
        #expect(try SyncObjectState(encoded: bytes) == state)
        #expect(try SyncObjectState(encoded: bytes).encoded() == bytes)
        // Without pending changes, the effective fold is not written: it is the confirmed one.
        var settled = state
        settled.pending = []
        settled.effective = settled.confirmed
        #expect(try SyncObjectState(encoded: settled.encoded()) == settled)
        #expect(settled.encoded().count < bytes.count)
        let empty = SyncObjectState(objectID: UUID(), entity: "Item")
        #expect(try SyncObjectState(encoded: empty.encoded()) == empty)
    }

    @Test("every truncation, a trailing byte, and damaged bytes throw corruptChange saying where, never trap")
    func damagedBytes() throws {
        let bytes = try Self.fullState().encoded()
        for length in 0..<bytes.count {
            #expect(throws: SyncError.self) { try SyncObjectState(encoded: bytes.prefix(length)) }
        }
        #expect {
            try SyncObjectState(encoded: bytes + [0])
        } throws: { error in
            (error as? SyncError)?.code == .corruptChange && "\(error)".contains("a sync object state does not decode")
                && "\(error)".contains("1 bytes after the state")
        }
        var wrongVersion = bytes
        wrongVersion[0] = 2
        #expect {
            try SyncObjectState(encoded: wrongVersion)
        } throws: { error in
            "\(error)".contains("encoding version 2") && "\(error)".contains("at byte 1")
        }
        // Every single byte flipped: decodes to something or throws, never traps.
        for index in bytes.indices {
            var flipped = bytes
            flipped[index] ^= 0xFF
            _ = try? SyncObjectState(encoded: flipped)  // either outcome is fine; a trap fails the run
        }
    }
}
