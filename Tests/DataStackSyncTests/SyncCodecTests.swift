import DataStack
@testable import DataStackSync
import Foundation
import Testing

/// Numbers as a test declares them.
struct FixedNumbering: SyncObjectNumbering {
    var objects: [Int64: UUID]

    func number(of object: UUID) -> Int64? { objects.filter { $0.value == object }.keys.min() }
    func object(numbered number: Int64) -> UUID? { objects[number] }
}

@Suite("Sync chunk codec")
struct SyncCodecTests {
    static let model = SyncTestModel.make()
    static let (a, b, c, d) = (UUID(), UUID(), UUID(), UUID())
    static let numbering = FixedNumbering(objects: [5: a, 100: b, 3: c, 9: a])

    static func change(_ kind: SyncChange.Kind, _ object: UUID, entity: String = "Item", local: Int64, ms: Int64 = 1_790_000_000_000,
                       counter: UInt32 = 0, base: Int64 = 40, values: [String: SyncValue] = [:],
                       added: [String: Set<UUID>] = [:], removed: [String: Set<UUID>] = [:]) -> SyncChange {
        SyncChange(objectID: object, entity: entity, kind: kind, values: values, added: added, removed: removed,
                   timestamp: HybridTimestamp(milliseconds: ms, counter: counter, replica: Replica.a),
                   localSequence: local, baseSequence: base)
    }

    static func roundTrip(_ changes: [SyncChange], _ codec: SyncCodec, firstSequence: Int64? = 1000) throws -> [UInt8] {
        let bytes = try codec.encode(changes, firstSequence: firstSequence)
        var learned: [Int64: UUID] = [:]
        #expect(try codec.decode(bytes, firstSequence: firstSequence ?? 1000, learned: &learned) == changes)
        return bytes
    }

    /// What decoding `bytes` throws, nil when it does not.
    static func failure(_ codec: SyncCodec, _ bytes: some Collection<UInt8>, firstSequence: Int64 = 1000) -> SyncError? {
        var learned: [Int64: UUID] = [:]
        do {
            _ = try codec.decode(bytes, firstSequence: firstSequence, learned: &learned)
            return nil
        } catch {
            return error
        }
    }

    static func encodeFailure(_ codec: SyncCodec, _ changes: [SyncChange]) -> SyncError? {
        do {
            _ = try codec.encode(changes, firstSequence: nil)
            return nil
        } catch {
            return error
        }
    }

    /// Every value case, every kind, clocks and sequences that step and that jump (also backwards).
    static func varied() -> [SyncChange] {
        let values: [SyncValue] = [
            .null, .integer(-5), .integer(.min), .integer(.max), .double(-0.5), .double(.infinity), .bool(false), .bool(true),
            .string("Zürich 🏔"), .string(""), .date(Date(timeIntervalSinceReferenceDate: 12.25)), .data(Data([0, 255, 7])), .data(Data()),
            .uuid(UUID()), .url(URL(string: "https://example.com/a?b=c")!), .decimal("12.50"), .object(a), .object(d),
        ]
        var changes: [SyncChange] = []
        var local: Int64 = 7
        var ms: Int64 = 1_790_000_000_000
        for (index, value) in values.enumerated() {
            let kind = SyncChange.Kind(rawValue: UInt8(index % 3))!
            // Steps: the next tick, the same timestamp, a later millisecond, a jump back; local + 1 or a jump.
            let counter = UInt32(index % 4 == 3 ? 7 : index % 4)
            ms += [0, 0, 5, -3][index % 4]
            local += index % 5 == 4 ? -2 : 1
            changes.append(change(kind, index % 2 == 0 ? b : UUID(), local: local, ms: ms, counter: counter,
                                  base: index % 3 == 0 ? 40 : Int64(index), values: ["name": value]))
        }
        return changes
    }

    @Test("every value, kind and step survives the round trip, with and without the model")
    func everyValue() throws {
        let changes = Self.varied()
        _ = try Self.roundTrip(changes, SyncCodec(model: Self.model, numbering: Self.numbering))
        _ = try Self.roundTrip(changes, SyncCodec(model: Self.model))
        _ = try Self.roundTrip(changes, .modelFree)
        _ = try Self.roundTrip(changes, .modelFree, firstSequence: nil)
        // Model-free keeps any name; a chunk has one encoding.
        let odd = [Self.change(.update, Self.a, entity: "Anything", local: 1, values: ["ünïcode": .integer(1), "a": .null])]
        let bytes = try Self.roundTrip(odd, .modelFree)
        #expect(try SyncCodec.modelFree.encode(odd, firstSequence: 1000) == bytes)
    }

