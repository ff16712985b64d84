import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Many-to-many relationships (and to-manys without an inverse), kept in join
/// tables `Z_<n><REL>` as Core Data keeps them, and the same in memory.
@Suite struct ManyToManyTests {
    private func titles(_ books: Set<Book>) -> [String] { books.map(\.title).sorted() }
    private func names(_ authors: Set<Author>) -> [String] { authors.map(\.name).sorted() }

    /// Authors a1, a2 and books b1…b3: a1 wrote b1, b2, b3; a2 wrote b3.
    private func seed(_ graph: GraphStack) throws -> (authors: [ObjectID], books: [ObjectID]) {
        let context = graph.context()
        return try context.performAndWait {
            let authors = (1...2).map { index -> Author in
                let author = Author(context: context)
                author.name = "a\(index)"
                return author
            }
            let books = (1...3).map { index -> Book in
                let book = Book(context: context)
                book.title = "b\(index)"
                return book
            }
            authors[0].books = [books[0], books[1]]
            books[2].authors = [authors[0], authors[1]]          // from the other side
            #expect(titles(authors[0].books) == ["b1", "b2", "b3"])
            #expect(names(books[0].authors) == ["a1"])
            try context.save()
            return (authors.map(\.objectID), books.map(\.objectID))
        }
    }

    @Test(arguments: allStoreTypes)
    func bothSidesAreKeptInStepAndReadBack(type: StoreType) throws {
        let graph = try GraphStack(type)
        let (authorIDs, bookIDs) = try seed(graph)
        let reader = graph.context()
        try reader.performAndWait {
            let a1 = try #require(reader.existingObject(with: authorIDs[0]) as? Author)
            let b3 = try #require(reader.existingObject(with: bookIDs[2]) as? Book)
            #expect(titles(a1.books) == ["b1", "b2", "b3"])
            #expect(names(b3.authors) == ["a1", "a2"])
            // Remove from one side, add from the other.
            let b1 = try #require(reader.existingObject(with: bookIDs[0]) as? Book)
            b1.authors.remove(a1)
            #expect(titles(a1.books) == ["b2", "b3"])
            let a2 = try #require(reader.existingObject(with: authorIDs[1]) as? Author)
            a2.books.insert(b1)
            #expect(names(b1.authors) == ["a2"])
            try reader.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let a1 = try #require(check.existingObject(with: authorIDs[0]) as? Author)
            let a2 = try #require(check.existingObject(with: authorIDs[1]) as? Author)
            #expect(titles(a1.books) == ["b2", "b3"])
            #expect(titles(a2.books) == ["b1", "b3"])
            let b1 = try #require(check.existingObject(with: bookIDs[0]) as? Book)
            #expect(names(b1.authors) == ["a2"])
        }
    }

