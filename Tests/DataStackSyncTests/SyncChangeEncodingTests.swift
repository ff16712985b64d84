import DataStackSync
import Foundation
import Testing

@Suite("Sync change encoding")
struct SyncChangeEncodingTests {
    static let replica = UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!

    static func change(values: [String: SyncValue]) -> SyncChange {
        SyncChange(objectID: UUID(), entity: "Company", kind: .update, values: values,
                   added: ["updates": [UUID(), UUID()]], removed: ["tags": [UUID()]],
                   timestamp: HybridTimestamp(milliseconds: 1_790_000_000_000, counter: 3, replica: replica),
                   localSequence: 42, baseSequence: -1)
    }

    @Test("every kind of value survives the round trip, and one change has one encoding")
    func roundTrip() throws {
        let change = Self.change(values: [
            "null": .null, "int": .integer(-5), "big": .integer(.min), "double": .double(-0.5), "no": .bool(false), "yes": .bool(true),
            "text": .string("Zürich 🏔"), "date": .date(Date(timeIntervalSinceReferenceDate: 12.25)), "blob": .data(Data([0, 255, 7])),
            "id": .uuid(UUID()), "site": .url(URL(string: "https://example.com/a?b=c")!), "price": .decimal("12.50"), "owner": .object(UUID()),
        ])
        let bytes = change.encoded()
        #expect(try SyncChange(encoded: bytes) == change)
        #expect(try SyncChange(encoded: bytes).encoded() == bytes)
    }

    @Test("every truncation of a change throws corruptChange naming the byte, never traps")
    func truncations() {
        let bytes = Self.change(values: ["name": .string("ACME"), "employees": .integer(12)]).encoded()
        for length in 0..<bytes.count {
            #expect(throws: SyncError.self) { try SyncChange(encoded: bytes.prefix(length)) }
        }
        #expect {
            try SyncChange(encoded: bytes + [0])
        } throws: { error in
            (error as? SyncError)?.code == .corruptChange && "\(error)".contains("1 bytes after the change")
        }
    }

    @Test("a wrong version, kind or value tag, and text that is not UTF-8, are named")
    func badBytes() {
        var bytes = Self.change(values: ["name": .string("ACME")]).encoded()
        var wrongVersion = bytes
        wrongVersion[0] = 9
        #expect(throws: SyncError.self) { try SyncChange(encoded: wrongVersion) }
        let huge = [UInt8(1)] + Array(repeating: UInt8(0xFF), count: 16) + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]
        #expect(throws: SyncError.self) { try SyncChange(encoded: huge) }
        // The entity name's first byte made invalid UTF-8.
        bytes[1 + 16 + 1] = 0xC3
        bytes[1 + 16 + 2] = 0x28
        #expect {
            try SyncChange(encoded: bytes)
        } throws: { error in
            "\(error)".contains("not UTF-8")
        }
    }
}
