import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Relationships in the object graph: ordered to-manys (`Z_FOK_`), one-to-one
/// and self-relationships, relationship faults, prefetching, and relationships
/// set in a child context and saved through its parent.
@Suite struct RelationshipTests {
    private func fetchAll<T: ManagedObject>(_ type: T.Type, in context: ManagedObjectContext, sortedBy key: String) throws -> [T] {
        var request = FetchRequest<T>()
        request.sortDescriptors = [FetchSort(key: key)]
        return try context.fetch(request)
    }

    @discardableResult
    private func seedPlaylist(_ graph: GraphStack, name: String = "mix", titles: [String]) throws -> ObjectID {
        let context = graph.context()
        return try context.performAndWait {
            let playlist = Playlist(context: context)
            playlist.name = name
            playlist.tracks = titles.map { title in
                let track = Track(context: context)
                track.title = title
                return track
            }
            try context.save()
            return playlist.objectID
        }
    }

    // MARK: - Ordered to-many

    @Test(arguments: allStoreTypes)
    func anOrderedToManyKeepsItsOrderThroughInsertMoveAndRemove(type: StoreType) throws {
        let graph = try GraphStack(type)
        let id = try seedPlaylist(graph, titles: ["a", "b", "c"])
        func titles() throws -> [String] {
            let reader = graph.context()
            return try reader.performAndWait { try #require(reader.existingObject(with: id) as? Playlist).tracks.map(\.title) }
        }
        #expect(try titles() == ["a", "b", "c"])

        let context = graph.context()
        try context.performAndWait {
            let playlist = try #require(context.existingObject(with: id) as? Playlist)
            var tracks = playlist.tracks
            tracks.swapAt(0, 2)                               // move: c b a
            playlist.tracks = tracks
            #expect(playlist.tracks.map(\.title) == ["c", "b", "a"])
            let inserted = Track(context: context)
            inserted.title = "n"
            playlist.tracks.insert(inserted, at: 1)           // insert: c n b a
            #expect(inserted.playlist === playlist, "inserting sets the inverse")
            let removed = playlist.tracks.remove(at: 2)       // remove: c n a
            #expect(removed.playlist == nil, "removing clears the inverse")
            try context.save()
        }
        #expect(try titles() == ["c", "n", "a"])
    }

    @Test(arguments: allStoreTypes)
    func settingTheToOneSideAppendsToTheOrderedListAndLeavesTheOldOne(type: StoreType) throws {
        let graph = try GraphStack(type)
        let first = try seedPlaylist(graph, name: "first", titles: ["a", "b", "c"])
        let second = try seedPlaylist(graph, name: "second", titles: ["x", "y"])
        let context = graph.context()
        try context.performAndWait {
            let one = try #require(context.existingObject(with: first) as? Playlist)
            let two = try #require(context.existingObject(with: second) as? Playlist)
            let moved = one.tracks[0]
            moved.playlist = two
            #expect(one.tracks.map(\.title) == ["b", "c"])
            #expect(two.tracks.map(\.title) == ["x", "y", "a"])
            try context.save()
        }
        let reader = graph.context()
        try reader.performAndWait {
            let one = try #require(reader.existingObject(with: first) as? Playlist)
            let two = try #require(reader.existingObject(with: second) as? Playlist)
            #expect(one.tracks.map(\.title) == ["b", "c"])
            #expect(two.tracks.map(\.title) == ["x", "y", "a"])
        }
    }

    @Test func anOrderedToManyIsRankedInZFOKColumnsInStepsOf1024() throws {
        let graph = try GraphStack()
        let id = try seedPlaylist(graph, titles: ["a", "b", "c"])
        #expect(try RawStore.texts(graph.storeURL, "SELECT name FROM pragma_table_info('ZTRACK')").contains("Z_FOK_PLAYLIST"))
        #expect(try RawStore.texts(graph.storeURL, "SELECT ZTITLE || ':' || Z_FOK_PLAYLIST FROM ZTRACK ORDER BY Z_FOK_PLAYLIST")
                == ["a:1024", "b:2048", "c:3072"])
        let context = graph.context()
        try context.performAndWait {
            let playlist = try #require(context.existingObject(with: id) as? Playlist)
            playlist.tracks = playlist.tracks.reversed()
            try context.save()
        }
        #expect(try RawStore.texts(graph.storeURL, "SELECT ZTITLE || ':' || Z_FOK_PLAYLIST FROM ZTRACK ORDER BY Z_FOK_PLAYLIST")
                == ["c:1024", "b:2048", "a:3072"])
    }

    // MARK: - One-to-one and self-relationships

    @Test(arguments: allStoreTypes)
    func aOneToOneKeepsBothSidesAndMovesOnReassignment(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let ids = try context.performAndWait {
            let (a, b, c) = (GraphNode(context: context), GraphNode(context: context), GraphNode(context: context))
            (a.name, b.name, c.name) = ("a", "b", "c")
            a.next = b
            #expect(b.previous === a)
            c.previous = b
            #expect(b.next === c)
            a.next = c                                         // c leaves b; b loses a
            #expect(c.previous === a)
            #expect(b.next == nil && b.previous == nil)
            try context.save()
            return [a, b, c].map(\.objectID)
        }
        let reader = graph.context()
        try reader.performAndWait {
            let nodes = try ids.map { try #require(reader.existingObject(with: $0) as? GraphNode) }
            #expect(nodes[0].next === nodes[2] && nodes[2].previous === nodes[0])
            #expect(nodes[1].next == nil && nodes[1].previous == nil)
        }
        if type == .sqlite {
            // One-to-one: a foreign key on both sides.
            #expect(try RawStore.texts(graph.storeURL, """
                SELECT n.ZNAME || '>' || IFNULL(next.ZNAME, '-') || '<' || IFNULL(previous.ZNAME, '-') FROM ZGRAPHNODE n
                LEFT JOIN ZGRAPHNODE next ON next.Z_PK = n.ZNEXT LEFT JOIN ZGRAPHNODE previous ON previous.Z_PK = n.ZPREVIOUS
                ORDER BY n.ZNAME
                """) == ["a>c<-", "b>-<-", "c>-<a"])
        }
    }

    @Test(arguments: allStoreTypes)
    func selfRelationshipsFormTreesAndCycles(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let rootID = try context.performAndWait {
            let root = GraphNode(context: context)
            root.name = "root"
            let children = (0..<3).map { index -> GraphNode in
                let node = GraphNode(context: context)
                node.name = "child\(index)"
                node.parent = root
                return node
            }
            // A cycle: root → child0 → child1 → root, and a node linking to itself.
            root.links = [children[0]]
            children[0].links = [children[1]]
            children[1].links = [root]
            children[2].links = [children[2]]
            children[2].next = root
            root.next = children[2]
            #expect(root.children.count == 3)
            #expect(children[2].backlinks == [children[2]])
            try context.save()
            return root.objectID
        }
        let reader = graph.context()
        try reader.performAndWait {
            let root = try #require(reader.existingObject(with: rootID) as? GraphNode)
            #expect(Set(root.children.map(\.name)) == ["child0", "child1", "child2"])
            #expect(root.children.allSatisfy { $0.parent === root })
            let first = try #require(root.links.first)
            let second = try #require(first.links.first)
            #expect(first.name == "child0" && second.name == "child1")
            #expect(second.links == [root], "the cycle closes on the same instance")
            #expect(root.backlinks == [second])
            let loop = try #require(root.children.first { $0.name == "child2" })
            #expect(loop.links == [loop] && loop.backlinks == [loop])
            #expect(loop.next === root && root.next === loop && root.previous === loop && loop.previous === root)
        }
    }

    // MARK: - Relationship faults

    @Test func aToManyStaysAFaultUntilUsedAndFiresInOneQuery() throws {
        let graph = try GraphStack()
        let id = try seedPlaylist(graph, titles: ["a", "b", "c", "d"])
        let context = graph.context()
        try context.performAndWait {
            let playlist = try #require(context.existingObject(with: id) as? Playlist)
            #expect(playlist.name == "mix")
            #expect(try playlist.hasFault(forRelationshipNamed: "tracks"))
            let (tracks, statements) = graph.countingStatements { playlist.tracks }
            #expect(statements.selects.count == 1, "\(statements)")
            #expect(tracks.count == 4)
            #expect(tracks.allSatisfy { $0.isFault }, "the destinations come back as faults")
            #expect(try !playlist.hasFault(forRelationshipNamed: "tracks"))
            let again = graph.countingStatements { playlist.tracks.count }
            #expect(again.statements.selects.isEmpty)
            #expect(throws: ObjectGraphError.self) { try playlist.hasFault(forRelationshipNamed: "name") }
        }
    }

    @Test(arguments: allStoreTypes)
    func aFaultedObjectReportsItsRelationshipsAsFaults(type: StoreType) throws {
        let graph = try GraphStack(type)
        let id = try seedPlaylist(graph, titles: ["a"])
        let context = graph.context()
        try context.performAndWait {
            let playlist = context.object(with: id)
            #expect(playlist.isFault)
            let faulted = try playlist.hasFault(forRelationshipNamed: "tracks")
            #expect(faulted)
            #expect(playlist.isFault, "asking does not fire")
            let inserted = Playlist(context: context)
            let insertedFaulted = try inserted.hasFault(forRelationshipNamed: "tracks")
            #expect(!insertedFaulted)
        }
    }

    @Test(arguments: allStoreTypes)
    func objectIDsForARelationshipGiveItsMembersWithoutMakingObjects(type: StoreType) throws {
        let graph = try GraphStack(type)
        let id = try seedPlaylist(graph, titles: ["a", "b", "c"])
        let context = graph.context()
        let trackIDs = try context.performAndWait {
            try fetchAll(Track.self, in: context, sortedBy: "title").map(\.objectID)
        }
        try context.performAndWait {
            context.reset()
            let playlist = try #require(context.existingObject(with: id) as? Playlist)
            let registered = context.registeredObjectCount
            #expect(try playlist.objectIDs(forRelationshipNamed: "tracks") == trackIDs, "an ordered to-many in order")
            #expect(context.registeredObjectCount == registered, "no object was made for a member")
            #expect(try !playlist.hasFault(forRelationshipNamed: "tracks"), "the to-many was loaded")
            let track = try #require(context.existingObject(with: trackIDs[1]) as? Track)
            #expect(try track.objectIDs(forRelationshipNamed: "playlist") == [id], "a to-one gives its one ID")
            #expect(try Track(context: context).objectIDs(forRelationshipNamed: "playlist").isEmpty)
            #expect(throws: ObjectGraphError.self) { try playlist.objectIDs(forRelationshipNamed: "name") }
            #expect(throws: ObjectGraphError.self) { try playlist.objectIDs(forRelationshipNamed: "missing") }
        }
    }

    @Test(arguments: allStoreTypes)
    func primitivePropertyValuesOfRelationshipsAreTheirIDs(type: StoreType) throws {
        let graph = try GraphStack(type)
        let id = try seedPlaylist(graph, titles: ["a", "b"])
        let context = graph.context()
        try context.performAndWait {
            let playlist = try #require(context.existingObject(with: id) as? Playlist)
            let tracks = playlist.tracks
            #expect(try playlist.primitivePropertyValue(forKey: "tracks") == .objects(tracks.map(\.objectID)))
            #expect(try tracks[0].primitivePropertyValue(forKey: "playlist") == .object(id))
            #expect(try Track(context: context).primitivePropertyValue(forKey: "playlist") == .null)
            #expect(try Playlist(context: context).primitivePropertyValue(forKey: "tracks") == .objects([]))
        }
    }

    // MARK: - Prefetching

    private func seedLibrary(_ graph: GraphStack, playlists: Int, tracksEach: Int) throws {
        let context = graph.context()
        try context.performAndWait {
            for p in 0..<playlists {
                let playlist = Playlist(context: context)
                playlist.name = String(format: "p%02d", p)
                playlist.tracks = (0..<tracksEach).map { t in
                    let track = Track(context: context)
                    track.title = "p\(p)t\(t)"
                    return track
                }
            }
            let books = (0..<5).map { index -> Book in
                let book = Book(context: context)
                book.title = "book\(index)"
                return book
            }
            for index in 0..<4 {
                let author = Author(context: context)
                author.name = "author\(index)"
                author.books = Set(books[index...index + 1])
                let reader = Reader(context: context)
                reader.name = "reader\(index)"
                reader.favorites = [books[4 - index], books[0]]
            }
            try context.save()
        }
    }

    @Test func prefetchingLoadsEachKeyPathWithOneQuery() throws {
        let graph = try GraphStack()
        try seedLibrary(graph, playlists: 20, tracksEach: 5)
        let context = graph.context()
        try context.performAndWait {
            // To-many through the inverse's foreign key.
            var request = FetchRequest<Playlist>()
            request.sortDescriptors = [FetchSort(key: "name")]
            request.relationshipKeyPathsForPrefetching = ["tracks"]
            let (playlists, fetching) = try graph.countingStatements { try context.fetch(request) }
            #expect(fetching.selects.count == 2, "the fetch and one query for the key path: \(fetching)")
            let reading = graph.countingStatements { playlists.map { $0.tracks.map(\.title) } }
            #expect(reading.statements.selects.isEmpty, "\(reading.statements)")
            #expect(reading.result[3] == (0..<5).map { "p3t\($0)" }, "in order")

            // To-one, then a two-step key path through a many-to-many.
            var tracks = FetchRequest<Track>()
            tracks.relationshipKeyPathsForPrefetching = ["playlist"]
            let (allTracks, toOne) = try graph.countingStatements { try context.fetch(tracks) }
            #expect(allTracks.count == 100)
            #expect(toOne.selects.count <= 2, "\(toOne)")   // the playlists are registered already: no query needed
            var authors = FetchRequest<Author>()
            authors.sortDescriptors = [FetchSort(key: "name")]
            authors.relationshipKeyPathsForPrefetching = ["books", "books.fans"]
            let (fetchedAuthors, manyToMany) = try graph.countingStatements { try context.fetch(authors) }
            #expect(manyToMany.selects.count == 3, "\(manyToMany)")
            let names = graph.countingStatements {
                fetchedAuthors.map { author in author.books.map { "\($0.title):\($0.fans.count)" }.sorted() }
            }
            #expect(names.statements.selects.isEmpty, "\(names.statements)")
            #expect(names.result[0] == ["book0:4", "book1:1"])
            #expect(names.result[3] == ["book3:1", "book4:1"])
        }
    }

    @Test(arguments: allStoreTypes)
    func prefetchingReturnsWhatFaultingWouldAndRejectsUnknownKeys(type: StoreType) throws {
        let graph = try GraphStack(type)
        try seedLibrary(graph, playlists: 3, tracksEach: 3)
        func readerFavorites(prefetch: [String]) throws -> [[String]] {
            let context = graph.context()
            return try context.performAndWait {
                var request = FetchRequest<Reader>()
                request.sortDescriptors = [FetchSort(key: "name")]
                request.relationshipKeyPathsForPrefetching = prefetch
                return try context.fetch(request).map { $0.favorites.map(\.title) }
            }
        }
        let plain = try readerFavorites(prefetch: [])
        #expect(plain == [["book4", "book0"], ["book3", "book0"], ["book2", "book0"], ["book1", "book0"]])
        #expect(try readerFavorites(prefetch: ["favorites", "favorites.authors"]) == plain)
        let context = graph.context()
        context.performAndWait {
            var request = FetchRequest<Reader>()
            request.relationshipKeyPathsForPrefetching = ["favorites.nothing"]
            #expect(throws: ObjectGraphError.unknownKey("favorites.nothing", entity: "Reader")) { try context.fetch(request) }
            request.relationshipKeyPathsForPrefetching = ["name"]
            #expect(throws: ObjectGraphError.self) { try context.fetch(request) }
        }
    }

    @Test(arguments: allStoreTypes)
    func prefetchingKeepsTheContextsUnsavedChanges(type: StoreType) throws {
        let graph = try GraphStack(type)
        let seed = graph.context()
        let (departmentID, leaverID) = try seed.performAndWait {
            let department = Department(context: seed)
            department.name = "ops"
            let names = ["stays", "leaves"].map { name -> Employee in
                let employee = Employee(context: seed)
                employee.name = name
                employee.department = department
                return employee
            }
            try seed.save()
            return (department.objectID, names[1].objectID)
        }
        let context = graph.context()
        try context.performAndWait {
            // Unsaved: one employee joins the (not yet loaded) department, one leaves it.
            let department = try #require(context.existingObject(with: departmentID) as? Department)
            let joiner = Employee(context: context)
            joiner.name = "joins"
            joiner.department = department
            let leaver = try #require(context.existingObject(with: leaverID) as? Employee)
            leaver.department = nil
            #expect(try department.hasFault(forRelationshipNamed: "employees"))
            var request = FetchRequest<Department>()
            request.relationshipKeyPathsForPrefetching = ["employees"]
            let fetched = try context.fetch(request)
            #expect(fetched.first === department)
            #expect(try !department.hasFault(forRelationshipNamed: "employees"))
            #expect(Set(department.employees.map(\.name)) == ["stays", "joins"])
        }
    }

    // MARK: - Child contexts

    @Test(arguments: allStoreTypes)
    func relationshipsSetInAChildAreSavedThroughTheParent(type: StoreType) throws {
        let graph = try GraphStack(type)
        let playlistID = try seedPlaylist(graph, titles: ["a", "b"])
        let parent = graph.context()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try child.performAndWait {
            let playlist = try #require(child.existingObject(with: playlistID) as? Playlist)
            let track = Track(context: child)
            track.title = "new"
            playlist.tracks.insert(track, at: 0)
            let author = Author(context: child)
            author.name = "ann"
            let book = Book(context: child)
            book.title = "tome"
            author.books = [book]
            let reader = Reader(context: child)
            reader.name = "rita"
            reader.favorites = [book]
            let node = GraphNode(context: child)
            node.name = "self"
            node.links = [node]
            try child.save()
        }
        try parent.performAndWait {
            let playlist = try #require(parent.existingObject(with: playlistID) as? Playlist)
            #expect(playlist.tracks.map(\.title) == ["new", "a", "b"])
            #expect(parent.hasChanges)
            try parent.save()
        }
        let reader = graph.context()
        try reader.performAndWait {
            let playlist = try #require(reader.existingObject(with: playlistID) as? Playlist)
            #expect(playlist.tracks.map(\.title) == ["new", "a", "b"])
            let authors = try fetchAll(Author.self, in: reader, sortedBy: "name")
            #expect(authors.map { $0.books.map(\.title) } == [["tome"]])
            let book = try #require(authors.first?.books.first)
            #expect(book.authors == Set(authors))
            #expect(book.fans.map(\.name) == ["rita"])
            let node = try #require(fetchAll(GraphNode.self, in: reader, sortedBy: "name").first)
            #expect(node.links == [node] && node.backlinks == [node])
        }
    }

    @Test(arguments: allStoreTypes)
    func aChildSaveKeepsTheParentsUnsavedManyToManyChanges(type: StoreType) throws {
        let graph = try GraphStack(type)
        let seed = graph.context()
        let (authorID, bookID) = try seed.performAndWait {
            let author = Author(context: seed)
            author.name = "ann"
            let book = Book(context: seed)
            book.title = "tome"
            try seed.save()
            return (author.objectID, book.objectID)
        }
        let parent = graph.context()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let parentAuthor = try parent.performAndWait { try #require(parent.existingObject(with: authorID) as? Author) }
        // The child reads the author before the parent touches its books.
        let childAuthor = try child.performAndWait { try #require(child.existingObject(with: authorID) as? Author) }
        try parent.performAndWait {
            parentAuthor.books = [try #require(parent.existingObject(with: bookID) as? Book)]
        }
        try child.performAndWait {
            childAuthor.name = "anne"
            try child.save()
        }
        try parent.performAndWait {
            #expect(parentAuthor.name == "anne")
            #expect(parentAuthor.books.map(\.title) == ["tome"], "the child did not load the books: the parent's change stays")
            try parent.save()
        }
        let reader = graph.context()
        try reader.performAndWait {
            let author = try #require(reader.existingObject(with: authorID) as? Author)
            #expect(author.name == "anne" && author.books.map(\.title) == ["tome"])
        }
    }

    // MARK: - Fixture: an ordered to-many written by Core Data

    /// DuckDuckGo's bookmarks: BookmarkEntity.children is ordered, kept in
    /// `ZPARENT` + `Z_FOK_PARENT` (steps of 1024). Read as SQLite orders it, then
    /// reordered and saved in Core Data's layout.
    @Test(arguments: ["Bookmarks_V3", "Bookmarks_V5"])
    func duckDuckGoBookmarkChildrenReadInZFOKOrderAndSaveBack(store name: String) throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("ddg-bookmarks/stores/\(name).sqlite")
        let version = name == "Bookmarks_V3" ? "BookmarksModel 3" : "BookmarksModel 5"
        let model = try ManagedObjectModel(contentsOf: CoreDataFixtures.url("ddg-bookmarks/BookmarksModel.xcdatamodeld/\(version).xcdatamodel"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let folders = try RawStore.texts(url, "SELECT DISTINCT ZPARENT FROM ZBOOKMARKENTITY WHERE ZPARENT IS NOT NULL ORDER BY ZPARENT")
        #expect(!folders.isEmpty)
        var reordered: (folder: Int64, expected: [String])?
        try context.performAndWait {
            let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: "BookmarkEntity"))
            let byKey = Dictionary(uniqueKeysWithValues: objects.map { ($0.objectID.primaryKey ?? 0, $0) })
            for folder in folders {
                let key = try #require(Int64(folder))
                let expected = try RawStore.texts(url, "SELECT Z_PK FROM ZBOOKMARKENTITY WHERE ZPARENT = \(key) ORDER BY Z_FOK_PARENT, Z_PK")
                let owner = try #require(byKey[key])
                let children = try #require(try owner.value(forKey: "children") as? [ManagedObject])
                #expect(children.map { String($0.objectID.primaryKey ?? 0) } == expected, "folder \(key)")
                for child in children { #expect(try child.value(forKey: "parent") as? ManagedObject === owner) }
                if children.count > 1 && reordered == nil {
                    let reversed = Array(children.reversed())
                    try owner.setValue(reversed, forKey: "children")
                    reordered = (key, reversed.map { String($0.objectID.primaryKey ?? 0) })
                }
            }
            try context.save()
        }
        let (folder, expected) = try #require(reordered)
        #expect(try RawStore.texts(url, "SELECT Z_PK FROM ZBOOKMARKENTITY WHERE ZPARENT = \(folder) ORDER BY Z_FOK_PARENT") == expected)
        #expect(try RawStore.texts(url, "SELECT Z_FOK_PARENT FROM ZBOOKMARKENTITY WHERE ZPARENT = \(folder) ORDER BY Z_FOK_PARENT")
                == (1...expected.count).map { String($0 * 1024) })
        #expect(try RawStore.texts(url, "PRAGMA integrity_check") == ["ok"])
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            let owner = try reader.existingObject(with: try #require(coordinator.persistentStores.first).newObjectID(
                for: try #require(model.entitiesByName["BookmarkEntity"]), primaryKey: folder))
            let children = try #require(try owner.value(forKey: "children") as? [ManagedObject])
            #expect(children.map { String($0.objectID.primaryKey ?? 0) } == expected)
        }
    }
}
