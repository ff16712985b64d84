import Foundation

// The chunk layout (SyncCodec's format version 1); every number is a varint
// (LEB128), "zigzag" a signed one, and every delta wraps (&-), so that any
// Int64 travels:
//
//   chunk  := version(1) headerFlags(1) replica(16) count firstLocal(zigzag)
//             firstBase(zigzag) firstMilliseconds(zigzag) firstCounter
//             [firstSequence(zigzag), when headerFlags has chunkNumbers]
//             change{count} crc32(4, little-endian, of every byte before it)
//   change := flags(1) [timestamp] [localDelta(zigzag)] [baseDelta(zigzag)]
//             entity object valueCount value{valueCount} [members members]
//
// flags: bits 0-1 the kind (insert 0, update 1, delete 2); bits 2-3 the
// timestamp: 0 the previous milliseconds and counter + 1 (nothing follows),
// 1 the previous timestamp (nothing follows), 2 milliseconds + delta and
// counter 0 (the delta follows), 3 a zigzag delta and the counter follow;
// bit 4: local sequence = the previous + 1 (else its delta follows); bit 5:
// base sequence = the previous (else its delta follows); bit 6: the object is
// named by number (a zigzag delta from the chunk's previous number), else by
// its 16 bytes — an insert always by its bytes; bit 7: to-many members follow.
// The "previous" of the first change is the header's (local: firstLocal - 1).
//
// entity: its index (model) or its name (model-free: length and UTF-8).
// value:  (propertyIndex << 4 | tag) as one varint (model) or name and a tag
//         byte (model-free), in increasing property order; then the payload:
//         integer zigzag; double and date their 8 bytes, little-endian;
//         string, decimal, URL length and UTF-8; data length and bytes; UUID
//         and object 16 bytes; objectNumber a zigzag delta from the previous
//         number; null and the Booleans nothing.
// members: for the added, then the removed: count, then per relationship its
//         index or name, the member count and each member: an odd varint
//         (zigzag delta << 1 | 1) for a number, 0 and 16 bytes for a UUID;
//         numbered members first, by number, then the others by UUID text.
//
// The previous number starts at 0, and moves to each number written — also
// to an insert's own sequence when the header has chunkNumbers (the encoder
// knew the chunk's first sequence), so that objects inserted and then
// referred to in one chunk cost a byte or two.

/// The value tags of a chunk; never renumbered.
enum SyncChunkTag: UInt8 {
    case null = 0, integer, double, boolFalse, boolTrue, string, date, data, uuid, url, decimal, object, objectNumber
}

/// The header flags of a chunk.
enum SyncChunkHeader {
    /// Names are model indexes.
    static let model: UInt8 = 1
    /// The encoder knew the chunk's first sequence (it follows the header's
    /// counter): an insert's number is its sequence from the next change on.
    static let chunkNumbers: UInt8 = 2
    static let known: UInt8 = model | chunkNumbers
}

/// The per-change flag bits of a chunk.
enum SyncChunkFlag {
    static let kindMask: UInt8 = 0b11
    static let timestampShift: UInt8 = 2
    static let nextLocal: UInt8 = 1 << 4
    static let sameBase: UInt8 = 1 << 5
    static let numberedObject: UInt8 = 1 << 6
    static let members: UInt8 = 1 << 7

    /// Timestamp modes (bits 2-3).
    static let nextTick: UInt8 = 0, sameTimestamp: UInt8 = 1, laterMillisecond: UInt8 = 2, explicitTimestamp: UInt8 = 3
}

extension SyncCodec {
    /// The chunk format's version, the first byte.
    static let chunkVersion: UInt8 = 1