    @Test func theJoinTableIsNamedAndLaidOutAsCoreDataDoes() throws {
        let graph = try GraphStack()
        let (authorIDs, bookIDs) = try seed(graph)
        let url = graph.storeURL
        func sql(_ name: String) throws -> String? {
            try RawStore.text(url, "SELECT sql FROM sqlite_master WHERE name = '\(name)'")
        }
        // Author (Z_ENT 1) <<->> Book (Z_ENT 2): named from Author, the lower number.
        #expect(try sql("Z_1BOOKS") == "CREATE TABLE Z_1BOOKS ( Z_1AUTHORS INTEGER, Z_2BOOKS INTEGER, PRIMARY KEY (Z_1AUTHORS, Z_2BOOKS) )")
        #expect(try sql("Z_1BOOKS_Z_2BOOKS_INDEX") == "CREATE INDEX Z_1BOOKS_Z_2BOOKS_INDEX ON Z_1BOOKS (Z_2BOOKS, Z_1AUTHORS)")
        // Book (2).fans <<->> Reader (15).favorites, ordered: named from Book; the ordered side gets Z_FOK_.
        #expect(try sql("Z_2FANS") == "CREATE TABLE Z_2FANS ( Z_2FAVORITES INTEGER, Z_15FANS INTEGER, Z_FOK_2FAVORITES INTEGER, PRIMARY KEY (Z_2FAVORITES, Z_15FANS) )")
        // Reflexive GraphNode (6).links <<->> backlinks.
        #expect(try sql("Z_6LINKS") == "CREATE TABLE Z_6LINKS ( Z_6BACKLINKS INTEGER, Z_6LINKS INTEGER, PRIMARY KEY (Z_6BACKLINKS, Z_6LINKS) )")
        // Shelf (17).labels → Label (7), no inverse.
        #expect(try sql("Z_17LABELS") == "CREATE TABLE Z_17LABELS ( Z_17INVERSE_LABELS INTEGER, Z_7LABELS INTEGER, PRIMARY KEY (Z_17INVERSE_LABELS, Z_7LABELS) )")
        // No columns for to-manys in the entity tables.
        #expect(try !RawStore.texts(url, "SELECT name FROM pragma_table_info('ZAUTHOR')").contains { $0.contains("BOOKS") })

        let pairs = try RawStore.texts(url, "SELECT Z_1AUTHORS || '-' || Z_2BOOKS FROM Z_1BOOKS ORDER BY Z_1AUTHORS, Z_2BOOKS")
        let expected = [(0, 0), (0, 1), (0, 2), (1, 2)].map { "\(authorIDs[$0.0].primaryKey!)-\(bookIDs[$0.1].primaryKey!)" }.sorted()
        #expect(pairs.sorted() == expected)
    }

