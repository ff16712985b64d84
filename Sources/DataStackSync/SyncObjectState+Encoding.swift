import Foundation

// The bytes of an object's sync state, which a replica keeps beside the row
// in its own SQLite table: a version byte, the object, the confirmed fold,
// the pending changes (each in ``SyncChange``'s encoding, with its sequence
// if pushed), and the effective fold when there are pending changes (with
// none it is the confirmed fold). Numbers, strings and values are written as
// in a change; dictionaries and sets in key order, so a state has one encoding.
extension SyncObjectState {
    /// The encoding's version, the first byte.
    static let encodingVersion: UInt8 = 1

    /// The state's bytes (see ``init(encoded:)``).
    public func encoded() -> [UInt8] {
        var writer = SyncByteWriter()
        writer.byte(Self.encodingVersion)
        writer.uuid(objectID)
        writer.string(entity)
        writer.signed(lastSequence)
        writer.fold(confirmed)
        writer.unsigned(UInt64(pending.count))
        for change in pending {
            let bytes = change.change.encoded()
            writer.unsigned(UInt64(bytes.count))
            for byte in bytes { writer.byte(byte) }
            writer.optionalSequence(change.sequence)
        }
        if !pending.isEmpty { writer.fold(effective) }
        return writer.bytes
    }

    /// Decodes a state from ``encoded()``'s bytes; throws ``SyncError``
    /// `.corruptChange` saying what is wrong and at which byte for bytes that are not one.
    public init(encoded bytes: some Collection<UInt8>) throws(SyncError) {
        var reader = SyncByteReader(Array(bytes), subject: "a sync object state")
        let version = try reader.byte("version")
        guard version == Self.encodingVersion else {
            throw reader.corrupt("encoding version \(version); this replica reads version \(Self.encodingVersion)")
        }
        self.init(objectID: try reader.uuid("object ID"), entity: try reader.string("entity"))
        lastSequence = try reader.signed("last sequence")
        confirmed = try reader.fold("confirmed")
        for index in 0..<(try reader.count("pending changes")) {
            let raw = try reader.raw(try reader.count("pending change \(index)"), "pending change \(index)")
            let change: SyncChange
            do {
                change = try SyncChange(encoded: raw)
            } catch {
                throw reader.corrupt("pending change \(index): \(error.message)")
            }
            pending.append(PendingChange(change: change, sequence: try reader.optionalSequence("pending change \(index)")))
        }
        effective = pending.isEmpty ? confirmed : try reader.fold("effective")
        guard reader.isAtEnd else { throw reader.corrupt("\(reader.remaining) bytes after the state") }
    }
}

extension SyncByteWriter {
    fileprivate mutating func optionalSequence(_ sequence: Int64?) {
        if let sequence {
            byte(1)
            signed(sequence)
        } else {
            byte(0)
        }
    }

    fileprivate mutating func version(_ version: SyncVersion) {
        signed(version.timestamp.milliseconds)
        unsigned(UInt64(version.timestamp.counter))
        uuid(version.timestamp.replica)
        optionalSequence(version.sequence)
        signed(version.baseSequence)
    }

    fileprivate mutating func fold(_ fold: SyncObjectState.Fold) {
        byte((fold.isKnown ? 1 : 0) | (fold.deletion != nil ? 2 : 0))
        if let deletion = fold.deletion { version(deletion) }
        unsigned(UInt64(fold.fields.count))
        for (name, field) in fold.fields.sorted(by: { $0.key < $1.key }) {
            string(name)
            value(field.value)
            version(field.version)
        }
        unsigned(UInt64(fold.members.count))
        for (name, members) in fold.members.sorted(by: { $0.key < $1.key }) {
            string(name)
            unsigned(UInt64(members.count))
            for (object, member) in members.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
                uuid(object)
                byte(member.isPresent ? 1 : 0)
                version(member.version)
            }
        }
        unsigned(UInt64(fold.lastEdits.count))
        for (replica, sequence) in fold.lastEdits.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
            uuid(replica)
            signed(sequence)
        }
    }
}

extension SyncByteReader {
    fileprivate mutating func optionalSequence(_ what: String) throws(SyncError) -> Int64? {
        switch try byte("sequence flag of \(what)") {
        case 0: return nil
        case 1: return try signed("sequence of \(what)")
        case let flag: throw corrupt("sequence flag \(flag) of \(what)")
        }
    }

    fileprivate mutating func version(_ what: String) throws(SyncError) -> SyncVersion {
        let milliseconds = try signed("timestamp of \(what)")
        let counter = try unsigned("timestamp counter of \(what)")
        guard let counter32 = UInt32(exactly: counter) else { throw corrupt("timestamp counter \(counter) of \(what)") }
        let replica = try uuid("replica of \(what)")
        let sequence = try optionalSequence(what)
        let base = try signed("base sequence of \(what)")
        return SyncVersion(timestamp: HybridTimestamp(milliseconds: milliseconds, counter: counter32, replica: replica),
                           sequence: sequence, baseSequence: base)
    }

    fileprivate mutating func fold(_ label: String) throws(SyncError) -> SyncObjectState.Fold {
        var fold = SyncObjectState.Fold()
        let flags = try byte("flags of the \(label) fold")
        guard flags < 4 else { throw corrupt("flags \(flags) of the \(label) fold") }
        fold.isKnown = flags & 1 != 0
        if flags & 2 != 0 { fold.deletion = try version("the \(label) deletion") }
        for _ in 0..<(try count("\(label) fields")) {
            let name = try string("\(label) field name")
            let value = try value(name)
            fold.fields[name] = SyncObjectState.FieldVersion(value: value, version: try version("\(label) field \(name)"))
        }
        for _ in 0..<(try count("\(label) relationships")) {
            let name = try string("\(label) relationship name")
            var members: [UUID: SyncObjectState.MemberVersion] = [:]
            for _ in 0..<(try count("\(label) members of \(name)")) {
                let object = try uuid("\(label) member of \(name)")
                let present = try byte("presence of a member of \(name)")
                guard present < 2 else { throw corrupt("presence \(present) of a member of \(name)") }
                members[object] = SyncObjectState.MemberVersion(isPresent: present == 1, version: try version("member of \(name)"))
            }
            fold.members[name] = members
        }
        for _ in 0..<(try count("\(label) editors")) {
            let replica = try uuid("\(label) editor")
            fold.lastEdits[replica] = try signed("\(label) editor's sequence")
        }
        return fold
    }
}
