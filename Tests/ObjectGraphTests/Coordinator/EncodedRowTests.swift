import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// A fetch of faults keeps its rows as bytes in the row cache
/// (`EncodedStoreNode`); a fault that fires from one holds exactly what a
/// fetch of values reads, for every attribute type, nulls, relationships and
/// values the SQLite file holds in another storage class than the model says.
@Suite struct EncodedRowTests {
    private let stack: TestStack
    private var store: any PersistentStore { stack.coordinator.persistentStores[0] }

    init() throws {
        stack = try TestStack(model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let box = Box(context: context)
            box.label = "crate"
            _ = Box(context: context)   // no label, no gadgets
            let full = Gadget(context: context)
            full.name = "Ünïcødé — 名前 🚀"
            full.count = -42
            full.small = .min
            full.medium = .max
            full.large = .max
            full.ratio = -.infinity
            full.weight = 0.1
            full.enabled = true
            full.created = Date(timeIntervalSinceReferenceDate: 123_456.789_012)
            full.payload = Data([0, 1, 2, 255])
            full.identifier = UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!
            full.homepage = URL(string: "https://example.com/a?b=c#d")!
            full.price = Decimal(string: "12345.5")!
            full.tags = Tags(names: ["a", "b"])
            full.nickname = ""
            full.rank = 0
            full.score = 2.5
            full.flag = false
            full.seen = Date(timeIntervalSinceReferenceDate: -1)
            full.photo = Data()
            full.token = UUID()
            full.link = URL(string: "file:///tmp/x")!
            full.cost = Decimal(0)
            full.labels = Tags(names: [])
            full.box = box
            _ = Gadget(context: context)   // every optional nil, every value its default
            try context.save()
        }
        // What another writer (or an older version of a model) may leave:
        // text that is not UTF-8, an integer column holding a real, a boolean
        // holding 2, a date and a double holding integers, a URL that is not one.
        try RawStore.execute(stack.storeURL, """
            INSERT INTO ZGADGET (Z_PK, Z_ENT, Z_OPT, ZNAME, ZCOUNT, ZENABLED, ZCREATED, ZRATIO, ZHOMEPAGE, ZLARGE, ZNICKNAME)
            VALUES (100, (SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = 'Gadget'), 3,
                    CAST(X'61FF62C3' AS TEXT), 3.75, 2, 86400, 7, 'not a url ', '12', X'6869')
            """)
    }

