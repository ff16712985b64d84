@_spi(StoreImplementation) @testable import DataStackStorage
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// `RowReader` reads a store's rows (the PostgreSQL store's) as values or,
/// for a fetch of faults, as bytes: both hold the same values, and a row
/// that throws halfway leaves nothing behind for the next one.
@Suite struct RowReaderTests {
    /// A row as a database returns it, by column position.
    private struct Row: StoredRow {
        struct WrongType: Error {}
        var columns: [StoredValue]

        func isNull(at column: Int) -> Bool { columns[column] == .null }
        func int64(at column: Int) throws -> Int64 {
            guard case .integer(let value) = columns[column] else { throw WrongType() }
            return value
        }
        func double(at column: Int) throws -> Double {
            switch columns[column] {
            case .real(let value): return value
            case .integer(let value): return Double(value)
            default: throw WrongType()
            }
        }
        func string(at column: Int) -> String? {
            if case .text(let value) = columns[column] { return value }
            return nil
        }
        func data(at column: Int) throws -> Data? {
            if case .blob(let value) = columns[column] { return value }
            return nil
        }
    }

    private let layout: StoreLayout
    private let steps: [RowLayout.Step]
    private let entityNumber: Int64

    init() throws {
        let item = EntityDescription(name: "Item", properties: [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "count", type: .integer64),
            AttributeDescription(name: "ratio", type: .double),
            AttributeDescription(name: "seen", type: .date),
            AttributeDescription(name: "flag", type: .boolean),
            AttributeDescription(name: "link", type: .uri),
            AttributeDescription(name: "payload", type: .binaryData),
        ])
        layout = try StoreLayout(model: ManagedObjectModel(entities: [item]), configurationName: nil, dialect: .sqlite)
        let entity = try #require(layout.schema.entitiesByNumber.first { $0.value.name == "Item" })
        entityNumber = entity.key
        steps = try #require(layout.schema.mappings[ObjectIdentifier(entity.value)]?.rowLayout).steps
    }

    /// Row `key` with a value in every column its layout reads; `version` in `Z_OPT`.
    private func row(_ key: Int64, name: String?, version: StoredValue = .integer(1)) -> Row {
        var columns: [StoredValue] = [.integer(key), .integer(entityNumber), version]
        for step in steps {
            guard case .attribute(let position, let type) = step else { continue }
            while columns.count <= Int(position) { columns.append(.null) }
            columns[Int(position)] = switch type {
            case .string: name.map(StoredValue.text) ?? .null
            case .integer64: .integer(key * 1_000_003)
            case .double: .real(Double(key) / 3)
            case .date: .real(Double(key) * 86_400.5)
            case .boolean: .integer(key % 2)
            case .uri: key % 2 == 0 ? .text("https://example.com/\(key)") : .text("not a url ")
            case .binaryData: .blob(Data([UInt8(key & 0xFF), 0, 255]))
            default: .null
            }
        }
        return Row(columns: columns)
    }

    @Test("a row kept as bytes decodes to the values, ID and version node(from:) reads")
    func encodedRowsHoldTheValuesOfNodes() throws {
        var reader = layout.rowReader(storeIdentifier: "store")
        let rows = [row(1, name: "Ünïcødé 🚀"), row(2, name: nil), row(3, name: ""),
                    row(4, name: String(repeating: "longer than a chunk ", count: 80), version: .integer(.max))]
        for row in rows {
            let node = try reader.node(from: row)
            let encoded = try reader.encodedNode(from: row)
            #expect(encoded.values == node.values, "row \(node.objectID)")
            #expect(encoded.objectID == node.objectID)
            #expect(encoded.version == node.version)
        }
    }

    @Test("a row that throws after its values were appended leaves nothing in the next row")
    func aRowThatThrowsLeavesNothingBehind() throws {
        var reader = layout.rowReader(storeIdentifier: "store")
        let first = try reader.encodedNode(from: row(1, name: "first"))
        // Z_OPT is read last, after every value of the row was appended.
        #expect(throws: Row.WrongType.self) {
            try reader.encodedNode(from: row(2, name: "damaged", version: .text("one")))
        }
        let third = row(3, name: "third")
        let encoded = try reader.encodedNode(from: third)
        #expect(encoded.values == (try reader.node(from: third)).values)
        #expect(encoded.objectID.primaryKey == 3)
        #expect(first.values == (try reader.node(from: row(1, name: "first"))).values, "a row read before is as it was")
    }
}