    @Test(arguments: allStoreTypes)
    func anOrderedManyToManyKeepsItsOrder(type: StoreType) throws {
        let graph = try GraphStack(type)
        let (_, bookIDs) = try seed(graph)
        let context = graph.context()
        let readerID = try context.performAndWait {
            let books = try bookIDs.map { try #require(context.existingObject(with: $0) as? Book) }
            let reader = Reader(context: context)
            reader.name = "rita"
            reader.favorites = [books[2], books[0], books[1]]
            #expect(books[0].fans == [reader])
            try context.save()
            return reader.objectID
        }
        func favorites() throws -> [String] {
            let check = graph.context()
            return try check.performAndWait { try #require(check.existingObject(with: readerID) as? Reader).favorites.map(\.title) }
        }
        #expect(try favorites() == ["b3", "b1", "b2"])
        if type == .sqlite {
            #expect(try RawStore.texts(graph.storeURL, "SELECT b.ZTITLE || ':' || j.Z_FOK_2FAVORITES FROM Z_2FANS j JOIN ZBOOK b ON b.Z_PK = j.Z_2FAVORITES ORDER BY j.Z_FOK_2FAVORITES")
                    == ["b3:1024", "b1:2048", "b2:3072"])
        }
        try context.performAndWait {
            let reader = try #require(context.existingObject(with: readerID) as? Reader)
            reader.favorites.swapAt(0, 2)                 // b2 b1 b3
            reader.favorites.remove(at: 1)                // b2 b3
            let b1 = try #require(context.existingObject(with: bookIDs[0]) as? Book)
            #expect(b1.fans.isEmpty)
            b1.fans.insert(reader)                        // from the unordered side: appended
            #expect(reader.favorites.map(\.title) == ["b2", "b3", "b1"])
            try context.save()
        }
        #expect(try favorites() == ["b2", "b3", "b1"])
    }

    @Test(arguments: allStoreTypes)
    func deletingAnObjectRemovesItsJoinRows(type: StoreType) throws {
        let graph = try GraphStack(type)
        let (authorIDs, bookIDs) = try seed(graph)
        let context = graph.context()
        try context.performAndWait {
            let b3 = try #require(context.existingObject(with: bookIDs[2]) as? Book)
            let a1 = try #require(context.existingObject(with: authorIDs[0]) as? Author)
            context.delete(b3)
            #expect(titles(a1.books) == ["b1", "b2"], "nullify takes it out of the other side at once")
            try context.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let a2 = try #require(check.existingObject(with: authorIDs[1]) as? Author)
            #expect(a2.books.isEmpty)
            let a1 = try #require(check.existingObject(with: authorIDs[0]) as? Author)
            #expect(titles(a1.books) == ["b1", "b2"])
        }
        if type == .sqlite {
            #expect(try RawStore.int(graph.storeURL, "SELECT count(*) FROM Z_1BOOKS WHERE Z_2BOOKS = \(bookIDs[2].primaryKey!)") == 0)
            #expect(try RawStore.int(graph.storeURL, "SELECT count(*) FROM Z_1BOOKS") == 2)
        }
    }

    @Test(arguments: allStoreTypes)
    func aToManyWithoutInverseIsStoredAndLosesDeletedDestinations(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (shelfID, labelIDs) = try context.performAndWait {
            let shelf = Shelf(context: context)
            shelf.name = "top"
            let labels = ["x", "y", "z"].map { text -> Label in
                let label = Label(context: context)
                label.text = text
                return label
            }
            shelf.labels = Set(labels)
            try context.save()
            return (shelf.objectID, labels.map(\.objectID))
        }
        try context.performAndWait {
            context.delete(try context.existingObject(with: labelIDs[0]))
            let shelf = try #require(context.existingObject(with: shelfID) as? Shelf)
            shelf.labels.remove(try #require(context.existingObject(with: labelIDs[1]) as? Label))
            try context.save()
        }
        let check = graph.context()
        try check.performAndWait {
            let shelf = try #require(check.existingObject(with: shelfID) as? Shelf)
            #expect(shelf.labels.map(\.text) == ["z"])
        }
        if type == .sqlite {
            #expect(try RawStore.texts(graph.storeURL, "SELECT Z_7LABELS FROM Z_17LABELS") == ["\(labelIDs[2].primaryKey!)"])
        }
    }

    @Test(arguments: allStoreTypes)
    func aReflexiveManyToManyReadsFromBothSides(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let ids = try context.performAndWait {
            let nodes = (0..<4).map { index -> GraphNode in
                let node = GraphNode(context: context)
                node.name = "n\(index)"
                return node
            }
            nodes[0].links = [nodes[1], nodes[2], nodes[3]]
            nodes[3].backlinks.insert(nodes[2])
            try context.save()
            return nodes.map(\.objectID)
        }
        let check = graph.context()
        try check.performAndWait {
            let nodes = try ids.map { try #require(check.existingObject(with: $0) as? GraphNode) }
            #expect(nodes[0].links.map(\.name).sorted() == ["n1", "n2", "n3"])
            #expect(nodes[3].backlinks.map(\.name).sorted() == ["n0", "n2"])
            #expect(nodes[2].links.map(\.name) == ["n3"])
            #expect(nodes[1].backlinks.map(\.name) == ["n0"] && nodes[1].links.isEmpty)
        }
    }

    /// Core Data names a reflexive join table after either side; an existing file
    /// is read (and written) under the name it has.
    @Test func aReflexiveJoinTableIsFoundUnderEitherName() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Graph.sqlite")
        func open() throws -> PersistentStoreCoordinator {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            return coordinator
        }
        var coordinator: PersistentStoreCoordinator? = try open()
        var context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator!)
        let ids = try context.performAndWait {
            let nodes = (0..<3).map { index -> GraphNode in
                let node = GraphNode(context: context)
                node.name = "n\(index)"
                return node
            }
            nodes[0].links = [nodes[1], nodes[2]]
            try context.save()
            return nodes.map(\.objectID)
        }
        if let store = coordinator?.persistentStores.first { try coordinator?.remove(store) }
        coordinator = nil
        try RawStore.execute(url, "ALTER TABLE Z_6LINKS RENAME TO Z_6BACKLINKS")

        coordinator = try open()
        context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator!)
        try context.performAndWait {
            let nodes = try ids.map { try #require(context.existingObject(with: $0) as? GraphNode) }
            #expect(nodes[0].links.map(\.name).sorted() == ["n1", "n2"])
            #expect(nodes[2].backlinks.map(\.name) == ["n0"])
            nodes[1].links = [nodes[2]]
            try context.save()
        }
        #expect(try RawStore.int(url, "SELECT count(*) FROM Z_6BACKLINKS") == 3)
        #expect(try RawStore.text(url, "SELECT name FROM sqlite_master WHERE name = 'Z_6LINKS'") == nil)
    }

    @Test(arguments: allStoreTypes)
    func aPredicateCrossesAManyToManyAndAToManyWithoutInverse(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try seed(graph)
        let context = graph.context()
        try context.performAndWait {
            var authors = FetchRequest<Author>()
            authors.sortDescriptors = [FetchSort(key: "name")]
            authors.predicate = try FetchPredicate(format: "ANY books.title == %@", "b3")
            #expect(try context.fetch(authors).map(\.name) == ["a1", "a2"])
            authors.predicate = try FetchPredicate(format: "books.@count == 3")
            #expect(try context.fetch(authors).map(\.name) == ["a1"])
            var books = FetchRequest<Book>()
            books.sortDescriptors = [FetchSort(key: "title")]
            books.predicate = try FetchPredicate(format: "NONE authors.name == %@", "a2")
            #expect(try context.fetch(books).map(\.title) == ["b1", "b2"])

            let shelf = Shelf(context: context)
            shelf.name = "s"
            let label = Label(context: context)
            label.text = "red"
            shelf.labels = [label]
            try context.save()
            var shelves = FetchRequest<Shelf>()
            shelves.predicate = try FetchPredicate(format: "ANY labels.text == %@", "red")
            #expect(try context.fetch(shelves).map(\.name) == ["s"])
        }
    }

    // MARK: - Fixtures written by Core Data

    /// Big Nerd Ranch's TestModel: Author (1) <<->> Book (2) in `Z_1BOOKS`, in an
    /// empty store Core Data created. A new store of the same model gets the same
    /// join table, and rows written here read back through SQLite.
    @Test func bigNerdRanchAuthorBookJoinTableMatchesCoreData() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("bnr-coredatastack/stores/TestModel.sqlite")
        let modelURL = CoreDataFixtures.url("bnr-coredatastack/Sample.xcdatamodeld/TestModel.xcdatamodel")
        let fresh = workspace.url.appendingPathComponent("Fresh.sqlite")
        let freshCoordinator = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(contentsOf: modelURL))
        try freshCoordinator.addPersistentStore(type: .sqlite, at: fresh)
        let joinSQL = "SELECT sql FROM sqlite_master WHERE name LIKE 'Z_1BOOKS%' ORDER BY name"
        #expect(try RawStore.texts(fresh, joinSQL) == RawStore.texts(url, joinSQL))

        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(contentsOf: modelURL))
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let model = coordinator.managedObjectModel
        let (authorKey, bookKeys) = try context.performAndWait {
            let author = ManagedObject(entity: try #require(model.entitiesByName["Author"]), insertInto: context)
            try author.setValue("Ann", forKey: "firstName")
            let books = try (1...2).map { index -> ManagedObject in
                let book = ManagedObject(entity: try #require(model.entitiesByName["Book"]), insertInto: context)
                try book.setValue("Book \(index)", forKey: "title")
                return book
            }
            try author.setValue(Set(books), forKey: "books")
            try context.save()
            return (author.objectID.primaryKey!, books.map { $0.objectID.primaryKey! })
        }
        #expect(try RawStore.texts(url, "SELECT Z_1AUTHORS || '-' || Z_2BOOKS FROM Z_1BOOKS ORDER BY Z_2BOOKS")
                == bookKeys.sorted().map { "\(authorKey)-\($0)" })
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            let books = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Book"))
            #expect(books.count == 2)
            for book in books {
                let authors = try #require(try book.value(forKey: "authors") as? Set<ManagedObject>)
                #expect(try authors.map { try $0.value(forKey: "firstName") as? String } == ["Ann"])
            }
        }
    }

    /// DuckDuckGo's bookmarks V4/V5: favorites ↔ favoriteFolders is an ordered
    /// reflexive many-to-many in `Z_1FAVORITES (Z_1FAVORITEFOLDERS, Z_1FAVORITES,
    /// Z_FOK_1FAVORITES)`, with its rows only in the `-wal`. Both sides read as
    /// SQLite holds them; a reordered and extended list is saved in the same layout.
    @Test(arguments: ["Bookmarks_V4", "Bookmarks_V5"])
    func duckDuckGoFavoritesReadAndSaveInCoreDatasJoinTable(store name: String) throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("ddg-bookmarks/stores/\(name).sqlite")
        let version = name == "Bookmarks_V4" ? "BookmarksModel 4" : "BookmarksModel 5"
        let modelURL = CoreDataFixtures.url("ddg-bookmarks/BookmarksModel.xcdatamodeld/\(version).xcdatamodel")
        let model = try ManagedObjectModel(contentsOf: modelURL)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)

        // A new store of this model chooses the same join table.
        let fresh = workspace.url.appendingPathComponent("Fresh.sqlite")
        try PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(contentsOf: modelURL))
            .addPersistentStore(type: .sqlite, at: fresh)
        let joinSQL = "SELECT sql FROM sqlite_master WHERE name LIKE 'Z_1FAVORITES%' ORDER BY name"
        #expect(try RawStore.texts(fresh, joinSQL) == RawStore.texts(url, joinSQL))

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let folderKeys = try RawStore.texts(url, "SELECT DISTINCT Z_1FAVORITEFOLDERS FROM Z_1FAVORITES ORDER BY 1")
        #expect(!folderKeys.isEmpty)
        var edited: (folder: Int64, expected: [String])?
        try context.performAndWait {
            let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: "BookmarkEntity"))
            let byKey = Dictionary(uniqueKeysWithValues: objects.map { ($0.objectID.primaryKey!, $0) })
            for object in objects {
                let key = object.objectID.primaryKey!
                let favorites = try #require(try object.value(forKey: "favorites") as? [ManagedObject])
                #expect(try favorites.map { String($0.objectID.primaryKey!) }
                        == RawStore.texts(url, "SELECT Z_1FAVORITES FROM Z_1FAVORITES WHERE Z_1FAVORITEFOLDERS = \(key) ORDER BY Z_FOK_1FAVORITES"))
                let folders = try #require(try object.value(forKey: "favoriteFolders") as? Set<ManagedObject>)
                #expect(try folders.map { String($0.objectID.primaryKey!) }.sorted()
                        == RawStore.texts(url, "SELECT Z_1FAVORITEFOLDERS FROM Z_1FAVORITES WHERE Z_1FAVORITES = \(key)").sorted())
            }
            let folderKey = try #require(Int64(folderKeys[0]))
            let folder = try #require(byKey[folderKey])
            var favorites = try #require(try folder.value(forKey: "favorites") as? [ManagedObject])
            favorites.reverse()
            let outsider = try #require(objects.first { !favorites.contains($0) && $0 !== folder })
            favorites.insert(outsider, at: 1)
            try folder.setValue(favorites, forKey: "favorites")
            let outsiderFolders = try #require(try outsider.value(forKey: "favoriteFolders") as? Set<ManagedObject>)
            #expect(outsiderFolders.contains(folder))
            edited = (folderKey, favorites.map { String($0.objectID.primaryKey!) })
            try context.save()
        }
        let (folder, expected) = try #require(edited)
        #expect(try RawStore.texts(url, "SELECT Z_1FAVORITES FROM Z_1FAVORITES WHERE Z_1FAVORITEFOLDERS = \(folder) ORDER BY Z_FOK_1FAVORITES") == expected)
        #expect(try RawStore.texts(url, "SELECT Z_FOK_1FAVORITES FROM Z_1FAVORITES WHERE Z_1FAVORITEFOLDERS = \(folder) ORDER BY Z_FOK_1FAVORITES")
                == (1...expected.count).map { String($0 * 1024) })
        #expect(try RawStore.texts(url, "PRAGMA integrity_check") == ["ok"])
    }
}
