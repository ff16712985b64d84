import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// The history of stores Apple's apps wrote (Notes, Screen Time, knowledgeC)
/// reads back through the API as `sqlite3` shows their rows, with a model
/// derived from each store's schema (``SchemaDerivedModel``): these stores ship
/// no model file.
@Suite struct AppleStoreHistoryTests {
    /// A store Apple's Core Data wrote with history, and what the test knows of
    /// its real model beyond the schema.
    struct Store: Sendable, Testing.CustomTestStringConvertible {
        let path: String
        /// The number of transactions its SOURCE.md counts: the readings
        /// compared below must not both be empty.
        let transactions: Int
        /// The attributes its `Z_MODELCACHE` flags as kept in tombstones
        /// (`NSFlagsKey` 16), by root entity, where the schema can place them.
        var preserving: [String: Set<String>] = [:]
        var testDescription: String { (path as NSString).lastPathComponent }
    }

    static let stores: [Store] = [
        Store(path: "apple-notes-notestore/stores/NoteStore-macOS-12-Monterey.sqlite", transactions: 95),
        Store(path: "apple-notes-notestore/stores/NoteStore-macOS-15-Seqoia.sqlite", transactions: 70),
        Store(path: "apple-notes-notestore/stores/NoteStore-macOS-26-Tahoe.sqlite", transactions: 65),
        Store(path: "plaso-apple-stores/stores/ios-NoteStore.sqlite", transactions: 84),
        // InstalledApp, alone in its table, keeps four attributes: ZTOMBSTONE0…3.
        Store(path: "plaso-apple-stores/stores/ios-RMAdminStore-Local.sqlite", transactions: 939,
              preserving: ["InstalledApp": ["bundleidentifier", "installedlocally", "sortkey", "uniqueidentifier"]]),
        // Event keeps `uuid` (declared on its superentity Object) in ZTOMBSTONE0 and
        // its own `shouldSync` in ZTOMBSTONE1. The schema cannot tell that
        // `shouldSync` is Event's and not Object's, so only `uuid` is declared here.
        Store(path: "plaso-apple-stores/stores/macos-knowledgec-10.13.db", transactions: 536, preserving: ["Object": ["uuid"]]),
    ]

    /// A copy of the store, its derived model, a raw reader and a coordinator with tracking.
    struct Opened {
        let workspace: FixtureWorkspace
        let url: URL
        let derived: SchemaDerivedModel
        let raw: SQLiteReference
        let coordinator: PersistentStoreCoordinator

        init(_ store: Store, options: StoreOptions = PersistentHistoryTests.tracking()) throws {
            workspace = try FixtureWorkspace()
            url = try workspace.copyStore(store.path)
            derived = try SchemaDerivedModel(store: url, preserving: store.preserving)
            raw = try SQLiteReference(url)
            coordinator = try PersistentHistoryTests.open(url, model: derived.model, options: options)
        }
    }

