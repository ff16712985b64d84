import Foundation
import ObjectGraph
import DataStackStores

extension FuzzTarget {
    /// A predicate string as a user might type it into a filter box: parsed,
    /// printed, checked against an entity, evaluated in memory and compiled to
    /// SQL — every consumer of a predicate tree.
    static let predicate = FuzzTarget(
        name: "predicate",
        summary: "FetchPredicate(format:), then its description, validation, in-memory evaluation and SQL",
        seeds: { seeds in
            // The fetch request templates Xcode models carry are real predicates.
            var found = PredicateFuzzing.handWritten.map { Data($0.utf8) }
            for contents in try seeds.contents(ofFilesNamed: "contents") {
                found += PredicateFuzzing.predicateStrings(inXML: contents).map { Data($0.utf8) }
            }
            return found
        },
        run: { input in
            let predicate = try FetchPredicate(format: String(decoding: input, as: UTF8.self))
            _ = predicate.description
            try predicate.validate(for: PredicateFuzzing.company)
            _ = try predicate.evaluate(with: PredicateFuzzing.Subject.sample)
            try PredicateFuzzing.fetch(predicate)
        }
    )
}

/// What the predicate target checks its input against: a small model with
/// every kind of key a predicate can walk (attributes of each type, a to-one,
/// a to-many, a search-indexed string), and one object graph to evaluate on.
enum PredicateFuzzing {
    static let model: ManagedObjectModel = {
        let name = AttributeDescription(name: "name", type: .string)
        name.isIndexedBySpotlight = true
        let company = EntityDescription(name: "Company", properties: [
            name,
            AttributeDescription(name: "symbol", type: .string),
            AttributeDescription(name: "price", type: .double),
            AttributeDescription(name: "count", type: .integer64),
            AttributeDescription(name: "listed", type: .boolean),
            AttributeDescription(name: "founded", type: .date),
            AttributeDescription(name: "id", type: .uuid),
            AttributeDescription(name: "logo", type: .binaryData),
            AttributeDescription(name: "site", type: .uri),
            AttributeDescription(name: "cap", type: .decimal),
            RelationshipDescription(name: "updates", destination: "Update", inverse: "company", isToMany: true),
            RelationshipDescription(name: "parent", destination: "Company", inverse: "children"),
            RelationshipDescription(name: "children", destination: "Company", inverse: "parent", isToMany: true),
        ])
        let update = EntityDescription(name: "Update", properties: [
            AttributeDescription(name: "price", type: .double),
            AttributeDescription(name: "time", type: .date),
            AttributeDescription(name: "note", type: .string),
            RelationshipDescription(name: "company", destination: "Company", inverse: "updates"),
        ])
        return ManagedObjectModel(entities: [company, update])
    }()

    static let company: EntityDescription = model.entitiesByName["Company"]!

    /// A context on an empty SQLite store in the scratch folder, used only
    /// through `performAndWait`.
    static let context: ManagedObjectContext? = {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        do {
            try coordinator.addPersistentStore(at: FuzzScratch.file("predicate.sqlite"))
        } catch {
            FileHandle.standardError.write(Data("predicate target: the scratch store cannot be opened: \(error)\n".utf8))
            return nil
        }
        return ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }()

    /// Fetches the companies `predicate` matches, which compiles it to SQL and runs it.
    static func fetch(_ predicate: FetchPredicate) throws {
        guard let context else { throw FuzzSeeds.Failure(description: "the predicate target's store did not open") }
        try context.performAndWait {
            _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Company", predicate: predicate))
        }
    }

    /// A dictionary-backed object for ``FetchPredicate/evaluate(with:)``.
    struct Subject: PredicateSubject {
        var values: [String: PredicateValue]
        var predicateObjectID: ObjectID? { nil }

        func predicateValue(forKey key: String) throws -> PredicateValue {
            values[key] ?? .value(.null)
        }

        static var sample: Subject {
            let update = Subject(values: ["price": .value(.double(9.5)), "time": .value(.date(Date(timeIntervalSince1970: 0))),
                                          "note": .value(.string("Café au lait"))])
            return Subject(values: [
                "name": .value(.string("Ünïcode Company")), "symbol": .value(.string("ACME")),
                "price": .value(.double(12.25)), "count": .value(.integer(42)), "listed": .value(.bool(true)),
                "founded": .value(.date(Date(timeIntervalSince1970: 1_000_000))),
                "id": .value(.uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)))),
                "logo": .value(.data(Data([0, 1, 2]))), "site": .value(.uri(URL(string: "https://example.com")!)),
                "cap": .value(.decimal(Decimal(string: "1234.5")!)),
                "updates": .collection([.subject(update), .subject(update)]),
                "parent": .value(.null), "children": .collection([]),
            ])
        }
    }

    /// Predicates in the grammar's corners, beside the fixtures' templates.
    static let handWritten = [
        "name BEGINSWITH[cd] 'a' AND price > 10",
        "ANY updates.price BETWEEN {1, 2}",
        "SUBQUERY(updates, $u, $u.price > 5 AND $u.note CONTAINS[c] 'x').@count > 0",
        "NOT (symbol IN {'A', 'B'}) OR count == nil",
        "updates.@avg.price >= 3.5 && parent.name LIKE[c] '*inc?'",
        "name MATCHES[search] \"apple pie\" OR name MATCHES '^[a-z]+$'",
        "founded > CAST(0, 'NSDate') AND id != nil",
        "ALL children.count < 10 AND NONE updates.note ENDSWITH 'z'",
        "TRUEPREDICATE", "FALSEPREDICATE", "SELF == %@", "$x == 1",
    ]

    /// The `predicateString` attributes of a model's XML (fetch request
    /// templates and fetched properties), unescaped.
    static func predicateStrings(inXML data: Data) -> [String] {
        let text = String(decoding: data, as: UTF8.self)
        var found: [String] = []
        var rest = text[...]
        while let start = rest.range(of: "predicateString=\"") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { break }
            found.append(String(rest[..<end])
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
                .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&"))
            rest = rest[end...]
        }
        return found
    }
}
