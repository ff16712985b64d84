import Foundation
import Synchronization
import Testing
import ObjectGraph
import DataStackStores

/// Lightweight migration (a store opened with a newer model, `migratesAutomatically`
/// + `infersMappingModel`) with models built in code and with Core Data's own
/// migration chains from the fixture corpus, plus `migratePersistentStore`,
/// `destroyPersistentStore` and `replacePersistentStore`.
@Suite struct MigrationTests {
    // MARK: - Models built in code

    /// Version 1: Author ↔ Book (one-to-many), and an entity version 2 drops.
    static func libraryV1() -> ManagedObjectModel {
        ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                AttributeDescription(name: "name", type: .string),
                AttributeDescription(name: "born", type: .date),
                RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true),
            ]),
            EntityDescription(name: "Book", properties: [
                AttributeDescription(name: "title", type: .string),
                AttributeDescription(name: "pages", type: .integer32),
                AttributeDescription(name: "legacy", type: .string),
                RelationshipDescription(name: "author", destination: "Author", inverse: "books"),
            ]),
            EntityDescription(name: "Obsolete", properties: [AttributeDescription(name: "note", type: .string)]),
        ])
    }

    /// Version 2: Author renamed Writer, Book.title renamed heading, `pages` and
    /// `name` made required with defaults, attributes and a Publisher entity added
    /// (with a to-one to it), `legacy` and Obsolete removed.
    static func libraryV2(bookChanges: (EntityDescription) -> Void = { _ in }) -> ManagedObjectModel {
        let writer = EntityDescription(name: "Writer", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false, defaultValue: .string("Unknown")),
            AttributeDescription(name: "born", type: .date),
            AttributeDescription(name: "country", type: .string, defaultValue: .string("NZ")),
            RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true),
        ])
        writer.renamingIdentifier = "Author"
        let heading = AttributeDescription(name: "heading", type: .string)
        heading.renamingIdentifier = "title"
        let book = EntityDescription(name: "Book", properties: [
            heading,
            AttributeDescription(name: "pages", type: .integer32, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "isbn", type: .string),
            RelationshipDescription(name: "author", destination: "Writer", inverse: "books"),
            RelationshipDescription(name: "publisher", destination: "Publisher", inverse: "books"),
        ])
        bookChanges(book)
        let publisher = EntityDescription(name: "Publisher", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
            RelationshipDescription(name: "books", destination: "Book", inverse: "publisher", isToMany: true),
        ])
        return ManagedObjectModel(entities: [writer, book, publisher])
    }

    /// A version 1 store: 3 authors (one without a name), 5 books (one without pages), 2 obsolete rows.
    static func makeLibraryV1Store(at url: URL) throws {
        let model = libraryV1()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            func insert(_ entity: String, _ values: [String: Any?]) throws -> ManagedObject {
                let object = ManagedObject(entity: model.entitiesByName[entity]!, insertInto: context)
                for (key, value) in values { try object.setValue(value, forKey: key) }
                return object
            }
            let tolkien = try insert("Author", ["name": "Tolkien", "born": Date(timeIntervalSince1970: -2_450_000_000)])
            let austen = try insert("Author", ["name": "Austen"])
            let anonymous = try insert("Author", ["name": nil])
            _ = try insert("Book", ["title": "The Hobbit", "pages": 310, "legacy": "x", "author": tolkien])
            _ = try insert("Book", ["title": "The Silmarillion", "pages": 365, "author": tolkien])
            _ = try insert("Book", ["title": "Emma", "pages": 474, "author": austen])
            _ = try insert("Book", ["title": "Beowulf", "pages": nil, "author": anonymous])
            _ = try insert("Book", ["title": "Orphan", "pages": 12])
            _ = try insert("Obsolete", ["note": "a"])
            _ = try insert("Obsolete", ["note": "b"])
            try context.save()
        }
        try coordinator.remove(coordinator.persistentStores[0])
    }

    static var migrating: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        return options
    }

    @Test func codeModelsMigrateRenamesDefaultsAndRemovals() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Library.sqlite")
        try Self.makeLibraryV1Store(at: url)
        let before = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        let maxBefore = try SQLiteReference(url).rows("SELECT Z_NAME, Z_MAX FROM Z_PRIMARYKEY")

        let model = Self.libraryV2()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = Self.migrating
        let reports = Mutex<[Double]>([])
        options.migrationProgress = { fraction in reports.withLock { $0.append(fraction) } }
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)

        // Same store, new hashes; progress from 0 to 1, never going back.
        #expect(store.identifier == before[StoreMetadataKey.storeUUID] as? String)
        let after = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        #expect(model.isConfiguration(withName: nil, compatibleWithStoreMetadata: after))
        #expect(!model.isConfiguration(withName: nil, compatibleWithStoreMetadata: before))
        let fractions = reports.withLock { $0 }
        #expect(fractions.first == 0 && fractions.last == 1)
        #expect(fractions == fractions.sorted())

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let writers = try context.fetch(FetchRequest<ManagedObject>(entityName: "Writer", predicate: nil,
                                                                        sortDescriptors: [FetchSort(key: "name")]))
            #expect(try writers.map { try $0.value(forKey: "name") as? String } == ["Austen", "Tolkien", "Unknown"])
            #expect(try writers.allSatisfy { try $0.value(forKey: "country") as? String == "NZ" })
            let tolkien = writers[1]
            #expect(try (tolkien.value(forKey: "born") as? Date) == Date(timeIntervalSince1970: -2_450_000_000))
            let tolkienBooks = try (tolkien.value(forKey: "books") as? Set<ManagedObject> ?? [])
                .compactMap { try $0.value(forKey: "heading") as? String }.sorted()
            #expect(tolkienBooks == ["The Hobbit", "The Silmarillion"])

            let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book", predicate: nil,
                                                                      sortDescriptors: [FetchSort(key: "heading")]))
            #expect(try books.map { try $0.value(forKey: "heading") as? String }
                    == ["Beowulf", "Emma", "Orphan", "The Hobbit", "The Silmarillion"])
            #expect(try books.map { try $0.value(forKey: "pages") as? Int } == [0, 474, 12, 310, 365])
            #expect(try books.map { try ($0.value(forKey: "author") as? ManagedObject)?.value(forKey: "name") as? String }
                    == ["Unknown", "Austen", nil, "Tolkien", "Tolkien"])
            #expect(try books.allSatisfy { try $0.value(forKey: "publisher") == nil && $0.value(forKey: "isbn") == nil })
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Publisher")) == 0)

            // New rows continue each root's key counter.
            let book = ManagedObject(entity: model.entitiesByName["Book"]!, insertInto: context)
            try book.setValue("New", forKey: "heading")
            try context.save()
            #expect(book.objectID.primaryKey == 6)
        }

        let file = try SQLiteReference(url)
        #expect(try file.rows("SELECT Z_ENT, Z_NAME, Z_SUPER, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
                == [["1", "Book", "0", "6"], ["2", "Publisher", "0", "0"], ["3", "Writer", "0", "3"]])
        #expect(maxBefore.contains(["Author", "3"]) && maxBefore.contains(["Book", "5"]))
        #expect(try file.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z%' ORDER BY name")
                == [["ZBOOK"], ["ZPUBLISHER"], ["ZWRITER"], ["Z_METADATA"], ["Z_MODELCACHE"], ["Z_PRIMARYKEY"]])
        #expect(try file.rows("SELECT count(*) FROM sqlite_master WHERE name LIKE '%MIGRATING%'") == [["0"]])
        #expect(try file.rows("PRAGMA integrity_check") == [["ok"]])
        #expect(try leftovers(in: directory.url).isEmpty)
    }

    @Test func withoutMigrationOptionsTheErrorNamesWhatDiffers() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Library.sqlite")
        try Self.makeLibraryV1Store(at: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: Self.libraryV2())
        var options = StoreOptions()
        options.migratesAutomatically = true   // without infersMappingModel: no migration
        let error = try #require(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        }
        #expect(error.code == .incompatibleModel)
        #expect(error.description.contains("Publisher"), "\(error)")
        #expect(error.description.contains(url.path))
        #expect(coordinator.persistentStores.isEmpty)
    }

    @Test func readOnlyStoreIsNotMigrated() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Library.sqlite")
        try Self.makeLibraryV1Store(at: url)
        var options = Self.migrating
        options.isReadOnly = true
        let error = try #require(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: Self.libraryV2()).addPersistentStore(type: .sqlite, at: url, options: options)
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("read-only"))
    }

    /// Changes the inference refuses: each throws before the file changes, naming the property.
    @Test(arguments: [
        ("type change", "Book.pages", { @Sendable (book: EntityDescription) in
            book.properties = book.properties.map { $0.name == "pages" ? AttributeDescription(name: "pages", type: .string) : $0 }
        }),
        ("to-one to to-many", "Book.author", { @Sendable (book: EntityDescription) in
            book.properties = book.properties.map {
                $0.name == "author" ? RelationshipDescription(name: "author", destination: "Writer", isToMany: true) : $0
            }
        }),
        ("required without default", "Book.isbn", { @Sendable (book: EntityDescription) in
            book.properties = book.properties.map {
                $0.name == "isbn" ? AttributeDescription(name: "isbn", type: .string, isOptional: false) : $0
            }
        }),
        ("required relationship", "Book.publisher", { @Sendable (book: EntityDescription) in
            book.properties = book.properties.map {
                $0.name == "publisher" ? RelationshipDescription(name: "publisher", destination: "Publisher", inverse: "books", isOptional: false) : $0
            }
        }),
    ] as [(String, String, @Sendable (EntityDescription) -> Void)])
    func changesThatCannotBeInferredThrowBeforeTheFileIsTouched(change: String, property: String,
                                                                edit: @Sendable (EntityDescription) -> Void) throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Library.sqlite")
        try Self.makeLibraryV1Store(at: url)
        let bytes = try Data(contentsOf: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: Self.libraryV2(bookChanges: edit))
        let error = try #require(throws: PersistentStoreError.self) {
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.migrating)
        }
        #expect(error.code == .migrationFailed, "\(change)")
        #expect(error.message.contains(property), "\(change): \(error)")
        #expect(try Data(contentsOf: url) == bytes)
        #expect(try leftovers(in: directory.url).isEmpty)
        // Still the version 1 store.
        try PersistentStoreCoordinator(managedObjectModel: Self.libraryV1()).addPersistentStore(type: .sqlite, at: url)
    }

    /// An entity added inside a hierarchy renumbers the entities after it: rows,
    /// `Z_PRIMARYKEY` and the entity column of a to-one into the hierarchy follow.
    @Test func inheritanceRenumberingFollowsToOneEntityColumns() throws {
        func model(withBoat: Bool) -> ManagedObjectModel {
            let car = EntityDescription(name: "Car", properties: [AttributeDescription(name: "doors", type: .integer16)])
            let boat = EntityDescription(name: "Boat", properties: [AttributeDescription(name: "sails", type: .integer16)])
            let vehicle = EntityDescription(name: "Vehicle", properties: [
                AttributeDescription(name: "plate", type: .string),
                RelationshipDescription(name: "owner", destination: "Person", inverse: "vehicle"),
            ])
            vehicle.subentities = withBoat ? [car, boat] : [car]
            let person = EntityDescription(name: "Person", properties: [
                AttributeDescription(name: "name", type: .string),
                RelationshipDescription(name: "vehicle", destination: "Vehicle", inverse: "owner"),
            ])
            return ManagedObjectModel(entities: [person, vehicle, car] + (withBoat ? [boat] : []))
        }
        let directory = TemporaryDirectory()
        let url = directory.file("Garage.sqlite")
        do {
            let v1 = model(withBoat: false)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: v1)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            try context.performAndWait {
                let person = ManagedObject(entity: v1.entitiesByName["Person"]!, insertInto: context)
                try person.setValue("Ann", forKey: "name")
                let car = ManagedObject(entity: v1.entitiesByName["Car"]!, insertInto: context)
                try car.setValue("ABC", forKey: "plate")
                try car.setValue(4, forKey: "doors")
                try person.setValue(car, forKey: "vehicle")
                let plain = ManagedObject(entity: v1.entitiesByName["Vehicle"]!, insertInto: context)
                try plain.setValue("XYZ", forKey: "plate")
                try context.save()
            }
        }
        #expect(try SQLiteReference(url).rows("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT")
                == [["1", "Person"], ["2", "Vehicle"], ["3", "Car"]])

        let v2 = model(withBoat: true)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v2)
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.migrating)
        let file = try SQLiteReference(url)
        #expect(try file.rows("SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
                == [["1", "Person", "0"], ["2", "Vehicle", "0"], ["3", "Boat", "2"], ["4", "Car", "2"]])
        #expect(try file.rows("SELECT ZPLATE, Z_ENT FROM ZVEHICLE ORDER BY ZPLATE") == [["ABC", "4"], ["XYZ", "2"]])
        #expect(try file.rows("SELECT Z2_VEHICLE FROM ZPERSON") == [["4"]])
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let person = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Person")).first)
            let vehicle = try #require(try person.value(forKey: "vehicle") as? ManagedObject)
            #expect(vehicle.entity.name == "Car")
            #expect(try vehicle.value(forKey: "doors") as? Int == 4)
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Vehicle")) == 2)
        }
    }

    /// Renamed entities and relationships renumber the entities: join tables and
    /// ordered-relationship ranks (`Z_FOK_`) follow under their new names.
    /// Notes with tags (many-to-many) in an ordered playlist; `renamed` is version 2:
    /// Tag renamed Label, `Note.tags` renamed `labels`, an attribute added.
    static func notesModel(renamed: Bool) -> ManagedObjectModel {
        let tagName = renamed ? "Label" : "Tag"
        let tags = RelationshipDescription(name: renamed ? "labels" : "tags", destination: tagName,
                                           inverse: "notes", isToMany: true)
        if renamed { tags.renamingIdentifier = "tags" }
        let note = EntityDescription(name: "Note", properties: [
            AttributeDescription(name: "text", type: .string),
            tags,
            RelationshipDescription(name: "playlist", destination: "Playlist", inverse: "notes"),
        ] + (renamed ? [AttributeDescription(name: "pinned", type: .boolean, defaultValue: .bool(false))] : []))
        let tag = EntityDescription(name: tagName, properties: [
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "notes", destination: "Note", inverse: renamed ? "labels" : "tags", isToMany: true),
        ])
        if renamed { tag.renamingIdentifier = "Tag" }
        let playlist = EntityDescription(name: "Playlist", properties: [
            AttributeDescription(name: "title", type: .string),
            RelationshipDescription(name: "notes", destination: "Note", inverse: "playlist", isToMany: true, isOrdered: true),
        ])
        return ManagedObjectModel(entities: [note, tag, playlist])
    }

    @Test func joinTablesAndOrderFollowRenames() throws {
        let model = Self.notesModel(renamed:)
        let directory = TemporaryDirectory()
        let url = directory.file("Notes.sqlite")
        do {
            let v1 = model(false)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: v1)
            try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            try Self.insertNotes(v1, into: context)
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model(true))
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: Self.migrating)
        try Self.expectNotes(in: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator), tagEntity: "Label")
    }

    /// Notes a, b, c; tag red on a and b, blue on a; the playlist holds c, a, b in that order.
    static func insertNotes(_ v1: ManagedObjectModel, into context: ManagedObjectContext) throws {
        try context.performAndWait {
            func make(_ entity: String, _ key: String, _ value: String) throws -> ManagedObject {
                let object = ManagedObject(entity: v1.entitiesByName[entity]!, insertInto: context)
                try object.setValue(value, forKey: key)
                return object
            }
            let notes = try ["a", "b", "c"].map { try make("Note", "text", $0) }
            let red = try make("Tag", "name", "red")
            let blue = try make("Tag", "name", "blue")
            try notes[0].setValue(Set([red, blue]), forKey: "tags")
            try notes[1].setValue(Set([red]), forKey: "tags")
            let playlist = try make("Playlist", "title", "mix")
            try playlist.setValue([notes[2], notes[0], notes[1]], forKey: "notes")
            try context.save()
        }
    }

    static func expectNotes(in context: ManagedObjectContext, tagEntity: String) throws {
        try context.performAndWait {
            let labels = try context.fetch(FetchRequest<ManagedObject>(entityName: tagEntity, predicate: nil,
                                                                       sortDescriptors: [FetchSort(key: "name")]))
            let texts = try labels.map { label in
                try (label.value(forKey: "notes") as? Set<ManagedObject> ?? []).compactMap { try $0.value(forKey: "text") as? String }.sorted()
            }
            #expect(texts == [["a"], ["a", "b"]])
            let playlist = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Playlist")).first)
            let ordered = try (playlist.value(forKey: "notes") as? [ManagedObject] ?? []).map { try $0.value(forKey: "text") as? String }
            #expect(ordered == ["c", "a", "b"])
        }
    }

    // MARK: - migratePersistentStore, destroy, replace

    @Test(arguments: [(StoreType.sqlite, StoreType.sqlite), (.sqlite, .inMemory), (.inMemory, .sqlite)])
    func migratePersistentStoreCopiesObjectsAndRelationships(from source: StoreType, to destination: StoreType) throws {
        let directory = TemporaryDirectory()
        let sourceURL = source == .sqlite ? directory.file("Source.sqlite") : nil
        let destinationURL = destination == .sqlite ? directory.file("Destination.sqlite") : nil
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let old = try coordinator.addPersistentStore(type: source, at: sourceURL)
        try coordinator.setMetadata(["Owner": "tests"], for: old)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for (symbol, prices) in [("AAA", [1.0, 2.0]), ("BBB", [3.0]), ("CCC", [])] {
                let company = Company(context: context)
                company.symbol = symbol
                for price in prices {
                    let update = StockUpdate(context: context)
                    update.price = price
                    update.company = company
                }
            }
            let orphan = StockUpdate(context: context)
            orphan.price = 9
            try context.save()
        }

        let new = try coordinator.migratePersistentStore(old, to: destinationURL, type: destination)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores[0] === new)
        #expect(new.type == destination && new.identifier != old.identifier)
        #expect(new.metadata["Owner"] as? String == "tests")
        if let sourceURL { #expect(FileManager.default.fileExists(atPath: sourceURL.path)) }

        let fresh = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try fresh.performAndWait {
            let companies = try fresh.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                  sortDescriptors: [FetchSort(key: "symbol")]))
            #expect(companies.map(\.symbol) == ["AAA", "BBB", "CCC"])
            #expect(companies.map { $0.updates.map(\.price).sorted() } == [[1, 2], [3], []])
            #expect(companies.allSatisfy { $0.objectID.storeIdentifier == new.identifier })
            #expect(try fresh.count(for: FetchRequest<StockUpdate>(entityName: "StockUpdate")) == 4)
        }
        if let destinationURL {
            // Written to disk: a new coordinator reads the same.
            let reopened = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
            try reopened.addPersistentStore(type: .sqlite, at: destinationURL)
            let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: reopened)
            let updates = try reader.performAndWait { try reader.count(for: FetchRequest<StockUpdate>(entityName: "StockUpdate")) }
            #expect(updates == 4)
            #expect(try PersistentStoreCoordinator.metadataForPersistentStore(at: destinationURL)["Owner"] as? String == "tests")
        }
    }

    /// Many-to-many contents and the order of an ordered to-many carry over too.
    @Test(arguments: [StoreType.inMemory, .sqlite])
    func migratePersistentStoreKeepsManyToManyAndOrder(to destination: StoreType) throws {
        let directory = TemporaryDirectory()
        let model = Self.notesModel(renamed: false)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let old = try coordinator.addPersistentStore(type: .sqlite, at: directory.file("Notes.sqlite"))
        try Self.insertNotes(model, into: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator))
        let new = try coordinator.migratePersistentStore(old, to: destination == .sqlite ? directory.file("Copy.sqlite") : nil, type: destination)
        try Self.expectNotes(in: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator), tagEntity: "Tag")
        // And back into SQLite.
        _ = try coordinator.migratePersistentStore(new, to: directory.file("Back.sqlite"), type: .sqlite)
        try Self.expectNotes(in: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator), tagEntity: "Tag")
    }

    @Test func migratePersistentStoreRefusesAnOccupiedLocation() throws {
        let stack = try TestStack()
        let occupied = stack.directory.file("Occupied.sqlite")
        try Data("x".utf8).write(to: occupied)
        let error = try #require(throws: PersistentStoreError.self) {
            try stack.coordinator.migratePersistentStore(stack.coordinator.persistentStores[0], to: occupied)
        }
        #expect(error.code == .migrationFailed)
        #expect(stack.coordinator.persistentStores.count == 1)
        #expect(try Data(contentsOf: occupied) == Data("x".utf8))
        let alreadyAdded = try #require(throws: PersistentStoreError.self) {
            try stack.coordinator.migratePersistentStore(stack.coordinator.persistentStores[0], to: stack.storeURL)
        }
        #expect(alreadyAdded.code == .alreadyAdded)
    }

    @Test func destroyRemovesTheFilesAndTheStoreInUse() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        try context.performAndWait {
            Company(context: context).symbol = "A"
            try context.save()
        }
        #expect(FileManager.default.fileExists(atPath: stack.storeURL.path + "-wal"))
        // Another coordinator on the same file sees the store vanish, with an error, not stale rows.
        let other = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try other.addPersistentStore(type: .sqlite, at: stack.storeURL)

        try stack.coordinator.destroyPersistentStore(at: stack.storeURL)
        #expect(stack.coordinator.persistentStores.isEmpty)
        // Still open elsewhere: emptied, not unlinked (the other connection would delete a new store's -wal).
        #expect(try SQLiteReference(stack.storeURL).rows("SELECT count(*) FROM sqlite_master") == [["0"]])
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        let stale = reader.performAndWait { Result { try reader.fetch(FetchRequest<Company>(entityName: "Company")) } }
        #expect(throws: (any Error).self) { try stale.get() }

        // Once nobody has it open, the files go.
        try other.remove(other.persistentStores[0])
        try stack.coordinator.destroyPersistentStore(at: stack.storeURL)
        for suffix in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: stack.storeURL.path + suffix), "\(suffix)")
        }
        // Nothing there any more: not an error. A file that is not a store is left alone.
        try stack.coordinator.destroyPersistentStore(at: stack.storeURL)
        let text = stack.directory.file("notes.txt")
        try Data("keep me".utf8).write(to: text)
        #expect(throws: PersistentStoreError.self) { try stack.coordinator.destroyPersistentStore(at: text) }
        #expect(FileManager.default.fileExists(atPath: text.path))
    }

    @Test func migrationRefusesAStoreOpenElsewhere() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Library.sqlite")
        try Self.makeLibraryV1Store(at: url)
        let holder = PersistentStoreCoordinator(managedObjectModel: Self.libraryV1())
        try holder.addPersistentStore(type: .sqlite, at: url)
        let error = try #require(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator(managedObjectModel: Self.libraryV2()).addPersistentStore(type: .sqlite, at: url, options: Self.migrating)
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("another connection"), "\(error)")
        try holder.remove(holder.persistentStores[0])
        try PersistentStoreCoordinator(managedObjectModel: Self.libraryV2()).addPersistentStore(type: .sqlite, at: url, options: Self.migrating)
    }

    @Test func replaceCopiesAStoreOverAnother() throws {
        let source = try TestStack()
        let context = source.newContext()
        try context.performAndWait {
            Company(context: context).symbol = "FROM-SOURCE"
            try context.save()
        }
        let target = try TestStack()
        let targetStore = target.coordinator.persistentStores[0]
        #expect(throws: PersistentStoreError.self) {
            try target.coordinator.replacePersistentStore(at: target.storeURL, withPersistentStoreFrom: source.storeURL)
        }
        try target.coordinator.remove(targetStore)
        try target.coordinator.replacePersistentStore(at: target.storeURL, withPersistentStoreFrom: source.storeURL)
        #expect(!FileManager.default.fileExists(atPath: target.storeURL.path + "-wal"))

        let reopened = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try reopened.addPersistentStore(type: .sqlite, at: target.storeURL)
        #expect(store.identifier == source.coordinator.persistentStores[0].identifier)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: reopened)
        let symbols = try reader.performAndWait { try reader.fetch(FetchRequest<Company>(entityName: "Company")).map(\.symbol) }
        #expect(symbols == ["FROM-SOURCE"])
        #expect(try leftovers(in: target.directory.url).isEmpty)
        let missing = try #require(throws: PersistentStoreError.self) {
            try reopened.replacePersistentStore(at: target.directory.file("Other.sqlite"),
                                                withPersistentStoreFrom: target.directory.file("Missing.sqlite"))
        }
        #expect(missing.code == .cannotOpen)
    }
}

/// Temporary files (hidden: `.name.migrating-…`) a migration or replacement left beside a store.
func leftovers(in directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") }
}
