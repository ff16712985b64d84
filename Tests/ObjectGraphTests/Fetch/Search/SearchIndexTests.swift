@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStores
import Foundation
@testable import ObjectGraph
import Testing

/// The SQLite store's full-text indexes (TableLayout+Search.swift): built with
/// the store, kept in step by saves, batch requests and migrations in their
/// transactions, rebuilt on request, refused when a read-only file lacks them;
/// and `MATCHES[search]` and relevance sorts answering alike from SQL, from
/// unsaved objects and from the in-memory store.
@Suite struct SearchIndexTests {
    /// Document (title: indexed) with subentity Memo (body: indexed), and Author,
    /// whose name is not indexed; both documents' indexed columns share one index.
    static func model(indexing: Set<String> = ["title", "body"], extra: [PropertyDescription] = []) -> ManagedObjectModel {
        let title = AttributeDescription(name: "title", type: .string)
        title.isIndexedBySpotlight = indexing.contains("title")
        let pages = AttributeDescription(name: "pages", type: .integer32)
        pages.isIndexedBySpotlight = true   // not a String: kept, indexes nothing
        let document = EntityDescription(name: "Document", properties: [
            title, pages, RelationshipDescription(name: "author", destination: "Author", inverse: "documents"),
        ] + extra)
        let body = AttributeDescription(name: "body", type: .string)
        body.isIndexedBySpotlight = indexing.contains("body")
        let memo = EntityDescription(name: "Memo", properties: [body])
        document.subentities = [memo]
        let bio = AttributeDescription(name: "bio", type: .string)
        bio.isIndexedBySpotlight = true
        let author = EntityDescription(name: "Author", properties: [
            AttributeDescription(name: "name", type: .string), bio,
            RelationshipDescription(name: "documents", destination: "Document", inverse: "author", isToMany: true),
        ])
        return ManagedObjectModel(entities: [document, memo, author])
    }

    @Test func anEntitySaysWhichAttributesItsSearchReads() throws {
        func names(_ entity: String, in model: ManagedObjectModel = Self.model()) throws -> [String] {
            try #require(model.entitiesByName[entity]).searchIndexedAttributes.map(\.name)
        }
        #expect(try names("Document") == ["title"], "pages is marked, but is not a String")
        #expect(try names("Memo") == ["title", "body"], "inherited ones first")
        #expect(try names("Author") == ["bio"])
        #expect(try names("Memo", in: Self.model(indexing: ["body"])) == ["body"])
    }

    /// A store of `model` in `directory` with a few documents and memos saved.
    struct Library {
        let coordinator: PersistentStoreCoordinator
        let url: URL

        init(_ directory: TemporaryDirectory, model: ManagedObjectModel = SearchIndexTests.model(),
             type: StoreType = .sqlite, options: StoreOptions = StoreOptions()) throws {
            url = directory.file("Library.sqlite")
            coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: type, at: type == .inMemory ? nil : url, options: options)
        }