    @Test("known numbers name objects (deltas up and down), unknown ones go by UUID, members added and removed")
    func numbers() throws {
        let numbered = SyncCodec(model: Self.model, numbering: Self.numbering)
        let changes = [
            Self.change(.update, Self.b, local: 1, values: ["owner": .object(Self.a)], added: ["tags": [Self.a, Self.c, Self.d]],
                        removed: ["tags": [Self.b]]),
            Self.change(.update, Self.c, local: 2, values: ["owner": .object(Self.d)], removed: ["tags": []]),
            Self.change(.delete, Self.d, local: 3),
            Self.change(.update, Self.a, entity: "Tag", local: 4, values: ["label": .string("x")]),
        ]
        let short = try Self.roundTrip(changes, numbered)
        let long = try Self.roundTrip(changes, SyncCodec(model: Self.model))
        // Five objects named by number instead of 16 bytes (b, a, a, c, c, a; d never).
        #expect(long.count - short.count >= 5 * 14)
        // A decoder that does not know a number refuses, naming it and the change's sequence.
        let error = Self.failure(SyncCodec(model: Self.model), short, firstSequence: 1000)
        #expect(error?.code == .corruptChange)
        #expect(error?.message.contains("object number 100") == true)
        #expect(error?.message.contains("sequence 1000") == true)
        #expect(error?.message.contains("at byte") == true)
    }

    @Test("objects inserted in a chunk are named by number further on, and the decoder learns them")
    func inChunkNumbers() throws {
        let (x, y) = (UUID(), UUID())
        let changes = [
            Self.change(.insert, x, local: 1, values: ["name": .string("x"), "count": .integer(1)]),
            Self.change(.insert, y, entity: "Tag", local: 2, values: ["label": .string("y")]),
            Self.change(.update, x, local: 3, values: ["owner": .object(y)], added: ["tags": [y]]),
        ]
        let codec = SyncCodec(model: Self.model)
        let bytes = try codec.encode(changes, firstSequence: 500)
        var learned: [Int64: UUID] = [:]
        #expect(try codec.decode(bytes, firstSequence: 500, learned: &learned) == changes)
        #expect(learned == [500: x, 501: y])
        #expect(try codec.encode(changes, firstSequence: nil).count - bytes.count >= 3 * 14)
        // The hub filing the chunk elsewhere than it was written for is caught.
        #expect(Self.failure(codec, bytes, firstSequence: 501)?.code == .corruptChange)
    }

    @Test("an object inserted again (sent again after a purge of history) keeps its first number; its second also names it")
    func insertedTwice() throws {
        let codec = SyncCodec(model: Self.model, numbering: FixedNumbering(objects: [5: Self.a]))
        let changes = [
            Self.change(.insert, Self.a, local: 1, values: ["name": .string("again")]),
            Self.change(.update, Self.b, local: 2, values: ["owner": .object(Self.a)]),
        ]
        let bytes = try codec.encode(changes, firstSequence: 10)
        var learned: [Int64: UUID] = [:]
        #expect(try codec.decode(bytes, firstSequence: 10, learned: &learned) == changes)
        #expect(learned == [10: Self.a])
        // The update names a by 5, its first number: a reader that knows only 10 is told which number it lacks.
        let error = Self.failure(SyncCodec(model: Self.model), bytes, firstSequence: 10)
        #expect(error?.message.contains("object number 5") == true)
        #expect(error?.message.contains("sequence 11") == true)
        // A chunk written later names it by either.
        let later = [Self.change(.update, Self.a, local: 3, values: ["count": .integer(1)])]
        let byTen = try SyncCodec(model: Self.model, numbering: FixedNumbering(objects: [10: Self.a])).encode(later, firstSequence: 20)
        #expect(try codec.decode(byTen, firstSequence: 20, learned: &learned) == later)
    }

    @Test("a chunk of one, of 500, and of two entities interleaved")
    func sizes() throws {
        let codec = SyncCodec(model: Self.model, numbering: Self.numbering)
        _ = try Self.roundTrip([Self.change(.delete, Self.a, local: 9)], codec)
        let entities = ["Item", "Tag", "SpecialItem"]
        var many: [SyncChange] = []
        for index in 0..<500 {
            let kind: SyncChange.Kind = index % 2 == 0 ? .update : .insert
            var values: [String: SyncValue] = ["count": .integer(Int64(index)), "name": .string("n")]
            if index % 3 == 1 { values = ["label": .string("t\(index)")] }
            many.append(Self.change(kind, UUID(), entity: entities[index % 3], local: Int64(index + 1), counter: UInt32(index),
                                    values: values))
        }
        let bytes = try Self.roundTrip(many, codec)
        #expect(bytes.count < 500 * 40)
    }