    private func fetch(asFaults: Bool) throws -> StoreResult {
        var fetch = StoreFetch(entity: try #require(stack.model.entitiesByName["Gadget"]))
        fetch.returnsObjectsAsFaults = asFaults
        return try store.execute(.fetch(fetch), in: nil)
    }

    @Test func theStoreAnswersAFetchOfFaultsWithRowsThatDecodeToTheValuesOfAFetchOfValues() throws {
        guard case .nodes(let nodes) = try fetch(asFaults: false) else { Issue.record("values expected"); return }
        guard case .encodedNodes(let encoded) = try fetch(asFaults: true) else { Issue.record("encoded rows expected"); return }
        #expect(nodes.count == 3)
        #expect(encoded.map(\.objectID) == nodes.map(\.objectID))
        #expect(encoded.map(\.version) == nodes.map(\.version))
        for (row, node) in zip(encoded, nodes) {
            #expect(row.values == node.values, "row \(node.objectID)")
        }
        // The raw row: repaired text, a truncated real, 2 read as true, text in an integer column.
        let raw = try #require(nodes.first { $0.objectID.primaryKey == 100 })
        let slots = stack.model.entitiesByName["Gadget"]!.propertiesByName
        #expect(raw.values[slots["name"]!.index] == .string("a\u{FFFD}b\u{FFFD}"))
        #expect(raw.values[slots["count"]!.index] == .integer(3))
        #expect(raw.values[slots["enabled"]!.index] == .bool(true))
        #expect(raw.values[slots["large"]!.index] == .integer(12))
    }

    @Test func faultsFiredFromTheRowCacheHoldWhatAFetchOfValuesReads() throws {
        let faults = stack.newContext()
        let fired: [ObjectID: ContiguousArray<PropertyValue>] = try faults.performAndWait {
            let objects = try faults.fetch(FetchRequest<Gadget>())
            #expect(objects.allSatisfy { $0.isFault })
            let before = stack.coordinator.rowCacheStatistics
            for object in objects { try object.loadValues() }
            let after = stack.coordinator.rowCacheStatistics
            #expect(after.hits - before.hits == objects.count, "every fault fired from the cache")
            #expect(after.misses == before.misses)
            return Dictionary(uniqueKeysWithValues: objects.map { ($0.objectID, $0.slots) })
        }
        let reader = stack.newContext()
        let read: [ObjectID: ContiguousArray<PropertyValue>] = try reader.performAndWait {
            var request = FetchRequest<Gadget>()
            request.returnsObjectsAsFaults = false
            return Dictionary(uniqueKeysWithValues: try reader.fetch(request).map { ($0.objectID, $0.slots) })
        }
        #expect(fired.count == 3)
        #expect(fired == read)
        // And through the typed properties, relationships included.
        try faults.performAndWait {
            let gadgets = try faults.fetch(FetchRequest<Gadget>()).filter { $0.name.hasPrefix("Ü") }
            let gadget = try #require(gadgets.first)
            #expect(gadget.box?.label == "crate")
            #expect(gadget.tags == Tags(names: ["a", "b"]))
            #expect(gadget.price == Decimal(string: "12345.5")!)
            #expect(gadget.created == Date(timeIntervalSinceReferenceDate: 123_456.789_012))
            #expect(gadget.photo == Data())
        }
    }

    @Test func aToManyFiredFromAnEncodedRowIsReadFromTheStore() throws {
        let context = stack.newContext()
        try context.performAndWait {
            let boxes = try context.fetch(FetchRequest<Box>())
            #expect(boxes.count == 2)
            let crate = try #require(boxes.first { $0.label == "crate" })
            #expect(crate.gadgets.map(\.name) == ["Ünïcødé — 名前 🚀"])
            let empty = try #require(boxes.first { $0.label == nil })
            #expect(empty.gadgets.isEmpty)
        }
    }

    /// Rows share chunks of about a kilobyte: rows that straddle a chunk's
    /// end, rows larger than a chunk, and kept values (decimals, IDs) moved
    /// with a row into the next chunk all decode as they were built.
    @Test func rowsBuiltAcrossManyChunksDecodeAsBuilt() throws {
        let entity = try #require(stack.model.entitiesByName["Gadget"])
        let identity = StoreIdentity.named("EncodedRowTests.chunks")
        let builder = EncodedStoreNode.Builder()
        var expected: [(ObjectID, Int64, ContiguousArray<PropertyValue>)] = []
        var rows: [EncodedStoreNode] = []
        for row in 0..<300 {
            let id = ObjectID(entity: entity, store: identity, primaryKey: Int64(row + 1))
            var text = String(repeating: "é", count: row % 7 == 0 ? 1_500 : row % 40)
            let data = Data(repeating: UInt8(row % 256), count: row % 5)
            var values: ContiguousArray<PropertyValue> = [.integer(Int64(row) - 150)]
            builder.appendInteger(Int64(row) - 150)
            if row % 3 == 0 {
                values.append(.decimal(Decimal(row)))
                builder.append(.decimal(Decimal(row)))
            }
            values.append(.string(text))
            text.withUTF8 { builder.appendString(utf8: UnsafeRawBufferPointer($0)) }
            values.append(.null)
            builder.appendNull()
            values.append(.double(Double(row) / 3))
            builder.appendDouble(Double(row) / 3)
            values.append(.bool(row % 2 == 0))
            builder.appendBool(row % 2 == 0)
            values.append(.date(Date(timeIntervalSinceReferenceDate: Double(row) * 1.5)))
            builder.appendDate(secondsSinceReferenceDate: Double(row) * 1.5)
            values.append(.data(data))
            data.withUnsafeBytes { builder.appendData($0) }
            if row % 4 == 0 {
                values.append(.object(id))
                builder.append(.object(id))
            }
            let version = Int64(row) * 1_000_000_007
            rows.append(builder.finish(objectID: id, version: version))
            expected.append((id, version, values))
        }
        for (row, (id, version, values)) in zip(rows, expected) {
            #expect(row.objectID == id)
            #expect(row.version == version)
            #expect(row.values == values, "row \(id)")
        }
    }
    /// The compact forms' edges: versions of no byte to eight (and negative),
    /// integers at each varint length and both extremes, text and blobs whose
    /// length takes one byte or two, a row of nothing but kept values, and
    /// an empty row — each decodes as it was built.
    @Test func everyVarintLengthVersionSizeAndEmptyRowDecodesAsBuilt() throws {
        let entity = try #require(stack.model.entitiesByName["Gadget"])
        let identity = StoreIdentity.named("EncodedRowTests.edges")
        let builder = EncodedStoreNode.Builder()
        let integers: [Int64] = [0, -1, 1, 63, -64, 64, -65, 8_191, -8_192, 8_192, .max, .min, .max - 1, .min + 1]
        let versions: [Int64] = [0, 1, 255, 256, 65_536, 1 << 40, .max, -1, .min]
        var rows: [EncodedStoreNode] = []
        var expected: [(Int64, ContiguousArray<PropertyValue>)] = []
        for (index, version) in versions.enumerated() {
            var values: ContiguousArray<PropertyValue> = []
            switch index % 3 {
            case 0:
                for integer in integers {
                    builder.appendInteger(integer)
                    values.append(.integer(integer))
                }
                for length in [0, 1, 127, 128, 129, 16_383, 16_384] {
                    let text = String(repeating: "a", count: length)
                    text.utf8.withContiguousStorageIfAvailable { builder.appendString(utf8: UnsafeRawBufferPointer($0)) }
                    values.append(.string(text))
                    let data = Data(repeating: 7, count: length)
                    data.withUnsafeBytes { builder.appendData($0) }
                    values.append(.data(data))
                }
            case 1:
                builder.append(.decimal(Decimal(index)))
                builder.append(.null)
                values += [.decimal(Decimal(index)), .null]
            default:
                break   // no values at all
            }
            let id = ObjectID(entity: entity, store: identity, primaryKey: Int64(index + 1))
            rows.append(builder.finish(objectID: id, version: version))
            expected.append((version, values))
        }
        for (row, (version, values)) in zip(rows, expected) {
            #expect(row.version == version)
            #expect(row.values == values, "row \(row.objectID), version \(version)")
            #expect(row.node.values == values && row.node.version == version)
        }
    }
    /// A row's entity and store are its chunk's: rows of other entities and
    /// stores, interleaved, each start a chunk and keep their own IDs. And
    /// a row is three words, as is the row cache's bucket holding it.
    @Test func rowsOfSeveralEntitiesAndStoresKeepTheirIDsInThreeWords() throws {
        let gadget = try #require(stack.model.entitiesByName["Gadget"])
        let box = try #require(stack.model.entitiesByName["Box"])
        let stores = [StoreIdentity.named("EncodedRowTests.one"), StoreIdentity.named("EncodedRowTests.two")]
        let builder = EncodedStoreNode.Builder()
        var rows: [EncodedStoreNode] = []
        var expected: [ObjectID] = []
        for index in 0..<40 {
            let id = ObjectID(entity: index % 3 == 0 ? box : gadget, store: stores[index / 2 % 2], primaryKey: Int64(index))
            builder.appendInteger(Int64(index))
            rows.append(builder.finish(objectID: id, version: 1))
            expected.append(id)
        }
        for (row, id) in zip(rows, expected) {
            #expect(row.objectID == id)
            #expect(row.objectID.entity === id.entity && row.objectID.store === id.store)
            #expect(row.values == [.integer(id.primaryKey ?? -1)])
        }
        #expect(MemoryLayout<EncodedStoreNode>.stride == 24)
        #expect(RowCache.rowStride == 24)
    }
}
