import DataStack
import DataStackSync
import Foundation

/// Task `sync-bytes`: the bytes a replica pushes per changed attribute, against
/// the changed values' own size (issue #39's target: at most 2×).
///
/// The bytes are those of the chunks the hub stores and sends (`SyncCodec`:
/// the engine's model and object numbers, one chunk per push), counted by a
/// ``CountingSyncHub`` in front of the PostgreSQL hub: the engine is not
/// touched. The per-change encoding before chunks (`SyncChange.encoded()`)
/// is reported beside them, with where its bytes went. A value's own
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
        /// The bytes of the same changes one at a time (`SyncChange.encoded()`), the encoding before chunks.
        var changeBytes: Int
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
                let counts = replica.hub.counts
                guard counts.pushedChangeBytes == breakdowns.reduce(0, { $0 + $1.total }) else {
                    throw BenchError("sync-bytes: \(label): the breakdown sums to \(breakdowns.reduce(0) { $0 + $1.total }) bytes, "
                                     + "the changes encode to \(counts.pushedChangeBytes)")
                }
                rows.append(Row(label: label, changes: pushed.count, values: pushed.reduce(0) { $0 + $1.values.count },
                                bytes: counts.pushedBytes, ownBytes: breakdowns.reduce(0) { $0 + $1.ownBytes },
                                changeBytes: counts.pushedChangeBytes, breakdown: breakdowns[breakdowns.count / 2]))
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
            ["sync-bytes: pushed per change (the hub's chunks, SyncCodec)", "changes", "values", "bytes/change", "own bytes/change",
             "ratio (target ≤ 2×)", "before chunks (SyncChange.encoded()): bytes/change, ratio"],
            rows.map { row in
                let ratio = Double(row.bytes) / Double(max(row.ownBytes, 1))
                return [row.label, String(row.changes), String(row.values),
                        String(format: "%.1f", Double(row.bytes) / Double(row.changes)),
                        String(format: "%.1f", Double(row.ownBytes) / Double(row.changes)),
                        String(format: "%.2f×", ratio) + (ratio <= 2 ? " met" : " missed"),
                        String(format: "%.1f, %.2f×", Double(row.changeBytes) / Double(row.changes),
                               Double(row.changeBytes) / Double(max(row.ownBytes, 1)))]
            })
        text += "\n\n" + Report.table(
            ["one typical change before chunks, bytes", "object ID", "replica", "entity name", "version+kind+counts", "clock (ms, counter)",
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
