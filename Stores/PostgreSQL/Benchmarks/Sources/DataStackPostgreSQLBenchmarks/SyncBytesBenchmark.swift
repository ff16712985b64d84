import DataStack
import DataStackSync
import Foundation

/// Task `sync-bytes`: the bytes a replica pushes per changed attribute, against
/// the changed values' own size (issue #39's target: at most 2×).
///
/// The bytes are those of `SyncChange.encoded()` (what the hub stores and
/// sends), summed over every change pushed, counted by a ``CountingSyncHub``
/// in front of the PostgreSQL hub: the engine is not touched. A value's own
/// size is what it is in memory: 8 bytes for an integer, a double or a date, 1
/// for a Boolean, a string's UTF-8 bytes. Three kinds of save, M objects each:
/// (a) one `Double` set, (b) one 20-character `String` set, (c) inserts of the
/// six-attribute asset.
enum SyncBytesBenchmark {
    struct Row {
        var label: String
        var changes: Int
        var values: Int
        var bytes: Int
        var ownBytes: Int
        /// The same changes in the chunk layout ``Breakdown/compact(_:after:)`` estimates.
        var compactBytes: Int
        /// Where one typical change's bytes go.
        var breakdown: Breakdown
    }

    /// One change's encoded bytes by part, as `SyncChange+Encoding.swift` lays them out.
    struct Breakdown {
        var objectID = 16
        var replica = 16
        var entity = 0
        /// Version, kind, the three counts (values, added, removed).
        var fixed = 0
        var clock = 0
        var sequences = 0
        var propertyNames = 0
        var valueTags = 0
        var valueBytes = 0
        var ownBytes = 0

        var total: Int { objectID + replica + entity + fixed + clock + sequences + propertyNames + valueTags + valueBytes }

        init(_ change: SyncChange) {
            entity = Self.varint(UInt64(change.entity.utf8.count)) + change.entity.utf8.count
            fixed = 2 + Self.varint(UInt64(change.values.count)) + 2
            clock = Self.signed(change.timestamp.milliseconds) + Self.varint(UInt64(change.timestamp.counter))
            sequences = Self.signed(change.localSequence) + Self.signed(change.baseSequence)
            for (name, value) in change.values {
                propertyNames += Self.varint(UInt64(name.utf8.count)) + name.utf8.count
                valueTags += 1
                valueBytes += Self.payload(value)
                ownBytes += Self.ownSize(value)
            }
        }

        /// An estimate, not an encoding that exists: the bytes of `change` in a
        /// chunk encoding that writes once per push what every change repeats —
        /// the replica, entity and property names (an index into the model,
        /// whose version both ends share: 1 byte each), the clock and local
        /// sequence as deltas from the change before — and doubles and dates
        /// as 8 fixed bytes rather than a varint of their bit pattern. The
        /// chunk's own header (about 30 bytes) is left out: over a chunk of
        /// 500 it is under 0.1 byte a change.
        static func compact(_ change: SyncChange, after previous: SyncChange?) -> Int {
            var bytes = 16 + 1   // object ID; kind and entity index
            let milliseconds = change.timestamp.milliseconds - (previous?.timestamp.milliseconds ?? change.timestamp.milliseconds)
            bytes += signed(milliseconds) + varint(UInt64(change.timestamp.counter))
            bytes += signed(change.localSequence - (previous?.localSequence ?? change.localSequence - 1))
            bytes += signed(change.baseSequence - (previous?.baseSequence ?? change.baseSequence))
            bytes += varint(UInt64(change.values.count)) + 1   // values; the added and removed sets, one flag byte
            for value in change.values.values {
                bytes += 2   // property index, tag
                switch value {
                case .double, .date: bytes += 8
                default: bytes += payload(value)
                }
            }
            return bytes
        }

        static func varint(_ value: UInt64) -> Int {
            var value = value
            var count = 1
            while value >= 0x80 {
                value >>= 7
                count += 1
            }
            return count
        }