    /// One push's changes — all of one replica, in push order — as one chunk.
    ///
    /// - Parameter firstSequence: the hub sequence the first change gets, when
    ///   the encoder knows it (a hub encoding under its push lock does): then
    ///   objects inserted in the chunk are named by number further on. Nil
    ///   writes them by UUID throughout.
    /// - Throws: ``SyncError`` `.notInModel` for an entity or property the
    ///   codec's model lacks; `.hubFailure` for no changes or changes of
    ///   several replicas (a hub splits those); what ``numbering`` throws.
    /// - Complexity: O(*n*) in the changes' size, plus one ``numbering`` lookup per object named.
    public func encode(_ changes: [SyncChange], firstSequence: Int64?) throws(SyncError) -> [UInt8] {
        guard let first = changes.first else {
            throw SyncError(.hubFailure, message: "a sync chunk holds at least one change; none were given")
        }
        var writer = SyncByteWriter()
        writer.byte(Self.chunkVersion)
        writer.byte((usesModel ? SyncChunkHeader.model : 0) | (firstSequence != nil ? SyncChunkHeader.chunkNumbers : 0))
        writer.uuid(first.replica)
        writer.unsigned(UInt64(changes.count))
        writer.signed(first.localSequence)
        writer.signed(first.baseSequence)
        writer.signed(first.timestamp.milliseconds)
        writer.unsigned(UInt64(first.timestamp.counter))
        if let firstSequence { writer.signed(firstSequence) }
        var state = ChunkState(first: first)
        var inChunk: [UUID: Int64] = [:]
        func number(_ id: UUID) throws(SyncError) -> Int64? {
            guard let known = try numbering?.number(of: id) ?? inChunk[id], ChunkState.travels(known) else { return nil }
            return known
        }
        for (index, change) in changes.enumerated() {
            guard change.replica == first.replica else {
                throw SyncError(.hubFailure, message: """
                    a sync chunk holds changes of one replica: change \(index) is of replica \(change.replica), the first of \(first.replica)
                    """)
            }
            let flagsAt = writer.bytes.count
            writer.byte(0)
            var flags = change.kind.rawValue
            flags |= state.writeTimestamp(change.timestamp, &writer) << SyncChunkFlag.timestampShift
            if change.localSequence == state.local &+ 1 {
                flags |= SyncChunkFlag.nextLocal
            } else {
                writer.signed(change.localSequence &- state.local)
            }
            state.local = change.localSequence
            if change.baseSequence == state.base {
                flags |= SyncChunkFlag.sameBase
            } else {
                writer.signed(change.baseSequence &- state.base)
                state.base = change.baseSequence
            }
            let entity = try writeEntity(change.entity, &writer)
            if change.kind != .insert, let known = try number(change.objectID) {
                flags |= SyncChunkFlag.numberedObject
                state.writeNumber(known, &writer)
            } else {
                writer.uuid(change.objectID)
            }
            writer.unsigned(UInt64(change.values.count))
            for (name, value) in change.values.sorted(by: { $0.key < $1.key }) {
                let tag: SyncChunkTag
                var objectNumber: Int64?
                switch value {
                case .object(let id):
                    objectNumber = try number(id)
                    tag = objectNumber == nil ? .object : .objectNumber
                default:
                    tag = Self.tag(of: value)
                }
                if let entity {
                    guard let property = propertyIndexes[entity][name] else { throw notInModel(change.entity, name) }
                    writer.unsigned(UInt64(property) << 4 | UInt64(tag.rawValue))
                } else {
                    writer.string(name)
                    writer.byte(tag.rawValue)
                }
                if let objectNumber {
                    state.writeNumber(objectNumber, &writer)
                } else {
                    Self.writePayload(value, &writer)
                }
            }
            if !change.added.isEmpty || !change.removed.isEmpty {
                flags |= SyncChunkFlag.members
                for members in [change.added, change.removed] {
                    writer.unsigned(UInt64(members.count))
                    for (name, objects) in members.sorted(by: { $0.key < $1.key }) {
                        if let entity {
                            guard let property = propertyIndexes[entity][name] else { throw notInModel(change.entity, name) }
                            writer.unsigned(UInt64(property))
                        } else {
                            writer.string(name)
                        }
                        writer.unsigned(UInt64(objects.count))
                        var numbered: [Int64] = []
                        var named: [UUID] = []
                        for object in objects {
                            if let known = try number(object) { numbered.append(known) } else { named.append(object) }
                        }
                        for known in numbered.sorted() {
                            // Both travel (below 2^60): the delta's zigzag has its top bit free for the marker.
                            writer.unsigned(UInt64(bitPattern: ChunkState.zigzag(known &- state.number)) << 1 | 1)
                            state.number = known
                        }
                        for object in named.sorted(by: { $0.uuidString < $1.uuidString }) {
                            writer.byte(0)
                            writer.uuid(object)
                        }
                    }
                }
            }
            writer.setByte(flags, at: flagsAt)
            if change.kind == .insert, let firstSequence, ChunkState.travels(firstSequence &+ Int64(index)) {
                let own = firstSequence &+ Int64(index)
                if inChunk[change.objectID] == nil { inChunk[change.objectID] = own }
                state.number = own
            }
        }
        let checksum = SyncCRC32.checksum(writer.bytes)
        for shift in stride(from: 0, to: 32, by: 8) { writer.byte(UInt8(truncatingIfNeeded: checksum >> UInt32(shift))) }
        return writer.bytes
    }