    @Test(arguments: stores) func transactionsReadBackAsTheirRows(_ store: Store) throws {
        let opened = try Opened(store)
        let history = try opened.coordinator.fetchHistory(.fetchHistory(after: nil))
        // The names as the file keeps them: interned in ATRANSACTIONSTRING, or
        // (knowledgeC, macOS 10.13) inline in ATRANSACTION.
        let interned = try opened.raw.rows("SELECT count(*) FROM sqlite_master WHERE name = 'ATRANSACTIONSTRING'") == [["1"]]
        let names = interned
            ? """
              a.ZNAME, b.ZNAME, c.ZNAME, p.ZNAME FROM ATRANSACTION t LEFT JOIN ATRANSACTIONSTRING a ON a.Z_PK = t.ZAUTHORTS
              LEFT JOIN ATRANSACTIONSTRING b ON b.Z_PK = t.ZBUNDLEIDTS LEFT JOIN ATRANSACTIONSTRING c ON c.Z_PK = t.ZCONTEXTNAMETS
              LEFT JOIN ATRANSACTIONSTRING p ON p.Z_PK = t.ZPROCESSIDTS
              """
            : "t.ZAUTHOR, t.ZBUNDLEID, t.ZCONTEXTNAME, t.ZPROCESSID FROM ATRANSACTION t"
        let rows = try opened.raw.rows("SELECT t.Z_PK, t.ZTIMESTAMP, \(names) ORDER BY t.Z_PK")
        #expect(rows.count == store.transactions)
        let read = history.map { transaction -> [String?] in
            [String(transaction.transactionNumber), String(transaction.timestamp.timeIntervalSinceReferenceDate),
             transaction.author, transaction.bundleID, transaction.contextName, transaction.processID]
        }
        #expect(read == rows)

        let uuid = try #require(opened.raw.rows("SELECT Z_UUID FROM Z_METADATA").first?[0])
        #expect(history.map(\.token) == rows.compactMap { $0[0].flatMap { Int64($0) } }.map {
            PersistentHistoryToken(storeIdentifier: uuid, transactionNumber: $0)
        })
        let last = try #require(opened.raw.rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = 16002").first?[0].flatMap { Int64($0) })
        #expect(try opened.coordinator.currentPersistentHistoryToken() == PersistentHistoryToken(storeIdentifier: uuid, transactionNumber: last))
    }

    /// One change as the comparison sees it.
    struct ChangeRow: Equatable {
        let id: Int64
        let type: Int64
        let entity: String?
        let key: Int64?
        let transaction: Int64
        let updated: Set<String>?
        let tombstone: [String: String?]?
    }

    @Test(arguments: stores) func changesReadBackAsTheirRows(_ store: Store) throws {
        let opened = try Opened(store)
        let history = try opened.coordinator.fetchHistory(.fetchHistory(after: nil))
        // The inferred model has to-manys (join tables, inverses of to-ones) whose
        // names are its own, so the bits past the to-ones and attributes name
        // them in an order that is not Apple's: both sides leave them out.
        let read = history.flatMap { $0.changes ?? [] }.map { change in
            let columnBacked = Set(opened.derived.propertyOfBit[change.changedObjectID.entity.name] ?? [])
            return ChangeRow(id: change.changeID, type: change.changeType.rawValue, entity: change.changedObjectID.entity.name,
                             key: change.changedObjectID.primaryKey, transaction: change.transactionNumber,
                             updated: change.updatedProperties?.intersection(columnBacked), tombstone: change.tombstone?.mapValues(Self.text(of:)))
        }

        let tombstoneColumns = try opened.raw.rows("SELECT name FROM pragma_table_info('ACHANGE') WHERE name LIKE 'ZTOMBSTONE%' ORDER BY cid")
            .compactMap { $0[0] }
        let rows = try opened.raw.rows("""
            SELECT c.Z_PK, c.ZCHANGETYPE, k.Z_NAME, c.ZENTITYPK, c.ZTRANSACTIONID, c.ZCOLUMNS\(tombstoneColumns.map { ", c." + $0 }.joined())
            FROM ACHANGE c LEFT JOIN Z_PRIMARYKEY k ON k.Z_ENT = c.ZENTITY ORDER BY c.ZTRANSACTIONID, c.Z_PK
            """)
        let expected = try rows.map { row in
            let type = try #require(row[1].flatMap { Int64($0) })
            let entity = row[2] ?? ""
            // Inserts and deletes have no ZCOLUMNS. The bits are decoded by the
            // derived model's order; bits past it (to-many relationships, which
            // have no column) name nothing. For an entity alone in its table
            // that order is Apple's; for one that shares its table it is not
            // (the schema cannot tell which level declares a column), so there
            // the names only show that the API reads the bits the rows hold.
            let columns = row[5].flatMap { Data(base64Encoded: $0) } ?? Data()
            let preserved = opened.derived.tombstoneAttributes[entity] ?? []
            var tombstone: [String: String?]?
            if type == PersistentHistoryChange.ChangeType.delete.rawValue && !preserved.isEmpty {
                tombstone = Dictionary(uniqueKeysWithValues: preserved.enumerated().map { index, name in
                    (name, row.indices.contains(6 + index) ? row[6 + index] : nil)
                })
            }
            return ChangeRow(id: try #require(row[0].flatMap { Int64($0) }), type: type, entity: row[2], key: row[3].flatMap { Int64($0) },
                             transaction: try #require(row[4].flatMap { Int64($0) }),
                             updated: type == PersistentHistoryChange.ChangeType.update.rawValue
                                ? opened.derived.updatedProperties(of: entity, in: columns) : nil,
                             tombstone: tombstone)
        }
        #expect(read.count == expected.count)
        let mismatch = zip(read, expected).first { $0 != $1 }
        #expect(mismatch == nil, "first change that differs: the API's, then the rows'")
        // The comparison covered updates and, where the model preserves attributes, tombstones.
        #expect(expected.contains { !($0.updated ?? []).isEmpty })
        #expect(store.preserving.isEmpty || expected.contains { $0.tombstone?.values.contains { $0 != nil } ?? false })
        // Reading left the history as it was.
        #expect(try opened.raw.rows("SELECT count(*) FROM ACHANGE") == [[String(rows.count)]])
    }

    /// A tombstone value as SQLite shows it (base64 for a blob), as the raw rows give it.
    static func text(of value: PropertyValue) -> String? {
        switch value {
        case .null: nil
        case .integer(let number): String(number)
        case .double(let number): String(number)
        case .string(let text): text
        case .data(let data): data.base64EncodedString()
        default: "\(value)"
        }
    }

    /// knowledgeC (macOS 10.13) keeps its history in Core Data's older layout,
    /// its names inline and no ATRANSACTIONSTRING: it reads (above), but a
    /// save, whose transaction would have to be written in that layout, and a
    /// purge are refused, leaving the file's history as it was. Opened
    /// read-only, it reads the same.
    @Test func theOlderLayoutReadsButRefusesWrites() throws {
        let store = try #require(Self.stores.first { $0.testDescription == "macos-knowledgec-10.13.db" })
        let opened = try Opened(store)
        let counts = """
            SELECT (SELECT count(*) FROM ATRANSACTION), (SELECT count(*) FROM ACHANGE), \
            (SELECT count(*) FROM sqlite_master WHERE name = 'ATRANSACTIONSTRING')
            """
        let before = try opened.raw.rows(counts)
        #expect(before == [["536", "1115", "0"]])
        let source = try #require(opened.derived.model.entitiesByName["Source"])
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: opened.coordinator)
        let saveError = context.performAndWait {
            _ = ManagedObject(entity: source, insertInto: context)
            return context.saveReturningError()
        } as? PersistentStoreError
        #expect(saveError?.code == .readOnly)
        #expect(saveError?.message.contains("older layout (no ATRANSACTIONSTRING") == true)
        let purgeError = #expect(throws: PersistentStoreError.self) {
            try opened.coordinator.deleteHistory(.deleteHistory(before: Date.distantFuture))
        }
        #expect(purgeError?.code == .readOnly)
        #expect(try opened.raw.rows(counts) == before)

        var options = PersistentHistoryTests.tracking()
        options.isReadOnly = true
        let readOnly = try PersistentHistoryTests.open(opened.url, model: SchemaDerivedModel(store: opened.url).model, options: options)
        #expect(try readOnly.fetchHistory(.fetchHistory(after: nil)).map(\.transactionNumber)
                == opened.coordinator.fetchHistory(.fetchHistory(after: nil)).map(\.transactionNumber))
    }

    /// Where the schema fixes Core Data's `ZCOLUMNS` slots — an entity alone in
    /// its table, whose to-ones and attributes come before its to-many
    /// relationships — Apple's update rows fit the derived bit order: every
    /// row of an entity has the same length, long enough for the derived bits,
    /// and the two bits of a to-one with an entity column are set together.
    /// For an entity that shares its table the schema cannot tell which level
    /// declares a column, so nothing is asserted about its bits.
    @Test(arguments: stores) func updateRowsFitTheDerivedBitOrder(_ store: Store) throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore(store.path)
        let derived = try SchemaDerivedModel(store: url)
        let rows = try SQLiteReference(url).rows("""
            SELECT k.Z_NAME, c.ZCOLUMNS FROM ACHANGE c JOIN Z_PRIMARYKEY k ON k.Z_ENT = c.ZENTITY WHERE c.ZCHANGETYPE = 1
            """)
        var lengths: [String: Set<Int>] = [:]
        var checked = 0
        for row in rows {
            guard let entity = row[0], derived.entitiesAloneInTheirTable.contains(entity) else { continue }
            let columns = try #require(row[1].flatMap { Data(base64Encoded: $0) })
            let order = derived.propertyOfBit[entity] ?? []
            lengths[entity, default: []].insert(columns.count)
            #expect(columns.count * 8 >= order.count, "\(entity): \(columns.count) bytes for \(order.count) bits")
            func isSet(_ bit: Int) -> Bool { bit / 8 < columns.count && columns[bit / 8] & (0x80 >> (bit % 8)) != 0 }
            for bit in order.indices.dropLast() where order[bit] == order[bit + 1] {
                #expect(isSet(bit) == isSet(bit + 1), "\(entity).\(order[bit]): its key and entity bits differ")
            }
            checked += 1
        }
        #expect(lengths.values.allSatisfy { $0.count == 1 }, "\(lengths)")
        #expect(checked > 0)
    }

    /// What the reference decoded from these stores with their real models
    /// (coredata-semantics-stage2 §1.3) reads the same through the derived
    /// one where the schema fixes the order: a note body edit flags
    /// `ICNoteData.data`, a Screen Time usage update `UsageTimedItem.totalTimeInSeconds`.
    @Test(arguments: [("NoteStore-macOS-12-Monterey.sqlite", "ICNoteData", "data"),
                      ("NoteStore-macOS-15-Seqoia.sqlite", "ICNoteData", "data"),
                      ("NoteStore-macOS-26-Tahoe.sqlite", "ICNoteData", "data"),
                      ("ios-NoteStore.sqlite", "ICNoteData", "data"),
                      ("ios-RMAdminStore-Local.sqlite", "UsageTimedItem", "totaltimeinseconds")])
    func updatesNameWhatCoreDataChanged(_ file: String, _ entity: String, _ property: String) throws {
        let store = try #require(Self.stores.first { $0.testDescription == file })
        let opened = try Opened(store)
        let updates = try opened.coordinator.fetchHistory(.fetchHistory(after: nil)).flatMap { $0.changes ?? [] }
            .filter { $0.changedObjectID.entity.name == entity && $0.changeType == .update }
        #expect(!updates.isEmpty)
        #expect(updates.allSatisfy { $0.updatedProperties == [property] })
    }
}
