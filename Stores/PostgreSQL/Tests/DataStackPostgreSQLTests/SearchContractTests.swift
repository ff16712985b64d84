import DataStackPostgreSQL
import Foundation
@_spi(StoreImplementation) import ObjectGraph
import Testing

/// `MATCHES[search]` and relevance sorts on the SQLite store (FTS5) and the
/// PostgreSQL store (its own `tsvector` index) alike: the same rows, in the same
/// relevance order, kept in step by saves and batch requests in their
/// transactions, and the same refusals.
@Suite("Search contract", .serialized)
struct SearchContractTests {
    /// Document (serial, unique; title and body indexed; note not) with an author (name indexed).
    static func model() -> ManagedObjectModel {
        let title = AttributeDescription(name: "title", type: .string)
        title.isIndexedBySpotlight = true
        let body = AttributeDescription(name: "body", type: .string)
        body.isIndexedBySpotlight = true
        let document = EntityDescription(name: "Document", properties: [
            AttributeDescription(name: "serial", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            title, body, AttributeDescription(name: "note", type: .string),
            RelationshipDescription(name: "author", destination: "Author", inverse: "documents"),
        ])
        document.uniquenessConstraints = [["serial"]]
        let name = AttributeDescription(name: "name", type: .string)
        name.isIndexedBySpotlight = true
        let author = EntityDescription(name: "Author", properties: [
            name, RelationshipDescription(name: "documents", destination: "Document", inverse: "author", isToMany: true),
        ])
        return ManagedObjectModel(entities: [document, author])
    }

    struct Fixture {
        let kind: StoreKind
        let coordinator: PersistentStoreCoordinator
        let location: URL
        let model: ManagedObjectModel

        init(_ kind: StoreKind, model: ManagedObjectModel = SearchContractTests.model()) throws {
            self.kind = kind
            self.model = model
            location = try kind.makeLocation()
            coordinator = try kind.coordinator(model, at: location)
        }

        func context() -> ManagedObjectContext { ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator) }

        /// Saves documents `(serial, title, body)`, the odd ones by one author.
        func insert(_ documents: [(Int, String?, String?)], author: String? = nil) throws {
            let context = context()
            try context.performAndWait {
                let writer = try author.map { name -> ManagedObject in
                    let object = ManagedObject(entity: try #require(model.entitiesByName["Author"]), insertInto: context)
                    try object.setValue(name, forKey: "name")
                    return object
                }
                for (serial, title, body) in documents {
                    let object = ManagedObject(entity: try #require(model.entitiesByName["Document"]), insertInto: context)
                    try object.setValue(serial, forKey: "serial")
                    try object.setValue(title, forKey: "title")
                    try object.setValue(body, forKey: "body")
                    if serial % 2 == 1, let writer { try object.setValue(writer, forKey: "author") }
                }
                try context.save()
            }
        }

        /// The serials of documents matching `format`, in the order of `sorts` (serial when none).
        func serials(_ format: String?, _ arguments: Any..., sorts: [FetchSort] = [FetchSort(key: "serial")], limit: Int = 0) throws -> [Int] {
            let context = context()
            return try context.performAndWait {
                var request = FetchRequest<ManagedObject>(entityName: "Document")
                request.predicate = try format.map { try FetchPredicate(format: $0, argumentArray: arguments) }
                request.sortDescriptors = sorts
                request.fetchLimit = limit
                return try context.fetch(request).map { try #require($0.value(forKey: "serial") as? Int) }
            }
        }

        func count(_ format: String) throws -> Int {
            let context = context()
            return try context.performAndWait {
                try context.count(for: FetchRequest<ManagedObject>(entityName: "Document", predicate: try FetchPredicate(format: format)))
            }
        }

        /// The error a fetch throws, described; "no error" if it does not.
        func failure(_ format: String?, sorts: [FetchSort] = []) -> String {
            do {
                _ = try serials(format, sorts: sorts + [FetchSort(key: "serial")])
                return "no error"
            } catch {
                return "\(error)"
            }
        }
    }

    // MARK: - A corpus, both stores, the in-memory evaluator

    /// Words with case, diacritics, decomposed marks, punctuation, digits and other scripts.
    static let vocabulary = [
        "apple", "Apple", "APPLES", "pie", "pies", "crème", "creme", "CRÈME", "brûlée", "brulee", "e-mail", "email",
        "naïve", "naive", "Straße", "strasse", "Æsir", "œuvre", "Øresund", "Łódź", "lodz", "café", "cafe\u{301}", "Café",
        "x\u{301}y", "ǖber", "uber", "ﬁle", "file", "ΣΊΣΥΦΟΣ", "σίσυφος", "Москва", "москва", "Ёлка", "елка",
        "Tiếng", "Việt", "tieng", "viet", "日本語", "한국어", "3.14", "42", "a1b2", "don't", "dont", "it's",
        "under_score", "AT&T", "c++", "½", "ß", "the", "and", "or", "not", "engine", "engines", "engineer",
    ]

    /// A deterministic corpus: `count` documents of 0–12 words in the title and 0–30 in the body.
    static func corpus(count: Int) -> [(Int, String?, String?)] {
        var generator = SplitMix(seed: 37)
        func text(_ maximum: Int) -> String? {
            let length = Int(generator.next() % UInt64(maximum + 2)) - 1
            if length < 0 { return nil }
            let separators = [" ", " ", " ", ", ", "-", ". ", "\t", "/", " (", ") "]
            return (0..<length).map { _ in
                vocabulary[Int(generator.next() % UInt64(vocabulary.count))] + separators[Int(generator.next() % UInt64(separators.count))]
            }.joined()
        }
        return (1...count).map { ($0, text(12), text(30)) }
    }

    /// Queries over the vocabulary: words, prefixes, phrases, AND, OR, NOT, groups, diacritics and case.
    static let queries = [
        "apple", "APPLE", "appl*", "a*", "pie", "\"apple pie\"", "\"apple pie\" *", "\"apple pi\"*", "apple pie",
        "apple AND pie", "apple OR pie", "apple NOT pie", "apple NOT (pie OR pies)", "(apple OR creme) engine",
        "creme", "crème", "CREME", "brulee", "\"crème brûlée\"", "e-mail", "email", "\"e mail\"", "naive", "naïve",
        "straße", "strasse", "ss", "æsir", "aesir", "oeuvre", "œuvre", "ørsund", "øresund", "lodz", "łódź", "cafe",
        "café", "xy", "x", "uber", "über", "ǖber", "file", "ﬁle", "fi*", "σισυφος", "ΣΊΣΥΦΟΣ", "σίσυφος", "москва",
        "МОСКВА", "елка", "ёлка", "tieng viet", "\"tieng viet\"", "tiếng", "日本語", "한국어", "3", "14", "3.14",
        "\"3 14\"", "42", "a1b2", "don't", "\"don t\"", "t", "it", "under_score", "under", "at&t", "\"at t\"", "c",
        "½", "ß", "the the", "\"the the\"", "\"the and\"", "and", "eng*", "engine*", "engine OR engines OR engineer",
        "engine NOT engines NOT engineer", "(the OR and) NOT (apple OR pie)", "\"apple apple\"", "apple* pie*",
        "\"e mail\" NOT email", "m*", "ё*", "日*", "engineer AND (café OR naive) NOT ß",
    ]

    @Test("a corpus of 300 documents: every query matches the same documents on both stores, as SearchQuery.matches says")
    func corpusMatchesAgree() throws {
        let corpus = Self.corpus(count: 300)
        let fixtures = try StoreKind.allCases.map { kind in
            let fixture = try Fixture(kind)
            try fixture.insert(corpus, author: "Ada Lovelace")
            return fixture
        }
        for text in Self.queries {
            let query = try SearchQuery(text)
            for (format, document) in [("SELF", { (d: (Int, String?, String?)) in [d.1, d.2] }),
                                       ("title", { (d: (Int, String?, String?)) in [d.1] }),
                                       ("body", { (d: (Int, String?, String?)) in [d.2] })] {
                let expected = corpus.filter { query.matches(document($0)) }.map(\.0)
                for fixture in fixtures {
                    let found = try fixture.serials("\(format) MATCHES[search] %@", text)
                    #expect(found == expected, "\(fixture.kind): \(format) MATCHES[search] \(text)")
                }
            }
            let negated = corpus.filter { !query.matches([$0.1, $0.2]) }.map(\.0)
            // Through a to-many: the author of the odd documents.
            let authors = corpus.contains { $0.0 % 2 == 1 && query.matches([$0.1]) } ? 1 : 0
            for fixture in fixtures {
                #expect(try fixture.serials("NOT SELF MATCHES[search] %@", text) == negated, "\(fixture.kind): NOT \(text)")
                let context = fixture.context()
                let found = try context.performAndWait {
                    try context.count(for: FetchRequest<ManagedObject>(
                        entityName: "Author", predicate: try FetchPredicate(format: "ANY documents.title MATCHES[search] %@", text)))
                }
                #expect(found == authors, "\(fixture.kind): ANY documents.title MATCHES[search] \(text)")
            }
        }
    }

    @Test("relevance sorts order the corpus alike on both stores, by SearchQuery.relevance, with limits and through a to-one")
    func corpusRelevanceAgrees() throws {
        let corpus = Self.corpus(count: 300)
        let fixtures = try StoreKind.allCases.map { kind in
            let fixture = try Fixture(kind)
            try fixture.insert(corpus, author: "Ada Lovelace")
            return fixture
        }
        for text in ["apple", "appl*", "apple pie", "\"apple pie\"", "creme OR brulee", "engine NOT engines", "the", "e-mail", "σισυφος"] {
            let query = try SearchQuery(text)
            for key in ["title", "body"] {
                let relevance = { (d: (Int, String?, String?)) in query.relevance(of: [key == "title" ? d.1 : d.2]) }
                let expected = corpus.filter { query.matches([$0.1, $0.2]) }
                    .sorted { (relevance($0), $1.0) > (relevance($1), $0.0) }.map(\.0)
                let sorts = [FetchSort(key: key, relevanceTo: query), FetchSort(key: "serial")]
                for fixture in fixtures {
                    #expect(try fixture.serials("SELF MATCHES[search] %@", text, sorts: sorts) == expected, "\(fixture.kind): \(key) ~ \(text)")
                    #expect(try fixture.serials("SELF MATCHES[search] %@", text, sorts: sorts, limit: 5) == Array(expected.prefix(5)),
                            "\(fixture.kind): limit 5, \(key) ~ \(text)")
                }
            }
            // Ascending, over every row (non-matching ones rank 0), and through the to-one author.
            let ascending = [FetchSort(key: "title", relevanceTo: query, ascending: true), FetchSort(key: "serial")]
            let byAuthor = [FetchSort(key: "author.name", relevanceTo: try SearchQuery("ada")), FetchSort(key: "serial")]
            let results = try fixtures.map { try [$0.serials(nil, sorts: ascending), $0.serials(nil, sorts: byAuthor)] }
            #expect(results[0] == results[1], "ascending and through a to-one: \(text)")
            #expect(results[0][1].prefix(3) == [1, 3, 5], "the author's documents first")
        }
    }

    // MARK: - Kept in step

    @Test("inserts, updates and deletes are searchable as soon as the save returns, from another coordinator", arguments: StoreKind.allCases)
    func savesKeepTheIndexInStep(_ kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        try fixture.insert([(1, "Crème brûlée", "dessert"), (2, "Apple pie", nil), (3, "Engine notes", "apple engine")])
        #expect(try fixture.serials("SELF MATCHES[search] 'apple'") == [2, 3])
        let context = fixture.context()
        try context.performAndWait {
            let all = try context.fetch(FetchRequest<ManagedObject>(entityName: "Document", predicate: nil, sortDescriptors: [FetchSort(key: "serial")]))
            try all[0].setValue("Creme caramel", forKey: "title")
            try all[1].setValue("shopping list", forKey: "note")   // not indexed
            context.delete(all[2])
            try context.save()
        }
        let reader = try Fixture.reopen(fixture)
        #expect(try reader.serials("title MATCHES[search] 'creme'") == [1])
        #expect(try reader.serials("title MATCHES[search] 'brulee'") == [])
        #expect(try reader.serials("SELF MATCHES[search] 'apple'") == [2])
        #expect(try reader.serials("SELF MATCHES[search] 'engine'") == [])
        #expect(try reader.count("SELF MATCHES[search] 'caramel OR pie'") == 2)
    }

    @Test("batch inserts, updates and deletes are searchable when they return", arguments: StoreKind.allCases)
    func batchRequestsKeepTheIndexInStep(_ kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        let context = fixture.context()
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Document", objects: (1...50).map { serial in
                ["serial": serial, "title": "report \(serial) on apples", "body": serial.isMultiple(of: 10) ? "quarterly engine" : nil]
            }))
        }
        #expect(try fixture.count("SELF MATCHES[search] 'apples'") == 50)
        #expect(try fixture.serials("SELF MATCHES[search] 'engine'") == [10, 20, 30, 40, 50])
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Document", predicate: try FetchPredicate(format: "serial <= 5"),
                                                       propertiesToUpdate: ["title": "pears"]))
            _ = try context.execute(BatchUpdateRequest(entityName: "Document", predicate: try FetchPredicate(format: "serial == 6"),
                                                       propertiesToUpdate: ["title": .keyPath("body")]))
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(
                entityName: "Document", predicate: try FetchPredicate(format: "serial >= 40"))))
            // An upsert (object trump) rewrites a stored row's title.
            context.mergePolicy = .mergeByPropertyObjectTrump
            _ = try context.execute(BatchInsertRequest(entityName: "Document", objects: [["serial": 7, "title": "upserted engine"]]))
        }
        #expect(try fixture.serials("title MATCHES[search] 'pears'") == [1, 2, 3, 4, 5])
        #expect(try fixture.count("SELF MATCHES[search] 'apples'") == 32)
        #expect(try fixture.serials("SELF MATCHES[search] 'engine'") == [7, 10, 20, 30])
        #expect(try fixture.serials("title MATCHES[search] 'report'").contains(6) == false, "title set to nil from body")
    }

    @Test("a save that fails and a batch that fails leave the index as it was", arguments: StoreKind.allCases)
    func failuresLeaveTheIndexAsItWas(_ kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        try fixture.insert([(1, "kept title", nil)])
        let context = fixture.context()
        try context.performAndWait {
            let document = try #require(try context.fetch(FetchRequest<ManagedObject>(entityName: "Document")).first)
            try document.setValue("zebra crossing", forKey: "title")
            let duplicate = ManagedObject(entity: try #require(fixture.model.entitiesByName["Document"]), insertInto: context)
            try duplicate.setValue(1, forKey: "serial")   // breaks the uniqueness constraint: the whole save fails
            try duplicate.setValue("zebra stripes", forKey: "title")
            #expect(throws: (any Error).self) { try context.save() }
            context.rollback()
            #expect(throws: (any Error).self) {
                try context.execute(BatchInsertRequest(entityName: "Document", objects: [["serial": 2, "title": "zebra two"], ["serial": 1, "title": "zebra one"]]))
            }
        }
        #expect(try fixture.serials("SELF MATCHES[search] 'zebra'") == [])
        #expect(try fixture.serials("title MATCHES[search] 'kept'") == [1])
        #expect(try fixture.count("TRUEPREDICATE") == 1)
    }

    @Test("a lightweight migration keeps every row searchable, and saves after it are indexed", arguments: StoreKind.allCases)
    func aMigrationKeepsTheIndex(_ kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        try fixture.insert([(1, "Crème brûlée", "old body"), (2, "apple pie", nil)])
        // A migration waits for no coordinator with the old model: this one closes its store.
        for store in fixture.coordinator.persistentStores { try fixture.coordinator.remove(store) }
        let migrated = Self.model()
        let document = try #require(migrated.entitiesByName["Document"])
        document.properties.append(AttributeDescription(name: "pages", type: .integer32, defaultValue: .integer(1)))
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        let reopened = try Fixture.reopen(fixture, model: migrated, options: options)
        #expect(try reopened.serials("SELF MATCHES[search] 'creme OR apple'") == [1, 2])
        #expect(try reopened.serials("body MATCHES[search] '\"old body\"'") == [1])
        try reopened.insert([(3, "creme fraiche", nil)])
        #expect(try reopened.serials("title MATCHES[search] 'creme'") == [1, 3])
    }

    // MARK: - Refusals

    @Test("bad searches throw FetchPredicateError naming the problem, on both stores", arguments: StoreKind.allCases)
    func badSearchesThrow(_ kind: StoreKind) throws {
        let fixture = try Fixture(kind)
        try fixture.insert([(1, "apple", "pie")])
        let unclosed = fixture.failure("title MATCHES[search] 'apple (pie'")
        #expect(unclosed.contains("search query") && unclosed.contains("offset 22"), "\(unclosed)")
        #expect(fixture.failure("title MATCHES[search] '+++'").contains("no words"))
        #expect(fixture.failure("note MATCHES[search] 'x'").contains("Document.note is not indexed for search"))
        #expect(fixture.failure("title MATCHES[search][cd] 'x'").contains("takes no [c], [d] or [cd]"))
        let relevance = fixture.failure(nil, sorts: [FetchSort(key: "note", relevanceTo: try SearchQuery("x"))])
        #expect(relevance.contains("note") && relevance.contains("not indexed"), "\(relevance)")
        #expect(try fixture.serials("TRUEPREDICATE") == [1], "nothing saved was lost")
    }

    // MARK: - PostgreSQL's own index

    @Test("a store written before its model indexed an attribute gets its index when it opens; a read-only one refuses until then")
    func anExistingStoreIsIndexedWhenItOpens() throws {
        let plain = Self.model()
        for entity in plain.entities { for case let attribute as AttributeDescription in entity.properties { attribute.isIndexedBySpotlight = false } }
        let fixture = try Fixture(.postgreSQL, model: plain)
        try fixture.insert([(1, "Crème brûlée", "x"), (2, "apple pie", "creme")])
        #expect(fixture.failure("title MATCHES[search] 'creme'").contains("not indexed"))

        var readOnly = StoreOptions()
        readOnly.isReadOnly = true
        let reader = try Fixture.reopen(fixture, model: Self.model(), options: readOnly)
        let refused = reader.failure("title MATCHES[search] 'creme'")
        #expect(refused.contains("read-only") && refused.contains("rebuildSearchIndex"), "\(refused)")

        let indexed = try Fixture.reopen(fixture, model: Self.model())
        #expect(try indexed.serials("title MATCHES[search] 'creme'") == [1])
        #expect(try indexed.serials("SELF MATCHES[search] 'creme'") == [1, 2])
        #expect(try Fixture.reopen(fixture, model: Self.model(), options: readOnly).serials("SELF MATCHES[search] 'creme'") == [1, 2])
    }

    @Test("rows changed by SQL outside DataStack are found again after rebuildSearchIndex()")
    func rebuildingRepairsTheIndex() throws {
        let fixture = try Fixture(.postgreSQL)
        try fixture.insert([(1, "apple", nil)])
        let connection = try PostgreSQLConnection(url: fixture.location)
        defer { connection.close() }
        _ = try connection.execute("UPDATE ZDOCUMENT SET ZTITLE = 'pear'")
        #expect(try fixture.serials("title MATCHES[search] 'pear'") == [], "no trigger can tokenize as the store does")
        let store = try #require(fixture.coordinator.persistentStores.first as? PostgreSQLStore)
        try store.rebuildSearchIndex()
        #expect(try fixture.serials("title MATCHES[search] 'pear'") == [1])
        #expect(try fixture.serials("title MATCHES[search] 'apple'") == [])
    }

    @Test("past a tsvector's limits, word searches still agree with SQLite, and phrases and relevance throw saying why")
    func textsPastTheVectorsLimitsThrowForPhrases() throws {
        // 16,500 words: positions past 16,383 are approximate in a tsvector; a word 300 times past its 256 positions.
        let long = (0..<16_500).map { $0 % 55 == 0 ? "apple" : "w\($0)" }.joined(separator: " ") + " last words"
        let bigWord = String(repeating: "é", count: 1_500)   // 3,000 bytes folded to 1,500 'e's: fits; the tail
        let huge = String(repeating: "q", count: 3_000)       // 3,000 bytes: cut to 2,046 in the index
        var found: [[Int]] = []
        for kind in StoreKind.allCases {
            let fixture = try Fixture(kind)
            try fixture.insert([(1, long, huge + " tail"), (2, "apple last", bigWord), (3, "last words", nil)])
            found.append(try fixture.serials("SELF MATCHES[search] 'last'"))
            found.append(try fixture.serials("SELF MATCHES[search] 'words'"))
            found.append(try fixture.serials("SELF MATCHES[search] 'q*'"))
            found.append(try fixture.serials("SELF MATCHES[search] 'apple NOT tail'"))
            if kind == .postgreSQL {
                let phrase = fixture.failure("title MATCHES[search] '\"last words\"'")
                #expect(phrase.contains("16,383 words") && phrase.contains("phrase"), "\(phrase)")
                let relevance = fixture.failure("title MATCHES[search] 'apple'", sorts: [FetchSort(key: "title", relevanceTo: try SearchQuery("apple"))])
                #expect(relevance.contains("relevance sort"), "\(relevance)")
                let longWord = fixture.failure("body MATCHES[search] '\(String(repeating: "q", count: 2_043))'")
                #expect(longWord.contains("2043 bytes") && longWord.contains("2042"), "\(longWord)")
                #expect(try fixture.serials("body MATCHES[search] '\(String(repeating: "q", count: 2_042))*'") == [1])
                #expect(try fixture.serials("body MATCHES[search] '\(String(repeating: "q", count: 2_042))'") == [])
            }
        }
        #expect(found[0] == [1, 2, 3] && found[1] == [1, 3] && found[2] == [1] && found[3] == [2])
        #expect(Array(found[0..<4]) == Array(found[4..<8]), "the stores agree")
    }
}

extension SearchContractTests.Fixture {
    /// Another coordinator over the same store, with `model` and `options`.
    static func reopen(_ fixture: SearchContractTests.Fixture, model: ManagedObjectModel? = nil,
                       options: StoreOptions = StoreOptions()) throws -> SearchContractTests.Fixture {
        try SearchContractTests.Fixture(fixture.kind, location: fixture.location, model: model ?? fixture.model, options: options)
    }

    init(_ kind: StoreKind, location: URL, model: ManagedObjectModel, options: StoreOptions) throws {
        self.kind = kind
        self.model = model
        self.location = location
        coordinator = try kind.coordinator(model, at: location, options: options)
    }
}

/// A small deterministic generator (SplitMix64): the corpus is the same on every run.
struct SplitMix {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