    /// Writes the entity's index (model) or name; returns the index.
    private func writeEntity(_ entity: String, _ writer: inout SyncByteWriter) throws(SyncError) -> Int? {
        guard usesModel else {
            writer.string(entity)
            return nil
        }
        guard let index = entityIndexes[entity] else {
            throw SyncError(.notInModel, message: "a change of a \(entity) cannot be encoded: the model has no entity \(entity)")
        }
        writer.unsigned(UInt64(index))
        return index
    }

    private func notInModel(_ entity: String, _ property: String) -> SyncError {
        SyncError(.notInModel, message: "a change of \(entity).\(property) cannot be encoded: the model's \(entity) has no property \(property)")
    }

    static func tag(of value: SyncValue) -> SyncChunkTag {
        switch value {
        case .null: .null
        case .integer: .integer
        case .double: .double
        case .bool(let flag): flag ? .boolTrue : .boolFalse
        case .string: .string
        case .date: .date
        case .data: .data
        case .uuid: .uuid
        case .url: .url
        case .decimal: .decimal
        case .object: .object
        }
    }

    static func writePayload(_ value: SyncValue, _ writer: inout SyncByteWriter) {
        switch value {
        case .null, .bool: break
        case .integer(let number): writer.signed(number)
        case .double(let number): writer.fixed64(number.bitPattern)
        case .string(let text), .decimal(let text): writer.string(text)
        case .date(let date): writer.fixed64(date.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let blob): writer.data(blob)
        case .uuid(let id), .object(let id): writer.uuid(id)
        case .url(let url): writer.string(url.absoluteString)
        }
    }
}

/// What a chunk's next change is written relative to; the encoder and the decoder keep the same.
struct ChunkState {
    var milliseconds: Int64
    var counter: UInt32
    var local: Int64
    var base: Int64
    var number: Int64 = 0

    init(first: SyncChange) {
        self.init(milliseconds: first.timestamp.milliseconds, counter: first.timestamp.counter,
                  local: first.localSequence &- 1, base: first.baseSequence)
    }

    init(milliseconds: Int64, counter: UInt32, local: Int64, base: Int64) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.local = local
        self.base = base
    }

    /// Numbers a chunk writes: hub sequences, from 1, far below where a delta's zigzag loses a bit.
    static func travels(_ number: Int64) -> Bool { number >= 1 && number < 1 << 60 }

    static func zigzag(_ value: Int64) -> Int64 { (value << 1) ^ (value >> 63) }

    static func unzigzag(_ raw: UInt64) -> Int64 { Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))) }

    /// Writes what the timestamp mode needs and returns the mode.
    mutating func writeTimestamp(_ timestamp: HybridTimestamp, _ writer: inout SyncByteWriter) -> UInt8 {
        defer {
            milliseconds = timestamp.milliseconds
            counter = timestamp.counter
        }
        if timestamp.milliseconds == milliseconds {
            if timestamp.counter == counter { return SyncChunkFlag.sameTimestamp }
            if counter < .max, timestamp.counter == counter + 1 { return SyncChunkFlag.nextTick }
        } else if timestamp.milliseconds > milliseconds, timestamp.counter == 0 {
            writer.unsigned(UInt64(bitPattern: timestamp.milliseconds &- milliseconds))
            return SyncChunkFlag.laterMillisecond
        }
        writer.signed(timestamp.milliseconds &- milliseconds)
        writer.unsigned(UInt64(timestamp.counter))
        return SyncChunkFlag.explicitTimestamp
    }

    mutating func writeNumber(_ value: Int64, _ writer: inout SyncByteWriter) {
        writer.signed(value &- number)
        number = value
    }
}

extension SyncByteWriter {
    /// Eight bytes, little-endian.
    mutating func fixed64(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { byte(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}
