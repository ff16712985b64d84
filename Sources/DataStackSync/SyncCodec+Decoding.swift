import Foundation

// Reading a chunk (the layout is in SyncCodec+Encoding.swift).
extension SyncCodec {
    /// The changes of a chunk that ``encode(_:firstSequence:)`` wrote, in order.
    ///
    /// - Parameters:
    ///   - firstSequence: the hub sequence of the chunk's first change (the
    ///     hub's row says it): the *i*-th change has `firstSequence + i`.
    ///   - learned: numbers learned from inserts, by number: read first when a
    ///     change names an object by number, then ``numbering``; every insert
    ///     decoded is added. One dictionary for the chunks of one pull lets a
    ///     chunk name what an earlier one inserted before anyone records it.
    /// - Throws: ``SyncError`` `.corruptChange` saying what is wrong and at
    ///   which byte: a chunk cut short, a byte changed (the CRC-32), a kind,
    ///   tag, entity or property index the format or the model lacks, a number
    ///   not known here (naming it and the change's sequence), a first sequence
    ///   other than the header's, a chunk written with a model read by
    ///   ``modelFree`` or the reverse. Never traps.
    public func decode(_ bytes: some Collection<UInt8>, firstSequence: Int64,
                       learned: inout [Int64: UUID]) throws(SyncError) -> [SyncChange] {
        let all = Array(bytes)
        var reader = SyncByteReader(all, subject: "a sync chunk")
        let version = try reader.byte("version")
        guard version == Self.chunkVersion else {
            throw reader.corrupt("chunk format version \(version); this replica reads version \(Self.chunkVersion)")
        }
        let header = try reader.byte("header flags")
        guard header & ~SyncChunkHeader.known == 0 else { throw reader.corrupt("header flags \(header)") }
        guard (header & SyncChunkHeader.model != 0) == usesModel else {
            throw reader.corrupt(usesModel
                ? "it was written without a model (names as text), and this codec reads a model's indexes"
                : "it was written with a model's indexes, and this codec has no model")
        }
        let replica = try reader.uuid("replica")
        let count = try reader.count("changes")
        guard count > 0 else { throw reader.corrupt("a chunk of no changes") }
        let firstLocal = try reader.signed("first local sequence")
        let firstBase = try reader.signed("first base sequence")
        let firstMilliseconds = try reader.signed("first timestamp")
        guard let firstCounter = UInt32(exactly: try reader.unsigned("first timestamp counter")) else {
            throw reader.corrupt("a first timestamp counter beyond 32 bits")
        }
        let chunkNumbers = header & SyncChunkHeader.chunkNumbers != 0
        if chunkNumbers {
            let written = try reader.signed("first sequence")
            guard written == firstSequence else {
                throw reader.corrupt("the chunk was written for first sequence \(written), the hub files it at \(firstSequence)")
            }
        }
        var state = ChunkState(milliseconds: firstMilliseconds, counter: firstCounter, local: firstLocal &- 1, base: firstBase)
        var changes: [SyncChange] = []
        changes.reserveCapacity(count)
        for index in 0..<count {
            let sequence = firstSequence &+ Int64(index)
            func object(_ number: Int64, _ what: String) throws(SyncError) -> UUID {
                if let known = learned[number] { return known }
                if let known = try numbering?.object(numbered: number) { return known }
                throw reader.corrupt("""
                    \(what) of the change at sequence \(sequence) is object number \(number), which is not known here \
                    (no insert at that sequence was pulled)
                    """)
            }
            let flags = try reader.byte("flags of change \(index)")
            guard let kind = SyncChange.Kind(rawValue: flags & SyncChunkFlag.kindMask) else {
                throw reader.corrupt("kind \(flags & SyncChunkFlag.kindMask) of change \(index)")
            }
            let timestamp = try state.readTimestamp((flags >> SyncChunkFlag.timestampShift) & 0b11, replica, &reader)
            state.local = flags & SyncChunkFlag.nextLocal != 0 ? state.local &+ 1 : state.local &+ (try reader.signed("local sequence"))
            if flags & SyncChunkFlag.sameBase == 0 { state.base = state.base &+ (try reader.signed("base sequence")) }
            let entity = try readEntity(&reader)
            let objectID: UUID
            if flags & SyncChunkFlag.numberedObject != 0 {
                guard kind != .insert else { throw reader.corrupt("an insert named by number (change \(index))") }
                objectID = try object(state.readNumber(&reader, "object"), "the object")
            } else {
                objectID = try reader.uuid("object ID")
            }
            var values: [String: SyncValue] = [:]
            var previous: Int?
            var previousName: String?
            for _ in 0..<(try reader.count("values")) {
                let name: String
                let tagByte: UInt8
                if let index = entity.index {
                    let packed = try reader.unsigned("property and tag")
                    let property = packed >> 4
                    tagByte = UInt8(packed & 0xF)
                    guard property < UInt64(propertyNames[index].count) else {
                        throw reader.corrupt("property index \(property) of \(entity.name), which has \(propertyNames[index].count)")
                    }
                    guard previous.map({ $0 < Int(property) }) ?? true else {
                        throw reader.corrupt("property index \(property) of \(entity.name) out of order")
                    }
                    previous = Int(property)
                    name = propertyNames[index][Int(property)]
                } else {
                    name = try reader.string("property name")
                    guard previousName.map({ $0 < name }) ?? true else { throw reader.corrupt("property \(name) out of order") }
                    previousName = name
                    tagByte = try reader.byte("value tag of \(name)")
                }
                guard let tag = SyncChunkTag(rawValue: tagByte) else { throw reader.corrupt("value tag \(tagByte) of \(name)") }
                if tag == .objectNumber {
                    values[name] = .object(try object(state.readNumber(&reader, name), name))
                } else {
                    values[name] = try Self.readPayload(tag, name, &reader)
                }
            }
            var members: [[String: Set<UUID>]] = [[:], [:]]
            if flags & SyncChunkFlag.members != 0 {
                for (side, label) in ["added", "removed"].enumerated() {
                    for _ in 0..<(try reader.count(label)) {
                        let name: String
                        if let index = entity.index {
                            let property = try reader.unsigned("relationship index")
                            guard property < UInt64(propertyNames[index].count) else {
                                throw reader.corrupt("relationship index \(property) of \(entity.name), which has \(propertyNames[index].count)")
                            }
                            name = propertyNames[index][Int(property)]
                        } else {
                            name = try reader.string("relationship name")
                        }
                        guard members[side][name] == nil else { throw reader.corrupt("\(label) \(name) twice") }
                        var objects = Set<UUID>()
                        for _ in 0..<(try reader.count("\(label) \(name)")) {
                            let raw = try reader.unsigned("member of \(name)")
                            if raw & 1 == 1 {
                                state.number = state.number &+ ChunkState.unzigzag(raw >> 1)
                                objects.insert(try object(state.number, "a member of \(name)"))
                            } else {
                                guard raw == 0 else { throw reader.corrupt("member marker \(raw) of \(name)") }
                                objects.insert(try reader.uuid("member of \(name)"))
                            }
                        }
                        members[side][name] = objects
                    }
                }
            }
            changes.append(SyncChange(objectID: objectID, entity: entity.name, kind: kind, values: values,
                                      added: members[0], removed: members[1], timestamp: timestamp,
                                      localSequence: state.local, baseSequence: state.base))
            if kind == .insert {
                if learned[sequence] == nil { learned[sequence] = objectID }
                if chunkNumbers, ChunkState.travels(sequence) { state.number = sequence }
            }
        }
        guard reader.remaining == 4 else {
            throw reader.corrupt(reader.remaining < 4 ? "it ends before its checksum" : "\(reader.remaining - 4) bytes after the changes")
        }
        let stored = try reader.raw(4, "checksum").reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard stored == SyncCRC32.checksum(all.prefix(all.count - 4)) else {
            throw reader.corrupt("its checksum does not match its bytes (a byte was damaged)")
        }
        return changes
    }