    @Test("a Double update costs 13 bytes of a chunk: at most 2x its own 8")
    func doubleUpdateSize() throws {
        let objects = (1...500).map { _ in UUID() }
        let numbering = FixedNumbering(objects: Dictionary(uniqueKeysWithValues: objects.enumerated().map { (Int64($0 + 1), $1) }))
        let changes = objects.enumerated().map { index, object in
            Self.change(.update, object, local: Int64(index + 1), counter: UInt32(index), values: ["count": .integer(1 << 40)])
        }
        let bytes = try Self.roundTrip(changes, SyncCodec(model: Self.model, numbering: numbering))
        // flags, entity, object, value count, property+tag, 6 value bytes: 11; the header and checksum spread over 500.
        #expect(Double(bytes.count) / 500 < 11.2)
    }

    @Test("names the model lacks are refused when encoding; changes of two replicas, or none, are not one chunk")
    func encodeRefuses() {
        let codec = SyncCodec(model: Self.model)
        let entity = Self.encodeFailure(codec, [Self.change(.update, Self.a, entity: "Nope", local: 1)])
        #expect(entity?.code == .notInModel && entity?.message.contains("Nope") == true)
        let property = Self.encodeFailure(codec, [Self.change(.update, Self.a, local: 1, values: ["nope": .null])])
        #expect(property?.code == .notInModel && property?.message.contains("Item.nope") == true)
        #expect(Self.encodeFailure(codec, [Self.change(.update, Self.a, local: 1, added: ["nope": []])])?.code == .notInModel)
        var other = Self.change(.update, Self.a, local: 2)
        other.timestamp.replica = Replica.b
        #expect(Self.encodeFailure(codec, [Self.change(.update, Self.a, local: 1), other]) != nil)
        #expect(Self.encodeFailure(codec, []) != nil)
    }

    @Test("every truncation and a damaged byte at every offset throw corruptChange saying where; nothing traps")
    func damage() throws {
        let codec = SyncCodec(model: Self.model, numbering: Self.numbering)
        var changes = Self.varied()
        changes.append(Self.change(.update, Self.b, local: 99, values: ["owner": .object(Self.a)], added: ["tags": [Self.c, Self.d]]))
        let bytes = try codec.encode(changes, firstSequence: 1000)
        func isCorrupt(_ error: SyncError?) -> Bool {
            error?.code == .corruptChange && error?.message.contains("at byte") == true
        }
        for length in 0..<bytes.count {
            #expect(isCorrupt(Self.failure(codec, bytes.prefix(length))), "cut at \(length)")
        }
        for offset in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = bytes
                damaged[offset] ^= flip
                #expect(isCorrupt(Self.failure(codec, damaged)), "byte \(offset) ^ \(flip)")
            }
        }
        #expect(isCorrupt(Self.failure(codec, bytes + [0])))
        // Written with the model, read without it (and the reverse).
        #expect(isCorrupt(Self.failure(.modelFree, bytes)))
        #expect(isCorrupt(Self.failure(codec, try SyncCodec.modelFree.encode(changes, firstSequence: 1000))))
    }

    @Test("the chunk's checksum is the standard CRC-32 (zlib's), so other tools can check a hub's rows")
    func checksumIsCRC32() {
        #expect(SyncCRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(SyncCRC32.checksum([UInt8]()) == 0)
    }

    @Test("an entity or property index beyond the reader's model is named")
    func otherModel() throws {
        // A model with one more entity (sorting last) and one more Tag property (sorting last).
        let bigger = ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [AttributeDescription(name: "name", type: .string)]),
            EntityDescription(name: "SpecialItem", properties: [AttributeDescription(name: "note", type: .string)]),
            EntityDescription(name: "Tag", properties: [AttributeDescription(name: "label", type: .string),
                                                        AttributeDescription(name: "zzz", type: .string)]),
            EntityDescription(name: "Zed", properties: [AttributeDescription(name: "z", type: .string)]),
        ])
        let writer = SyncCodec(model: bigger)
        let reader = SyncCodec(model: Self.model)
        let entity = Self.failure(reader, try writer.encode([Self.change(.update, Self.a, entity: "Zed", local: 1)], firstSequence: 1),
                                  firstSequence: 1)
        #expect(entity?.code == .corruptChange && entity?.message.contains("entity index 3") == true)
        let property = Self.failure(
            reader, try writer.encode([Self.change(.update, Self.a, entity: "Tag", local: 1, values: ["zzz": .null])], firstSequence: 1),
            firstSequence: 1)
        #expect(property?.code == .corruptChange && property?.message.contains("property index 1 of Tag") == true)
    }
}