        static func signed(_ value: Int64) -> Int { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

        /// The encoded bytes after a value's tag.
        static func payload(_ value: SyncValue) -> Int {
            switch value {
            case .null, .bool: 0
            case .integer(let number): signed(number)
            case .double(let number): varint(number.bitPattern)
            case .date(let date): varint(date.timeIntervalSinceReferenceDate.bitPattern)
            case .string(let text), .decimal(let text): varint(UInt64(text.utf8.count)) + text.utf8.count
            case .url(let url): varint(UInt64(url.absoluteString.utf8.count)) + url.absoluteString.utf8.count
            case .data(let data): varint(UInt64(data.count)) + data.count
            case .uuid, .object: 16
            }
        }

        /// The value's own size: what it is in memory.
        static func ownSize(_ value: SyncValue) -> Int {
            switch value {
            case .null: 0
            case .bool: 1
            case .integer, .double, .date: 8
            case .string(let text), .decimal(let text): text.utf8.count
            case .url(let url): url.absoluteString.utf8.count
            case .data(let data): data.count
            case .uuid, .object: 16
            }
        }
    }

    static func run(server: BenchServer, objects: Int) async throws -> [Row] {
        let replica = try await SyncReplica(hubURL: try server.makeDatabase(), label: "bytes", keepsChanges: true)
        defer { replica.close() }
        return try await onThread("sync-bytes") {
            let symbols = (0..<objects).map { ("S\($0)", $0) }
            var rows: [Row] = []
            func measure(_ label: String, _ save: () throws -> Void) throws {
                replica.hub.reset()
                try save()
                try replica.engine.syncNow()
                let pushed = replica.hub.pushed
                guard pushed.count == objects else {
                    throw BenchError("sync-bytes: \(label): \(pushed.count) changes pushed for \(objects) objects")
                }
                // A change that carries more than what was set is reported (the "values" column), not hidden.
                let breakdowns = pushed.map(Breakdown.init)
                let bytes = replica.hub.counts.pushedBytes
                guard bytes == breakdowns.reduce(0, { $0 + $1.total }) else {
                    throw BenchError("sync-bytes: \(label): the breakdown sums to \(breakdowns.reduce(0) { $0 + $1.total }) bytes, "
                                     + "the changes encode to \(bytes)")
                }
                let compact = pushed.indices.reduce(0) { $0 + Breakdown.compact(pushed[$1], after: $1 == 0 ? nil : pushed[$1 - 1]) }
                rows.append(Row(label: label, changes: pushed.count, values: pushed.reduce(0) { $0 + $1.values.count }, bytes: bytes,
                                ownBytes: breakdowns.reduce(0) { $0 + $1.ownBytes }, compactBytes: compact,
                                breakdown: breakdowns[breakdowns.count / 2]))
            }
            // The first cycle exports the (empty) store and registers: out of the measurements.
            try replica.engine.syncNow()
            try measure("(c) insert of a 6-attribute object") { try replica.insert(symbols) }
            try measure("(a) update of one Double") {
                try replica.update("price", symbols.map { ($0.0, Double($0.1) * 1.5 + 0.25) })
            }
            try measure("(b) update of one 20-character String") {
                try replica.update("name", symbols.map { ($0.0, String(format: "Renamed asset %06d", $0.1)) })
            }
            return rows
        }
    }

    static func report(_ rows: [Row]) -> String {
        var text = Report.table(
            ["sync-bytes: pushed per change (SyncChange.encoded())", "changes", "values", "bytes/change", "own bytes/change",
             "ratio (target ≤ 2×)", "proposed chunk layout (estimate): bytes/change, ratio"],
            rows.map { row in
                let ratio = Double(row.bytes) / Double(max(row.ownBytes, 1))
                return [row.label, String(row.changes), String(row.values),
                        String(format: "%.1f", Double(row.bytes) / Double(row.changes)),
                        String(format: "%.1f", Double(row.ownBytes) / Double(row.changes)),
                        String(format: "%.2f×", ratio) + (ratio <= 2 ? " met" : " missed"),
                        String(format: "%.1f, %.2f×", Double(row.compactBytes) / Double(row.changes),
                               Double(row.compactBytes) / Double(max(row.ownBytes, 1)))]
            })
        text += "\n\n" + Report.table(
            ["one typical change, bytes", "object ID", "replica", "entity name", "version+kind+counts", "clock (ms, counter)",
             "local+base sequence", "property names", "value tags", "values", "total", "own"],
            rows.map { row in
                let b = row.breakdown
                return [row.label, String(b.objectID), String(b.replica), String(b.entity), String(b.fixed), String(b.clock),
                        String(b.sequences), String(b.propertyNames), String(b.valueTags), String(b.valueBytes), String(b.total),
                        String(b.ownBytes)]
            })
        return text
    }
}