    private func readEntity(_ reader: inout SyncByteReader) throws(SyncError) -> (name: String, index: Int?) {
        guard let entityNames else { return (try reader.string("entity"), nil) }
        let index = try reader.unsigned("entity index")
        guard index < UInt64(entityNames.count) else {
            throw reader.corrupt("entity index \(index); the model has \(entityNames.count) entities")
        }
        return (entityNames[Int(index)], Int(index))
    }

    static func readPayload(_ tag: SyncChunkTag, _ name: String, _ reader: inout SyncByteReader) throws(SyncError) -> SyncValue {
        switch tag {
        case .null: return .null
        case .integer: return .integer(try reader.signed(name))
        case .double: return .double(Double(bitPattern: try reader.fixed64(name)))
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .string: return .string(try reader.string(name))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.fixed64(name))))
        case .data: return .data(Data(try reader.raw(try reader.count(name), name)))
        case .uuid: return .uuid(try reader.uuid(name))
        case .url:
            let text = try reader.string(name)
            guard let url = URL(string: text) else { throw reader.corrupt("the URL of \(name) does not parse") }
            return .url(url)
        case .decimal: return .decimal(try reader.string(name))
        case .object: return .object(try reader.uuid(name))
        case .objectNumber: throw reader.corrupt("an object number where a value was read (\(name))")
        }
    }
}

extension ChunkState {
    mutating func readTimestamp(_ mode: UInt8, _ replica: UUID, _ reader: inout SyncByteReader) throws(SyncError) -> HybridTimestamp {
        switch mode {
        case SyncChunkFlag.sameTimestamp:
            break
        case SyncChunkFlag.nextTick:
            guard counter < .max else { throw reader.corrupt("a timestamp counter beyond 32 bits") }
            counter += 1
        case SyncChunkFlag.laterMillisecond:
            milliseconds = milliseconds &+ Int64(bitPattern: try reader.unsigned("timestamp"))
            counter = 0
        default:
            milliseconds = milliseconds &+ (try reader.signed("timestamp"))
            guard let next = UInt32(exactly: try reader.unsigned("timestamp counter")) else {
                throw reader.corrupt("a timestamp counter beyond 32 bits")
            }
            counter = next
        }
        return HybridTimestamp(milliseconds: milliseconds, counter: counter, replica: replica)
    }

    mutating func readNumber(_ reader: inout SyncByteReader, _ what: String) throws(SyncError) -> Int64 {
        number = number &+ (try reader.signed("number of \(what)"))
        return number
    }
}

extension SyncByteReader {
    /// Eight bytes, little-endian.
    mutating func fixed64(_ what: String) throws(SyncError) -> UInt64 {
        try raw(8, what).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
