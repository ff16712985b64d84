import DataStackPostgreSQL
import Dispatch
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// Core Data's inferred lightweight migration, run against the SQLite store and
/// the PostgreSQL store alike: a store written with model version 1 and opened
/// with version 2 (`migratesAutomatically` + `infersMappingModel`) must come out
/// the same on both, and a change that cannot be inferred must be refused the
/// same way, leaving every saved row as it was.
///
/// Each scenario seeds a store through one coordinator with version 1, removes
/// the store from it, opens it with version 2 through a new coordinator, reads
/// the rows back with fetches, and opens it once more with version 2 and no
/// migration options. Every coordinator gets a model object of its own (a model
/// freezes once a coordinator uses it).
@Suite("Migration contract", .serialized)
struct MigrationContractTests {
    // MARK: - 1. New attributes

    @Test("new attributes: old rows keep their values, defaults fill old rows, new objects get fresh keys", arguments: StoreKind.allCases)
    func newAttributes(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        let migrated = try kind.coordinator(Self.inventoryWithNewAttributes(), at: seeded.location, options: Self.migrating)
        let context = makeContext(migrated)
        #expect(try gadgets(in: context) == Self.seededGadgets)
        #expect(try depots(in: context) == Self.seededDepots)
        let newKeys = try context.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Gadget", predicate: nil, sortDescriptors: [FetchSort(key: "name")])
            let old = try context.fetch(request)
            #expect(Set(old.compactMap(\.objectID.primaryKey)) == seeded.gadgetKeys, "migrated objects keep their primary keys")
            #expect(try old.map { try $0.value(forKey: "color") as? String } == [nil, nil, nil], "a new optional attribute is nil")
            #expect(try old.map { try $0.value(forKey: "stock") as? Int } == [7, 7, 7], "a new required attribute's default is filled in")
            #expect(try old.map { try $0.value(forKey: "origin") as? String } == ["unknown", "unknown", "unknown"],
                    "a new optional attribute's default is filled in")
            // The new columns can be queried.
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Gadget",
                                                                       predicate: try FetchPredicate(format: "stock == 7 AND color == nil"))) == 3)

            // New saves: an old row changed, two objects inserted.
            try old[0].setValue("green", forKey: "color")
            try old[0].setValue(9, forKey: "stock")
            let entity = try #require(migrated.managedObjectModel.entitiesByName["Gadget"])
            var inserted: [ManagedObject] = []
            for name in ["axle", "cog"] {
                let gadget = ManagedObject(entity: entity, insertInto: context)
                try gadget.setValue(name, forKey: "name")
                try gadget.setValue(old[1].value(forKey: "depot"), forKey: "depot")
                inserted.append(gadget)
            }
            try context.save()
            return inserted.compactMap(\.objectID.primaryKey)
        }
        #expect(newKeys.count == 2 && Set(newKeys).count == 2, "the new objects have two distinct keys: \(newKeys)")
        #expect(Set(newKeys).isDisjoint(with: seeded.gadgetKeys), "new keys \(newKeys) do not reuse the old ones \(seeded.gadgetKeys.sorted())")
        #expect(newKeys.allSatisfy { $0 > seeded.gadgetKeys.max() ?? 0 }, "new keys continue after the old ones")
        #expect(try count("Gadget", in: context) == 5)

        // A third coordinator, version 2, no migration options: the store now matches.
        let reopened = try kind.coordinator(Self.inventoryWithNewAttributes(), at: seeded.location)
        let reader = makeContext(reopened)
        #expect(try count("Gadget", in: reader) == 5)
        #expect(try count("Depot", in: reader) == 2)
        try reader.performAndWait {
            let rows = try reader.fetch(FetchRequest<ManagedObject>(entityName: "Gadget", predicate: nil, sortDescriptors: [FetchSort(key: "name")]))
            #expect(try rows.map { try $0.value(forKey: "name") as? String } == ["axle", "bolt", "cog", "gear", "nut"])
            #expect(try rows.map { try $0.value(forKey: "stock") as? Int } == [7, 9, 7, 7, 7])
            #expect(try rows.map { try $0.value(forKey: "color") as? String } == [nil, "green", nil, nil, nil])
            #expect(try rows.map { try ($0.value(forKey: "depot") as? ManagedObject)?.value(forKey: "city") as? String }
                    == ["Lima", "Oslo", "Lima", "Lima", "Oslo"])
        }
    }

    // MARK: - 2. Renames and a removed attribute

    /// Version 1: Author ↔ Book (to-one `author`, to-many `books`), Book ↔ Tag
    /// (many-to-many); version 2 (`renamed`): Author renamed Writer, Book.title
    /// renamed `heading`, Book.legacy removed.
    private static func library(renamed: Bool) -> ManagedObjectModel {
        let authorName = renamed ? "Writer" : "Author"
        let author = EntityDescription(name: authorName, properties: [
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "country", type: .string),
            RelationshipDescription(name: "books", destination: "Book", inverse: "author", isToMany: true),
        ])
        let title = AttributeDescription(name: renamed ? "heading" : "title", type: .string)
        if renamed {
            author.renamingIdentifier = "Author"
            title.renamingIdentifier = "title"
        }
        let book = EntityDescription(name: "Book", properties: [
            title,
            AttributeDescription(name: "pages", type: .integer32),
            RelationshipDescription(name: "author", destination: authorName, inverse: "books"),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "books", isToMany: true),
        ] + (renamed ? [] : [AttributeDescription(name: "legacy", type: .string)]))
        let tag = EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "books", destination: "Book", inverse: "tags", isToMany: true),
        ])
        return ManagedObjectModel(entities: [author, book, tag])
    }

    /// Austen and Tolkien; Emma (Austen, classic), The Hobbit (Tolkien, classic
    /// and fantasy), Orphan (no author, no tags); the tag `unused` has no books.
    private func seedLibrary(_ kind: StoreKind) throws -> URL {
        let model = Self.library(renamed: false)
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(model, at: location)
        let context = makeContext(coordinator)
        try context.performAndWait {
            func insert(_ entity: String, _ values: [String: Any?]) throws -> ManagedObject {
                let object = ManagedObject(entity: try #require(model.entitiesByName[entity]), insertInto: context)
                for (key, value) in values { try object.setValue(value, forKey: key) }
                return object
            }
            let tolkien = try insert("Author", ["name": "Tolkien", "country": "UK"])
            let austen = try insert("Author", ["name": "Austen", "country": "England"])
            let classic = try insert("Tag", ["name": "classic"])
            let fantasy = try insert("Tag", ["name": "fantasy"])
            _ = try insert("Tag", ["name": "unused"])
            _ = try insert("Book", ["title": "The Hobbit", "pages": 310, "legacy": "x", "author": tolkien, "tags": Set([classic, fantasy])])
            _ = try insert("Book", ["title": "Emma", "pages": 474, "legacy": "y", "author": austen, "tags": Set([classic])])
            _ = try insert("Book", ["title": "Orphan", "pages": 12])
            try context.save()
        }
        try close(coordinator)
        return location
    }

    /// What the library holds after the migration: writers with their books,
    /// books with their writer and tags, tags with their books.
    private func expectLibrary(in context: ManagedObjectContext, extraHobbitBook: String? = nil,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        try context.performAndWait {
            func names(_ value: Any?, _ key: String) throws -> [String] {
                try (value as? Set<ManagedObject> ?? []).compactMap { try $0.value(forKey: key) as? String }.sorted()
            }
            let writers = try context.fetch(FetchRequest<ManagedObject>(entityName: "Writer", predicate: nil,
                                                                        sortDescriptors: [FetchSort(key: "name")]))
            #expect(try writers.map { try $0.value(forKey: "name") as? String } == ["Austen", "Tolkien"], sourceLocation: sourceLocation)
            #expect(try writers.map { try $0.value(forKey: "country") as? String } == ["England", "UK"], sourceLocation: sourceLocation)
            #expect(try writers.map { try names($0.value(forKey: "books"), "heading") }
                    == [["Emma"], (["The Hobbit"] + (extraHobbitBook.map { [$0] } ?? [])).sorted()],
                    "to-many: each writer still has its books", sourceLocation: sourceLocation)

            let books = try context.fetch(FetchRequest<ManagedObject>(entityName: "Book", predicate: nil,
                                                                      sortDescriptors: [FetchSort(key: "heading")]))
            let headings = ["Emma", "Orphan", "The Hobbit"] + (extraHobbitBook.map { [$0] } ?? [])
            #expect(try books.map { try $0.value(forKey: "heading") as? String } == headings.sorted(),
                    "the renamed attribute keeps the values", sourceLocation: sourceLocation)
            let byHeading = Dictionary(uniqueKeysWithValues: try books.map { (try #require(try $0.value(forKey: "heading") as? String), $0) })
            #expect(try byHeading["Emma"]?.value(forKey: "pages") as? Int == 474, sourceLocation: sourceLocation)
            #expect(try byHeading["The Hobbit"]?.value(forKey: "pages") as? Int == 310, sourceLocation: sourceLocation)
            #expect(try byHeading["Orphan"]?.value(forKey: "pages") as? Int == 12, sourceLocation: sourceLocation)
            #expect(try (byHeading["Emma"]?.value(forKey: "author") as? ManagedObject)?.value(forKey: "name") as? String == "Austen",
                    "to-one: each book still has its writer", sourceLocation: sourceLocation)
            #expect(try (byHeading["The Hobbit"]?.value(forKey: "author") as? ManagedObject)?.value(forKey: "name") as? String == "Tolkien",
                    sourceLocation: sourceLocation)
            #expect(try byHeading["Orphan"]?.value(forKey: "author") == nil, sourceLocation: sourceLocation)
            #expect(try names(byHeading["The Hobbit"]?.value(forKey: "tags"), "name") == ["classic", "fantasy"],
                    "many-to-many: each book still has its tags", sourceLocation: sourceLocation)
            #expect(try names(byHeading["Emma"]?.value(forKey: "tags"), "name") == ["classic"], sourceLocation: sourceLocation)
            #expect(try names(byHeading["Orphan"]?.value(forKey: "tags"), "name") == [], sourceLocation: sourceLocation)

            let tags = try context.fetch(FetchRequest<ManagedObject>(entityName: "Tag", predicate: nil, sortDescriptors: [FetchSort(key: "name")]))
            #expect(try tags.map { try $0.value(forKey: "name") as? String } == ["classic", "fantasy", "unused"], sourceLocation: sourceLocation)
            #expect(try tags.map { try names($0.value(forKey: "books"), "heading") }
                    == [["Emma", "The Hobbit"], (["The Hobbit"] + (extraHobbitBook.map { [$0] } ?? [])).sorted(), []],
                    "many-to-many, the other side", sourceLocation: sourceLocation)

            // The store answers predicates through the renamed entity and relationships.
            let tolkiens = FetchRequest<ManagedObject>(entityName: "Book", predicate: try FetchPredicate(format: "author.name == %@", "Tolkien"))
            #expect(try context.count(for: tolkiens) == 1 + (extraHobbitBook == nil ? 0 : 1), sourceLocation: sourceLocation)
            let classics = FetchRequest<ManagedObject>(entityName: "Book", predicate: try FetchPredicate(format: "ANY tags.name == %@", "classic"))
            #expect(try context.count(for: classics) == 2, sourceLocation: sourceLocation)
        }
    }

    @Test("renamed entity and attribute, removed attribute: values follow the renames, relationships connect the same objects",
          arguments: StoreKind.allCases)
    func renames(_ kind: StoreKind) throws {
        let location = try seedLibrary(kind)
        let migrated = try kind.coordinator(Self.library(renamed: true), at: location, options: Self.migrating)
        let context = makeContext(migrated)
        try expectLibrary(in: context)

        // A save through the renamed entity and relationships.
        try context.performAndWait {
            let model = migrated.managedObjectModel
            let tolkien = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Writer", predicate: try FetchPredicate(format: "name == %@", "Tolkien"))).first)
            let fantasy = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Tag", predicate: try FetchPredicate(format: "name == %@", "fantasy"))).first)
            let book = ManagedObject(entity: try #require(model.entitiesByName["Book"]), insertInto: context)
            try book.setValue("The Silmarillion", forKey: "heading")
            try book.setValue(365, forKey: "pages")
            try book.setValue(tolkien, forKey: "author")
            try book.setValue(Set([fantasy]), forKey: "tags")
            try context.save()
        }

        let reopened = try kind.coordinator(Self.library(renamed: true), at: location)
        try expectLibrary(in: makeContext(reopened), extraHobbitBook: "The Silmarillion")
    }

    // MARK: - 3. Removed and added entities

    /// Version 1: Company ↔ Product (to-many `products`) and Company ↔ Memo
    /// (to-many `memos`); version 2 (`replaced`): Memo and `Company.memos`
    /// removed, Supplier (to-one `company` ↔ `Company.suppliers`) added.
    private static func shop(replaced: Bool) -> ManagedObjectModel {
        let company = EntityDescription(name: "Company", properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "products", destination: "Product", inverse: "company", isToMany: true, deleteRule: .cascade),
            replaced
                ? RelationshipDescription(name: "suppliers", destination: "Supplier", inverse: "company", isToMany: true)
                : RelationshipDescription(name: "memos", destination: "Memo", inverse: "company", isToMany: true),
        ])
        let product = EntityDescription(name: "Product", properties: [
            AttributeDescription(name: "title", type: .string),
            AttributeDescription(name: "price", type: .double),
            RelationshipDescription(name: "company", destination: "Company", inverse: "products"),
        ])
        let memo = EntityDescription(name: "Memo", properties: [
            AttributeDescription(name: "text", type: .string),
            RelationshipDescription(name: "company", destination: "Company", inverse: "memos"),
        ])
        let supplier = EntityDescription(name: "Supplier", properties: [
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "company", destination: "Company", inverse: "suppliers"),
        ])
        return ManagedObjectModel(entities: [company, product] + (replaced ? [supplier] : [memo]))
    }

    @Test("removed entity, added entity: the kept entities' rows are intact, the new one is empty and saves",
          arguments: StoreKind.allCases)
    func entitiesRemovedAndAdded(_ kind: StoreKind) throws {
        let location = try kind.makeLocation()
        do {
            let model = Self.shop(replaced: false)
            let coordinator = try kind.coordinator(model, at: location)
            let context = makeContext(coordinator)
            try context.performAndWait {
                func insert(_ entity: String, _ values: [String: Any?]) throws -> ManagedObject {
                    let object = ManagedObject(entity: try #require(model.entitiesByName[entity]), insertInto: context)
                    for (key, value) in values { try object.setValue(value, forKey: key) }
                    return object
                }
                let acme = try insert("Company", ["symbol": "ACME", "name": "Acme Corp"])
                let globex = try insert("Company", ["symbol": "GLBX", "name": nil])
                _ = try insert("Product", ["title": "anvil", "price": 99.5, "company": acme])
                _ = try insert("Product", ["title": "rocket", "price": 1_000.25, "company": acme])
                _ = try insert("Product", ["title": "widget", "price": nil, "company": globex])
                _ = try insert("Product", ["title": "stray", "price": 1.0])
                _ = try insert("Memo", ["text": "call back", "company": acme])
                _ = try insert("Memo", ["text": "overdue", "company": acme])
                try context.save()
            }
            try close(coordinator)
        }

        func expectShop(_ context: ManagedObjectContext, suppliers: [String: [String]]) throws {
            try context.performAndWait {
                let companies = try context.fetch(FetchRequest<ManagedObject>(entityName: "Company", predicate: nil,
                                                                              sortDescriptors: [FetchSort(key: "symbol")]))
                #expect(try companies.map { try $0.value(forKey: "symbol") as? String } == ["ACME", "GLBX"])
                #expect(try companies.map { try $0.value(forKey: "name") as? String } == ["Acme Corp", nil])
                #expect(try companies.map { company in
                    try (company.value(forKey: "products") as? Set<ManagedObject> ?? []).compactMap { try $0.value(forKey: "title") as? String }.sorted()
                } == [["anvil", "rocket"], ["widget"]])
                #expect(try companies.map { company in
                    try (company.value(forKey: "suppliers") as? Set<ManagedObject> ?? []).compactMap { try $0.value(forKey: "name") as? String }.sorted()
                } == [suppliers["ACME"] ?? [], suppliers["GLBX"] ?? []])
                let products = try context.fetch(FetchRequest<ManagedObject>(entityName: "Product", predicate: nil,
                                                                             sortDescriptors: [FetchSort(key: "title")]))
                #expect(try products.map { try $0.value(forKey: "title") as? String } == ["anvil", "rocket", "stray", "widget"])
                #expect(try products.map { try $0.value(forKey: "price") as? Double } == [99.5, 1_000.25, 1.0, nil])
                #expect(try products.map { try ($0.value(forKey: "company") as? ManagedObject)?.value(forKey: "symbol") as? String }
                        == ["ACME", "ACME", nil, "GLBX"])
                #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Supplier")) == suppliers.values.joined().count)
            }
        }

        let migrated = try kind.coordinator(Self.shop(replaced: true), at: location, options: Self.migrating)
        let context = makeContext(migrated)
        try expectShop(context, suppliers: [:])
        try context.performAndWait {
            let acme = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'"))).first)
            let supplier = ManagedObject(entity: try #require(migrated.managedObjectModel.entitiesByName["Supplier"]), insertInto: context)
            try supplier.setValue("Iron Works", forKey: "name")
            try supplier.setValue(acme, forKey: "company")
            try context.save()
        }
        try expectShop(context, suppliers: ["ACME": ["Iron Works"]])

        let reopened = try kind.coordinator(Self.shop(replaced: true), at: location)
        try expectShop(makeContext(reopened), suppliers: ["ACME": ["Iron Works"]])
    }

    // MARK: - 4, 5. Changes that cannot be inferred

    @Test("an attribute made required without a default over NULL rows is refused, naming it, and nothing saved is lost",
          arguments: StoreKind.allCases)
    func requiredWithoutDefault(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        let v2 = Self.inventory { gadget in
            gadget.replaceProperty(named: "serial", with: AttributeDescription(name: "serial", type: .string, isOptional: false))
        }
        try expectRefused(kind, v2, at: seeded.location, code: .migrationFailed, naming: ["Gadget", "serial"])
        try expectInventoryUnchanged(kind, at: seeded.location)
    }

    @Test("an attribute's type change that cannot be inferred (String → Integer 64) is refused, naming it, and nothing saved is lost",
          arguments: StoreKind.allCases)
    func typeChangeRefused(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        let v2 = Self.inventory { gadget in
            gadget.replaceProperty(named: "label", with: AttributeDescription(name: "label", type: .integer64))
        }
        try expectRefused(kind, v2, at: seeded.location, code: .migrationFailed, naming: ["Gadget", "label"])
        try expectInventoryUnchanged(kind, at: seeded.location)
    }

    // MARK: - 6, 7. Migration not asked for, or not allowed

    @Test("without migration options a changed model is incompatible, and the store is unchanged", arguments: StoreKind.allCases)
    func withoutMigrationOptions(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        var onlyAutomatic = StoreOptions()
        onlyAutomatic.migratesAutomatically = true   // without infersMappingModel: no lightweight migration
        for options in [StoreOptions(), onlyAutomatic] {
            try expectRefused(kind, Self.inventoryWithNewAttributes(), at: seeded.location, options: options,
                              code: .incompatibleModel, naming: ["Gadget", "color"])
        }
        try expectInventoryUnchanged(kind, at: seeded.location)
    }

    @Test("a store that needs migrating, added read-only with migration options, is refused and unchanged", arguments: StoreKind.allCases)
    func readOnlyIsNotMigrated(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        var options = Self.migrating
        options.isReadOnly = true
        try expectRefused(kind, Self.inventoryWithNewAttributes(), at: seeded.location, options: options,
                          code: .migrationFailed, naming: ["read-only"])
        try expectInventoryUnchanged(kind, at: seeded.location)
    }

    // MARK: - 8. Integer widths

    @Test("Integer 16 → Integer 64 keeps every value, and the column takes 64-bit values afterwards", arguments: StoreKind.allCases)
    func integerWidening(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        func v2() -> ManagedObjectModel {
            Self.inventory { $0.replaceProperty(named: "quantity", with: AttributeDescription(name: "quantity", type: .integer64)) }
        }
        let migrated = try kind.coordinator(v2(), at: seeded.location, options: Self.migrating)
        let context = makeContext(migrated)
        #expect(try gadgets(in: context) == Self.seededGadgets)
        try context.performAndWait {
            let gear = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Gadget", predicate: try FetchPredicate(format: "quantity > %@", 30_000))).first)
            try gear.setValue(5_000_000_000, forKey: "quantity")
            try context.save()
        }
        let reopened = try kind.coordinator(v2(), at: seeded.location)
        let reader = makeContext(reopened)
        #expect(try gadgets(in: reader).map(\.quantity) == [5, 5_000_000_000, -300])
    }

    @Test("Integer 64 → Integer 16 with a stored value out of range is refused, naming the attribute, and nothing saved is lost",
          arguments: StoreKind.allCases)
    func integerNarrowingRefused(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        let v2 = Self.inventory { $0.replaceProperty(named: "weight", with: AttributeDescription(name: "weight", type: .integer16)) }
        try expectRefused(kind, v2, at: seeded.location, code: .migrationFailed, naming: ["Gadget", "weight"])
        try expectInventoryUnchanged(kind, at: seeded.location)
    }

    // MARK: - 9. Persistent history

    @Test("with history tracking, the migrated store's history holds nothing from before it, and a later save is recorded",
          arguments: StoreKind.allCases)
    func historyAcrossMigration(_ kind: StoreKind) throws {
        var tracking = StoreOptions()
        tracking.persistentHistoryTracking = true
        // Seeded with tracking, and changed once more: two transactions before the migration.
        let location = try seedInventory(kind, options: tracking).location
        let (oldestToken, newestToken): (PersistentHistoryToken, PersistentHistoryToken)
        do {
            let coordinator = try kind.coordinator(Self.inventory(), at: location, options: tracking)
            let context = makeContext(coordinator)
            context.transactionAuthor = "seeder"
            try context.performAndWait {
                let bolt = try #require(try context.fetch(FetchRequest<ManagedObject>(
                    entityName: "Gadget", predicate: try FetchPredicate(format: "name == 'bolt'"))).first)
                try bolt.setValue("crimson", forKey: "label")
                try context.save()
            }
            let seededHistory = try coordinator.fetchHistory(.fetchHistory(after: nil))
            #expect(seededHistory.map(\.author) == ["seeder", "seeder"])
            #expect(seededHistory.map { $0.changes?.count } == [5, 1], "the seed's five inserts and the update are recorded")
            oldestToken = try #require(seededHistory.first?.token)
            newestToken = try #require(seededHistory.last?.token)
            try close(coordinator)
        }

        var options = Self.migrating
        options.persistentHistoryTracking = true
        let migrated = try kind.coordinator(Self.inventoryWithNewAttributes(), at: location, options: options)
        let history = try migrated.fetchHistory(.fetchHistory(after: nil))
        #expect(history.allSatisfy { $0.author != "seeder" }, "no transaction from before the migration: \(history.map(\.author))")
        #expect(history.allSatisfy { ($0.changes ?? []).isEmpty },
                "no change from before the migration: \(history.flatMap { $0.changes ?? [] }.map { "\($0.changedObjectID.entity.name) \($0.changeType)" })")
        // A reader that had not read all of the old history is told it missed some;
        // one that had read all of it reads on, and finds no old change.
        do {
            let read = try migrated.fetchHistory(.fetchHistory(after: oldestToken))
            Issue.record("a token from before the deleted history still reads it: \(read.map(\.transactionNumber))")
        } catch let error as PersistentStoreError {
            #expect(error.code == .historyExpired, "\(error)")
        }
        let afterNewest = try migrated.fetchHistory(.fetchHistory(after: newestToken))
        #expect(afterNewest.allSatisfy { $0.author != "seeder" && ($0.changes ?? []).isEmpty })

        let context = makeContext(migrated)
        context.transactionAuthor = "after-migration"
        let start = try #require(try migrated.currentPersistentHistoryToken())
        try context.performAndWait {
            let bolt = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Gadget", predicate: try FetchPredicate(format: "name == 'bolt'"))).first)
            try bolt.setValue("green", forKey: "color")
            let gadget = ManagedObject(entity: try #require(migrated.managedObjectModel.entitiesByName["Gadget"]), insertInto: context)
            try gadget.setValue("axle", forKey: "name")
            try context.save()
        }
        let recorded = try migrated.fetchHistory(.fetchHistory(after: start))
        #expect(recorded.map(\.author) == ["after-migration"])
        let changes = recorded.flatMap { $0.changes ?? [] }
        #expect(changes.map { "\($0.changedObjectID.entity.name) \($0.changeType)" }.sorted() == ["Gadget insert", "Gadget update"])
        #expect(changes.first { $0.changeType == .update }?.updatedProperties == ["color"])

        // Readable through another coordinator (version 2, tracking, no migration options).
        let reopened = try kind.coordinator(Self.inventoryWithNewAttributes(), at: location, options: tracking)
        let again = try reopened.fetchHistory(.fetchHistory(after: nil))
        #expect(again.filter { $0.author == "after-migration" }.flatMap { $0.changes ?? [] }.count == 2)
        #expect(again.allSatisfy { $0.author != "seeder" })
        #expect(try count("Gadget", in: makeContext(reopened)) == 4)
    }

    // MARK: - 10. Progress

    @Test("migration progress is reported, never goes back, and ends at 1", arguments: StoreKind.allCases)
    func progress(_ kind: StoreKind) throws {
        let seeded = try seedInventory(kind)
        let reports = Mutex<[Double]>([])
        var options = Self.migrating
        options.migrationProgress = { fraction in reports.withLock { $0.append(fraction) } }
        let migrated = try kind.coordinator(Self.inventoryWithNewAttributes(), at: seeded.location, options: options)
        let fractions = reports.withLock { $0 }
        #expect(!fractions.isEmpty, "progress was reported")
        #expect(fractions.last == 1.0, "\(fractions)")
        #expect(fractions == fractions.sorted(), "non-decreasing: \(fractions)")
        #expect(fractions.allSatisfy { (0...1).contains($0) }, "\(fractions)")
        #expect(try gadgets(in: makeContext(migrated)) == Self.seededGadgets)

        // Opening the migrated store again migrates nothing and reports nothing more.
        let reportCount = fractions.count
        let reopened = try kind.coordinator(Self.inventoryWithNewAttributes(), at: seeded.location, options: options)
        #expect(reports.withLock { $0.count } == reportCount, "no migration, no progress")
        #expect(try count("Gadget", in: makeContext(reopened)) == 3)
        _ = try kind.coordinator(Self.inventoryWithNewAttributes(), at: seeded.location)
    }

    // MARK: - 11. Concurrent migration (PostgreSQL)

    @Test("two coordinators migrating the same database at once both open it, and it is migrated once",
          arguments: [StoreKind.postgreSQL])
    func concurrentMigration(_ kind: StoreKind) throws {
        for round in 1...3 {
            let seeded = try seedInventory(kind)
            let location = seeded.location
            let results = Mutex<[Result<PersistentStoreCoordinator, any Error>]>([])
            let ready = DispatchSemaphore(value: 0)
            let go = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            for _ in 0..<2 {
                done.enter()
                DispatchQueue.global().async {
                    let model = Self.inventoryWithNewAttributes()
                    ready.signal()
                    go.wait()
                    let result = Result { try kind.coordinator(model, at: location, options: Self.migrating) }
                    results.withLock { $0.append(result) }
                    done.leave()
                }
            }
            // Both threads are running and have their model before either opens.
            ready.wait()
            ready.wait()
            go.signal()
            go.signal()
            #expect(done.wait(timeout: .now() + 120) == .success, "round \(round): the two opens finished")
            let opened = results.withLock { $0 }
            #expect(opened.count == 2)
            var coordinators: [PersistentStoreCoordinator] = []
            for result in opened {
                switch result {
                case .success(let coordinator): coordinators.append(coordinator)
                case .failure(let error): Issue.record("round \(round): an open failed: \(error)")
                }
            }
            guard coordinators.count == 2 else { continue }

            // Each coordinator sees the rows once, with the defaults filled in.
            for coordinator in coordinators {
                let context = makeContext(coordinator)
                #expect(try gadgets(in: context) == Self.seededGadgets, "round \(round)")
                #expect(try depots(in: context) == Self.seededDepots, "round \(round)")
                let stocks = try context.performAndWait {
                    try context.fetch(FetchRequest<ManagedObject>(entityName: "Gadget")).map { try $0.value(forKey: "stock") as? Int }
                }
                #expect(stocks == [7, 7, 7], "round \(round)")
            }
            // Both save a new object: keys neither collide nor restart.
            var keys: [Int64] = []
            for (index, coordinator) in coordinators.enumerated() {
                let context = makeContext(coordinator)
                let key = try context.performAndWait {
                    let gadget = ManagedObject(entity: try #require(coordinator.managedObjectModel.entitiesByName["Gadget"]), insertInto: context)
                    try gadget.setValue("new-\(index)", forKey: "name")
                    try context.save()
                    return try #require(gadget.objectID.primaryKey)
                }
                keys.append(key)
            }
            #expect(Set(keys).count == 2 && Set(keys).isDisjoint(with: seeded.gadgetKeys), "round \(round): \(keys)")

            let reopened = try kind.coordinator(Self.inventoryWithNewAttributes(), at: location)
            let reader = makeContext(reopened)
            #expect(try count("Gadget", in: reader) == 5, "round \(round)")
            #expect(try count("Depot", in: reader) == 2, "round \(round)")
            for coordinator in coordinators + [reopened] { try close(coordinator) }
        }
    }
}