        var context: ManagedObjectContext { ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator) }

        @discardableResult
        func insert(_ entity: String, _ values: [String: Any?], in context: ManagedObjectContext) throws -> ManagedObject {
            let object = ManagedObject(entity: coordinator.managedObjectModel.entitiesByName[entity]!, insertInto: context)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }

        func seed() throws {
            let context = self.context
            try context.performAndWait {
                let ada = try insert("Author", ["name": "Ada Lovelace", "bio": "Mathematician, first programmer"], in: context)
                try insert("Document", ["title": "Notes on the Analytical Engine", "author": ada], in: context)
                try insert("Document", ["title": "Café au lait recipes"], in: context)
                try insert("Memo", ["title": "Shopping", "body": "apples, pears and CAFÉ beans"], in: context)
                try insert("Memo", ["title": "Engine repair", "body": nil], in: context)
                try context.save()
            }
        }

        /// The titles of `entity` objects matching the format, sorted, read from a fresh context.
        func titles(_ format: String, _ arguments: Any?..., entity: String = "Document",
                    sorts: [FetchSort] = [FetchSort(key: "title")]) throws -> [String] {
            let context = self.context
            return try context.performAndWait {
                var request = FetchRequest<ManagedObject>(entityName: entity)
                request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
                request.sortDescriptors = sorts
                return try context.fetch(request).map { try $0.value(forKey: "title") as? String ?? "-" }
            }
        }

        /// The SQL the store runs (and, as `-- …` lines, what its triggers and FTS5 run) during `body`, on a fresh context.
        func statements(during body: (ManagedObjectContext) throws -> Void) throws -> [String] {
            let store = try #require(coordinator.persistentStores.first as? SQLiteStore)
            let log = FRCStatementLog()
            store.traceStatements { log.append($0) }
            defer { store.traceStatements(nil) }
            let context = self.context
            try context.performAndWait { try body(context) }
            return log.statements
        }

        /// FTS5's own check that the index holds exactly what the table's rows say.
        func checkIndexIntegrity() throws {
            let connection = try Connection(path: url.path)
            try connection.execute("INSERT INTO DS_SEARCH_ZDOCUMENT (DS_SEARCH_ZDOCUMENT, rank) VALUES ('integrity-check', 1)")
        }
    }

    // MARK: - Layout

    @Test func aNewStoreHasOneExternalContentIndexPerTableWithItsTriggers() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let connection = try Connection(path: library.url.path)
        let objects = try connection.prepare("""
            SELECT type, name FROM sqlite_master WHERE name LIKE 'DS%' AND (type = 'trigger' OR sql LIKE 'CREATE VIRTUAL%') ORDER BY name
            """)
        var names: [String] = []
        while try objects.step() { names.append("\(objects.string(at: 0)!) \(objects.string(at: 1)!)") }
        #expect(names == ["table DS_SEARCH_ZAUTHOR", "trigger DS_SEARCH_ZAUTHOR_DELETE", "trigger DS_SEARCH_ZAUTHOR_INSERT",
                          "trigger DS_SEARCH_ZAUTHOR_UPDATE", "table DS_SEARCH_ZDOCUMENT", "trigger DS_SEARCH_ZDOCUMENT_DELETE",
                          "trigger DS_SEARCH_ZDOCUMENT_INSERT", "trigger DS_SEARCH_ZDOCUMENT_UPDATE"])
        let columns = try connection.columns(in: "DS_SEARCH_ZDOCUMENT").map(\.name)
        #expect(columns == ["ZTITLE", "ZBODY"])
        // External content: no copy of the texts.
        #expect(try connection.tableExists("DS_SEARCH_ZDOCUMENT_content") == false)
        try library.checkIndexIntegrity()
    }

    // MARK: - Kept in step

    @Test func savesInsertUpdateAndDeleteKeepTheIndexInStep() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        #expect(try library.titles("title MATCHES[search] 'engine'") == ["Engine repair", "Notes on the Analytical Engine"])
        #expect(try library.titles("title MATCHES[search] 'CAFE'") == ["Café au lait recipes"])
        #expect(try library.titles("body MATCHES[search] 'café'", entity: "Memo") == ["Shopping"])

        let context = library.context
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.predicate = try FetchPredicate(format: "title MATCHES[search] 'analytical'")
            let notes = try #require(try context.fetch(request).first)
            try notes.setValue("Sketch of the Difference Engine", forKey: "title")
            request.predicate = try FetchPredicate(format: "title MATCHES[search] 'shopping'")
            context.delete(try #require(try context.fetch(request).first))
            try context.save()
        }
        #expect(try library.titles("title MATCHES[search] 'analytical'").isEmpty)
        #expect(try library.titles("title MATCHES[search] 'difference'") == ["Sketch of the Difference Engine"])
        #expect(try library.titles("body MATCHES[search] 'pears'", entity: "Memo").isEmpty)
        try library.checkIndexIntegrity()
    }

    /// FTS5 writes its pending entries out at each statement that touches it, so
    /// a save indexes in one statement per table, whatever its size, with the
    /// triggers standing aside; the flag that sets them aside is down again
    /// when the save commits.
    @Test func aSaveIndexesInBulkWithoutTheTriggers() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let log = try library.statements { context in
            for number in 0..<200 { try library.insert("Memo", ["title": "Bulk \(number)", "body": "engine"], in: context) }
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.predicate = try FetchPredicate(format: "title == 'Shopping'")
            try #require(try context.fetch(request).first).setValue("Shopping list", forKey: "title")
            try context.save()
        }
        // The store's statements: flag up, index the 200 inserted rows, flag down; the renamed
        // row goes through the update trigger, which fires for changed indexed values only.
        let statements = log.filter { $0.contains("DS_SEARCH") && !$0.hasPrefix("--") }
        #expect(statements.count == 3, "\(statements)")
        // The insert trigger ran its WHEN only: FTS5 wrote the bulk's segment and the rename's, not one per row.
        let segments = log.filter { $0.contains("DS_SEARCH_ZDOCUMENT_idx'(segid") }
        #expect(segments.count <= 3, "\(segments.count) segments written")
        #expect(try library.titles("body MATCHES[search] 'engine'", entity: "Memo").count == 200)
        #expect(try library.titles("title MATCHES[search] 'list'") == ["Shopping list"])
        try library.checkIndexIntegrity()
        let connection = try Connection(path: library.url.path)
        let flag = try connection.prepare("SELECT ZBULK FROM DS_SEARCH_WRITER")
        #expect(try flag.step() && flag.int64(at: 0) == 0)
    }

    /// A save rewrites every column of an updated row; the index only hears of
    /// rows whose indexed values changed.
    @Test func updatingAttributesThatAreNotIndexedLeavesTheIndexAlone() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let log = try library.statements { context in
            for document in try context.fetch(FetchRequest<ManagedObject>(entityName: "Document")) {
                try document.setValue(42, forKey: "pages")
            }
            try context.save()
        }
        #expect(log.contains { $0.hasPrefix("UPDATE ZDOCUMENT") })
        #expect(!log.contains { $0.contains("DS_SEARCH_ZDOCUMENT_idx") || $0.contains("DS_SEARCH_ZDOCUMENT_data") })
        try library.checkIndexIntegrity()
    }

    /// Any other program writing the file goes through the triggers.
    @Test func anotherProgramsWritesAreIndexedByTheTriggers() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let connection = try Connection(path: library.url.path)
        try connection.execute("UPDATE ZDOCUMENT SET ZTITLE = 'Outside rename' WHERE ZTITLE = 'Shopping'")
        try connection.execute("DELETE FROM ZDOCUMENT WHERE ZTITLE = 'Engine repair'")
        try connection.execute("""
            INSERT INTO ZDOCUMENT (Z_PK, Z_ENT, Z_OPT, ZTITLE)
            SELECT 1000, Z_ENT, 1, 'Outside engine' FROM Z_PRIMARYKEY WHERE Z_NAME = 'Document'
            """)
        try library.checkIndexIntegrity()
        #expect(try library.titles("title MATCHES[search] 'outside'") == ["Outside engine", "Outside rename"])
        #expect(try library.titles("title MATCHES[search] 'engine'") == ["Notes on the Analytical Engine", "Outside engine"])
    }

    @Test func aRolledBackContextAndAFailedSaveLeaveTheIndexAsItWas() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let context = library.context
        try context.performAndWait {
            try library.insert("Document", ["title": "Unsaved engine"], in: context)
            context.rollback()
            try context.save()
        }
        #expect(try library.titles("title MATCHES[search] 'unsaved'").isEmpty)

        // A save that fails in the store: its rows and their index entries go together.
        let connection = try Connection(path: library.url.path)
        try connection.execute("CREATE TRIGGER refuse BEFORE INSERT ON ZDOCUMENT WHEN new.ZTITLE = 'refused' BEGIN SELECT RAISE(ABORT, 'no'); END")
        #expect(throws: (any Error).self) {
            try context.performAndWait {
                try library.insert("Document", ["title": "Indexed first engine"], in: context)
                try library.insert("Document", ["title": "refused"], in: context)
                try context.save()
            }
        }
        #expect(try library.titles("title MATCHES[search] 'indexed'").isEmpty)
        try library.checkIndexIntegrity()
    }

    @Test func batchInsertsUpdatesAndDeletesKeepTheIndexInStep() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let context = library.context
        try context.performAndWait {
            try context.execute(BatchInsertRequest(entityName: "Document", objects: [
                ["title": "Batch engine one"], ["title": "Batch two"],
            ]))
            try context.execute(BatchUpdateRequest(entityName: "Document", predicate: try FetchPredicate(format: "title == 'Batch two'"),
                                                   propertiesToUpdate: ["title": "Batch renamed"]))
            try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(
                entityName: "Document", predicate: try FetchPredicate(format: "title BEGINSWITH 'Café'"))))
        }
        #expect(try library.titles("title MATCHES[search] 'batch'") == ["Batch engine one", "Batch renamed"])
        #expect(try library.titles("title MATCHES[search] 'two'").isEmpty)
        #expect(try library.titles("title MATCHES[search] 'lait'").isEmpty)
        try library.checkIndexIntegrity()
    }

    @Test func anUpsertingBatchInsertReindexesTheRowsItUpdates() throws {
        let directory = TemporaryDirectory()
        let model = Self.model()
        model.entitiesByName["Author"]!.uniquenessConstraints = [["name"]]
        let library = try Library(directory, model: model)
        try library.seed()
        let context = library.context
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Author", objects: [
                ["name": "Ada Lovelace", "bio": "Countess and poet's daughter"], ["name": "Charles Babbage", "bio": "Inventor"],
            ]))
            var request = FetchRequest<ManagedObject>(entityName: "Author")
            request.sortDescriptors = [FetchSort(key: "name")]
            func names(_ query: String) throws -> [String] {
                request.predicate = try FetchPredicate(format: "bio MATCHES[search] %@", query)
                return try context.fetch(request).map { try $0.value(forKey: "name") as? String ?? "-" }
            }
            #expect(try names("countess OR inventor") == ["Ada Lovelace", "Charles Babbage"])
            #expect(try names("mathematician").isEmpty)
        }
        let connection = try Connection(path: library.url.path)
        try connection.execute("INSERT INTO DS_SEARCH_ZAUTHOR (DS_SEARCH_ZAUTHOR, rank) VALUES ('integrity-check', 1)")
    }

    @Test func destroyingAStoreWithAnIndexLeavesRoomForANewOne() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        try library.coordinator.destroyPersistentStore(at: library.url)
        let fresh = try Library(directory)
        #expect(try fresh.titles("title MATCHES[search] 'engine'").isEmpty)
        try fresh.seed()
        #expect(try fresh.titles("title MATCHES[search] 'engine'") == ["Engine repair", "Notes on the Analytical Engine"])
        try fresh.checkIndexIntegrity()
    }

    @Test func aMigrationIndexesTheMigratedRowsInItsTransaction() throws {
        let directory = TemporaryDirectory()
        try Library(directory).seed()
        // Version 2 adds an indexed attribute: the tables are rebuilt, and the index with them.
        let subtitle = AttributeDescription(name: "subtitle", type: .string)
        subtitle.isIndexedBySpotlight = true
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        let migrated = try Library(directory, model: Self.model(extra: [subtitle]), options: options)
        #expect(try migrated.titles("title MATCHES[search] 'engine'") == ["Engine repair", "Notes on the Analytical Engine"])
        let context = migrated.context
        try context.performAndWait {
            try migrated.insert("Document", ["title": "Second", "subtitle": "a migrated engine"], in: context)
            try context.save()
        }
        #expect(try migrated.titles("subtitle MATCHES[search] 'migrated'") == ["Second"])
        #expect(try migrated.titles("SELF MATCHES[search] 'engine'")
                == ["Engine repair", "Notes on the Analytical Engine", "Second"])
        try migrated.checkIndexIntegrity()
    }

    @Test func turningTheFlagOnOrOffNeedsNoMigrationAndTheIndexFollows() throws {
        let directory = TemporaryDirectory()
        try Library(directory, model: Self.model(indexing: [])).seed()
        #expect(try Connection(path: directory.file("Library.sqlite").path).tableExists("DS_SEARCH_ZDOCUMENT") == false)

        let indexed = try Library(directory, model: Self.model(indexing: ["body"]))
        #expect(try indexed.titles("body MATCHES[search] 'beans'", entity: "Memo") == ["Shopping"])
        #expect(throws: FetchPredicateError.self) { try indexed.titles("title MATCHES[search] 'engine'") }
        try indexed.coordinator.persistentStores.forEach { try indexed.coordinator.remove($0) }

        let both = try Library(directory)
        #expect(try both.titles("title MATCHES[search] 'engine'") == ["Engine repair", "Notes on the Analytical Engine"])
        try both.checkIndexIntegrity()
        try both.coordinator.persistentStores.forEach { try both.coordinator.remove($0) }

        _ = try Library(directory, model: Self.model(indexing: []))
        #expect(try Connection(path: directory.file("Library.sqlite").path).tableExists("DS_SEARCH_ZDOCUMENT") == false)
    }

    // MARK: - Read-only files and rebuilding

    @Test func aReadOnlyStoreWithoutItsIndexRefusesSearchesAndSaysWhy() throws {
        let directory = TemporaryDirectory()
        try Library(directory, model: Self.model(indexing: [])).seed()
        var options = StoreOptions()
        options.isReadOnly = true
        let library = try Library(directory, options: options)
        let error = try #require(throws: FetchPredicateError.self) { try library.titles("title MATCHES[search] 'engine'") }
        #expect("\(error)".contains("read-only"), "\(error)")
        // Other fetches still work.
        #expect(try library.titles("title CONTAINS[c] 'engine'") == ["Engine repair", "Notes on the Analytical Engine"])
        let store = try #require(library.coordinator.persistentStores.first as? SQLiteStore)
        #expect(throws: PersistentStoreError.self) { try store.rebuildSearchIndex() }
    }

    @Test func rebuildingRepairsAnIndexWrittenPastItsTriggers() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        // Another program writes without the triggers: the index no longer says what the rows say.
        let connection = try Connection(path: library.url.path)
        try connection.execute("DROP TRIGGER DS_SEARCH_ZDOCUMENT_UPDATE")
        try connection.execute("UPDATE ZDOCUMENT SET ZTITLE = 'Rewritten outside' WHERE ZTITLE = 'Shopping'")
        #expect(throws: (any Error).self) { try library.checkIndexIntegrity() }

        let store = try #require(library.coordinator.persistentStores.first as? SQLiteStore)
        try store.rebuildSearchIndex()
        try library.checkIndexIntegrity()
        #expect(try library.titles("title MATCHES[search] 'outside'") == ["Rewritten outside"])
        #expect(try library.titles("title MATCHES[search] 'shopping'").isEmpty)
        // The trigger is back: the next write keeps the index in step again.
        try connection.execute("UPDATE ZDOCUMENT SET ZTITLE = 'Shopping' WHERE ZTITLE = 'Rewritten outside'")
        try library.checkIndexIntegrity()
    }

    @Test func aStoreWrittenByCoreDataGetsItsIndexWhenOpenedForWriting() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("plaso-apple-stores/stores/ios-NoteStore.sqlite")
        let coordinator = try PersistentStoreCoordinator(openingStoreWithItsCachedModelAt: url, readOnly: false)
        // The model Core Data cached in the file already marks attributes for Spotlight.
        let indexed = coordinator.managedObjectModel.entities.flatMap { entity in
            entity.searchIndexedAttributes.filter { $0.entity === entity }
        }
        try #require(!indexed.isEmpty)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            // The first indexed attribute with a word in it, and that word.
            var choice: (AttributeDescription, [String], String)?
            for attribute in indexed where choice == nil {
                var all = FetchRequest<ManagedObject>(entityName: attribute.entity!.name)
                all.includesSubentities = false
                let texts = try context.fetch(all).compactMap { try $0.value(forKey: attribute.name) as? String }
                if let word = texts.lazy.flatMap({ SearchTokenizer.tokens(in: $0).map(\.folded) }).first {
                    choice = (attribute, texts, word)
                }
            }
            let (attribute, texts, word) = try #require(choice)
            let entity = try #require(attribute.entity)
            var all = FetchRequest<ManagedObject>(entityName: entity.name)
            all.includesSubentities = false
            var search = all
            search.predicate = try FetchPredicate(format: "%K MATCHES[search] %@", attribute.name, word)
            let found = try context.fetch(search).count
            let query = try SearchQuery(word)
            let expected = texts.filter { query.matches([$0]) }.count
            #expect(found == expected && found > 0, "\(entity.name).\(attribute.name) '\(word)': \(found) of \(expected)")
        }
    }

    // MARK: - Unsaved objects, the in-memory store and relevance

    @Test(arguments: [StoreType.sqlite, .inMemory])
    func unsavedObjectsAndTheInMemoryStoreMatchAsTheIndexDoes(type: StoreType) throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory, type: type)
        try library.seed()
        let context = library.context
        try context.performAndWait {
            try library.insert("Memo", ["title": "Unsaved", "body": "more café ENGINES"], in: context)
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.sortDescriptors = [FetchSort(key: "title")]
            func titles(_ format: String) throws -> [String] {
                request.predicate = try FetchPredicate(format: format)
                return try context.fetch(request).map { try $0.value(forKey: "title") as? String ?? "-" }
            }
            #expect(try titles("SELF MATCHES[search] 'cafe'") == ["Café au lait recipes", "Shopping", "Unsaved"])
            #expect(try titles("SELF MATCHES[search] 'engine*' AND NOT title MATCHES[search] 'notes'") == ["Engine repair", "Unsaved"])
            #expect(try titles("author.bio MATCHES[search] 'mathematician'") == ["Notes on the Analytical Engine"])
            #expect(try titles("NOT author.bio MATCHES[search] 'mathematician'")
                    == ["Café au lait recipes", "Engine repair", "Shopping", "Unsaved"])
            #expect(try context.performAndWait {
                var authors = FetchRequest<ManagedObject>(entityName: "Author")
                authors.predicate = try FetchPredicate(format: "ANY documents.title MATCHES[search] '\"analytical engine\"'")
                return try context.count(for: authors)
            } == 1)
        }
    }

    @Test(arguments: [StoreType.sqlite, .inMemory])
    func aRelevanceSortOrdersSavedAndUnsavedObjectsAlike(type: StoreType) throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory, type: type)
        let context = library.context
        let query = try SearchQuery("engine")
        try context.performAndWait {
            for title in ["Engine", "An engine among many other words here", "Engine engine", "Nothing"] {
                try library.insert("Document", ["title": title], in: context)
            }
            try context.save()
            try library.insert("Document", ["title": "engine of engines, the ENGINE"], in: context)
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.predicate = try FetchPredicate(format: "title MATCHES[search] %@", query.text)
            request.sortDescriptors = [FetchSort(key: "title", relevanceTo: query), FetchSort(key: "title")]
            let titles = try context.fetch(request).map { try $0.value(forKey: "title") as? String ?? "-" }
            let expected = ["Engine", "An engine among many other words here", "Engine engine", "engine of engines, the ENGINE"]
                .sorted { (query.relevance(of: [$0]), $1) > (query.relevance(of: [$1]), $0) }
            #expect(titles == expected)
            #expect(titles.first == "Engine engine")
            request.fetchLimit = 2
            #expect(try context.fetch(request).map { try $0.value(forKey: "title") as? String ?? "-" } == Array(expected.prefix(2)))
        }
    }

    @Test func aFetchedResultsControllerFollowsSearchesAndRelevanceAcrossMergedSaves() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let query = try SearchQuery("engine")
        var request = FetchRequest<ManagedObject>(entityName: "Document")
        request.predicate = try FetchPredicate(format: "SELF MATCHES[search] %@", query.text)
        request.sortDescriptors = [FetchSort(key: "title", relevanceTo: query), FetchSort(key: "title")]
        let viewer = library.context
        let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: viewer)
        func titles() throws -> [String] {
            try viewer.performAndWait { try (controller.fetchedObjects ?? []).map { try $0.value(forKey: "title") as? String ?? "-" } }
        }
        try viewer.performAndWait { try controller.performFetch() }
        #expect(try titles() == ["Engine repair", "Notes on the Analytical Engine"])

        // Elsewhere: a new, more relevant title; a renamed one that stops matching; a memo whose body starts matching.
        let writer = library.context
        let save = try writer.performAndWait {
            try library.insert("Document", ["title": "Engine engine"], in: writer)
            var all = FetchRequest<ManagedObject>(entityName: "Document")
            all.predicate = try FetchPredicate(format: "title == 'Notes on the Analytical Engine'")
            try writer.fetch(all).first?.setValue("Notes on the Analytical Machine", forKey: "title")
            all.predicate = try FetchPredicate(format: "title == 'Shopping'")
            try writer.fetch(all).first?.setValue("an engine part", forKey: "body")
            let inserted = writer.insertedObjects, updated = Set(writer.updatedObjects.map(\.objectID))
            try writer.save()
            // After the save: the inserted objects' IDs are permanent now.
            return ContextDidSave(insertedObjectIDs: Set(inserted.map(\.objectID)), updatedObjectIDs: updated, deletedObjectIDs: [])
        }
        viewer.performAndWait { _ = viewer.mergeChanges(fromContextDidSave: save) }
        let expected = try library.titles("SELF MATCHES[search] 'engine'", sorts: request.sortDescriptors)
        #expect(expected == ["Engine engine", "Engine repair", "Shopping"])
        let listed = try titles()
        #expect(listed == expected)
    }

    // MARK: - Bad input

    @Test func badSearchesThrowErrorsThatSayWhatAndWhere() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        func failure(_ format: String, _ arguments: Any?..., entity: String = "Document") -> String {
            do {
                _ = try library.titles(format, arguments, entity: entity)
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        // Syntax of the query itself, found when the predicate is parsed, with the place.
        let unclosed = failure("title MATCHES[search] 'apple (pie'")
        #expect(unclosed.contains("offset 22") && unclosed.contains("search query"), "\(unclosed)")
        #expect(failure("title MATCHES[search] 'OR apple'").contains("search query"))
        #expect(failure("title MATCHES[search] '+++'").contains("no words"))
        // What may be searched.
        #expect(failure("author.name MATCHES[search] 'ada'").contains("Author.name is not indexed for search"))
        #expect(failure("pages MATCHES[search] '12'").contains("Document.pages is not indexed for search"))
        #expect(failure("title MATCHES[search] 3").contains("needs a search query string"))
        #expect(failure("title MATCHES[search][cd] 'x'").contains("takes no [c], [d] or [cd]"))
        #expect(failure("author MATCHES[search] 'ada'", entity: "Memo").contains("no property") == false)
        #expect(failure("ALL title MATCHES[search] 'x'").contains("needs a to-many key path"))
        // A relevance sort over an attribute that is not indexed.
        let context = library.context
        #expect(throws: FetchPredicateError.self) {
            try context.performAndWait {
                var request = FetchRequest<ManagedObject>(entityName: "Author")
                request.sortDescriptors = [FetchSort(key: "name", relevanceTo: try SearchQuery("ada"))]
                _ = try context.fetch(request)
            }
        }
        // Nothing saved was lost on the way.
        #expect(try library.titles("TRUEPREDICATE").count == 4)
    }

    @Test func aPredicateWithASearchPrintsAndParsesBack() throws {
        let predicate = try FetchPredicate(format: "title matches[search] %@ AND ANY documents.title MATCHES[search] \"x*\"", "\"big apple\" pie")
        #expect(predicate.description == #"title MATCHES[search] "\"big apple\" pie" AND ANY documents.title MATCHES[search] "x*""#)
        #expect(try FetchPredicate(format: predicate.description) == predicate)
    }
}
