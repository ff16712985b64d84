import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores
@testable import DataStackStorage

/// History written by Apple's Core Data reads back through the API as its rows are.
@Suite struct PersistentHistoryFixtureTests {
    /// CoreDataPlus SampleModel2 (V1), declared from the store's schema and
    /// `Z_PRIMARYKEY` (Book 1 → GraphicNovel 2, Feedback 3, Page 4, Writer 5 → Author 6)
    /// and the model its SOURCE.md decodes from `Z_MODELCACHE`.
    static func sampleModel2() -> ManagedObjectModel {
        func attribute(_ name: String, _ type: AttributeType) -> AttributeDescription {
            AttributeDescription(name: name, type: type)
        }
        let book = EntityDescription(name: "Book", properties: [
            attribute("pagesCount", .integer64), attribute("publishedAt", .date), attribute("price", .decimal),
            attribute("title", .string), attribute("uniqueID", .uuid), attribute("cover", .binaryData),
            RelationshipDescription(name: "author", destination: "Author", inverse: "books"),
            RelationshipDescription(name: "pages", destination: "Page", inverse: "book", isToMany: true, deleteRule: .cascade),
        ])
        book.uniquenessConstraints = [["uniqueID"]]
        let novel = EntityDescription(name: "GraphicNovel", properties: [attribute("isBlackAndWhite", .boolean)])
        book.subentities = [novel]
        let feedback = EntityDescription(name: "Feedback", properties: [
            attribute("rating", .double), attribute("authorAlias", .string), attribute("comment", .string), attribute("bookID", .uuid),
        ])
        let page = EntityDescription(name: "Page", properties: [
            attribute("isBookmarked", .boolean), attribute("number", .integer32), attribute("content", .binaryData),
            RelationshipDescription(name: "book", destination: "Book", inverse: "pages"),
        ])
        let writer = EntityDescription(name: "Writer", properties: [attribute("age", .integer16)])
        writer.isAbstract = true
        let author = EntityDescription(name: "Author", properties: [
            attribute("alias", .string), attribute("siteURL", .uri),
            RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true),
        ])
        author.uniquenessConstraints = [["alias"]]
        writer.subentities = [author]
        return ManagedObjectModel(entities: [book, novel, feedback, page, writer, author])
    }

    @Test func coreDataPlusHistoryReadsBackAsItsRows() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("coredataplus-samplemodel2-programmatic/stores/SampleModel2_V1.sqlite")
        let raw = try SQLiteReference(url)
        let coordinator = try PersistentHistoryTests.open(url, model: Self.sampleModel2())
        let store = try #require(coordinator.persistentStores.first)

        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        let transactions = try raw.rows("""
            SELECT t.Z_PK, t.ZTIMESTAMP, a.ZNAME, b.ZNAME, c.ZNAME, p.ZNAME FROM ATRANSACTION t
            LEFT JOIN ATRANSACTIONSTRING a ON a.Z_PK = t.ZAUTHORTS LEFT JOIN ATRANSACTIONSTRING b ON b.Z_PK = t.ZBUNDLEIDTS
            LEFT JOIN ATRANSACTIONSTRING c ON c.Z_PK = t.ZCONTEXTNAMETS LEFT JOIN ATRANSACTIONSTRING p ON p.Z_PK = t.ZPROCESSIDTS ORDER BY t.Z_PK
            """)
        #expect(transactions == [["1", "737057647.288022", nil, "com.apple.dt.xctest.tool", nil, "xctest"]])
        func row(_ transaction: PersistentHistoryTransaction) -> [String?] {
            let number: String = String(transaction.transactionNumber)
            let stamp: String = String(transaction.timestamp.timeIntervalSinceReferenceDate)
            return [number, stamp, transaction.author, transaction.bundleID, transaction.contextName, transaction.processID]
        }
        #expect(history.map(row) == transactions)
        #expect(history.first?.token == PersistentHistoryToken(storeIdentifier: "C9CB0B35-ED6A-4042-BE5C-1B911AC00B2A", transactionNumber: 1))
        #expect(try coordinator.currentPersistentHistoryToken(fromStores: [store]) == history.first?.token)

        let changes = try raw.rows("""
            SELECT c.Z_PK, c.ZCHANGETYPE, k.Z_NAME, c.ZENTITYPK, c.ZTRANSACTIONID FROM ACHANGE c
            JOIN Z_PRIMARYKEY k ON k.Z_ENT = c.ZENTITY ORDER BY c.Z_PK
            """)
        #expect(changes.count == 5468)
        func row(_ change: PersistentHistoryChange) -> [String?] {
            let key: String? = change.changedObjectID.primaryKey.map { String($0) }
            let type: String = String(change.changeType.rawValue)
            return [String(change.changeID), type, change.changedObjectID.entity.name, key, String(change.transactionNumber)]
        }
        let read = (history.first?.changes ?? []).map(row)
        #expect(read == changes)
        // Every change names a row that is there, by the entity Core Data recorded.
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            for change in (history.first?.changes ?? []).prefix(50) {
                #expect(try context.existingObject(with: change.changedObjectID).entity === change.changedObjectID.entity)
            }
        }
        // Reading left the history as it was.
        #expect(try raw.rows("SELECT count(*) FROM ACHANGE") == [["5468"]])
    }

    @Test func theSlotRuleOfZCOLUMNSCountsToOnesThenAttributesThenToManys() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("S.sqlite")
        let tracked = try PersistentHistoryTests.open(url, model: Self.sampleModel2())
        let schema = try #require(tracked.persistentStores.first as? SQLiteStore).schema
        let layout = HistoryLayout(schema: schema)
        func names(_ entity: String) throws -> [String] {
            let mapping = try schema.mapping(for: try #require(tracked.managedObjectModel.entitiesByName[entity]))
            return try #require(layout.entities[ObjectIdentifier(mapping.entity)]).propertyOfBit
        }
        // Page.book points at Book, which has a subentity: two slots (ZBOOK and Z1_BOOK).
        #expect(try names("Page") == ["book", "book", "content", "isBookmarked", "number"])
        // GraphicNovel: Book's to-one, Book's attributes, its own, then Book's to-many.
        #expect(try names("GraphicNovel") == ["author", "cover", "pagesCount", "price", "publishedAt", "title", "uniqueID",
                                              "isBlackAndWhite", "pages"])
        #expect(try names("Author") == ["age", "alias", "siteURL", "books"])
    }
}

/// Xcode's "Preserve After Deletion" flag reaches the attribute.
@Suite struct PreservedAttributeLoadingTests {
    @Test func preserveAfterDeletionLoadsFromXcodeXML() throws {
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel"))
        let preserved = model.entities.flatMap { entity in
            entity.properties.compactMap { ($0 as? AttributeDescription)?.preservesValueInHistoryOnDeletion == true ? "\(entity.name).\($0.name)" : nil }
        }
        #expect(preserved == ["Person.id"])
    }
}
