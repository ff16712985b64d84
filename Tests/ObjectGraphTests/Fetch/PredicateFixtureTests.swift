@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStorage
@testable import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

// Shared fixture of the predicate tests: a small model (Company, Update, Tag),
// rows held in memory as predicate subjects and written to SQLite tables laid
// out like Core Data's, a schema for the SQL compiler, and a seeded generator.

/// Company ←→> Update (one-to-many), Company <<→> Tag (many-to-many), Company → parent Company.
let predicateModel: ManagedObjectModel = {
    let company = EntityDescription(name: "Company", properties: [
        AttributeDescription(name: "name", type: .string),
        AttributeDescription(name: "price", type: .double),
        AttributeDescription(name: "volume", type: .integer64),
        AttributeDescription(name: "active", type: .boolean),
        AttributeDescription(name: "founded", type: .date),
        AttributeDescription(name: "code", type: .uuid),
        AttributeDescription(name: "site", type: .uri),
        AttributeDescription(name: "rating", type: .decimal),
        AttributeDescription(name: "blob", type: .binaryData),
        RelationshipDescription(name: "parent", destination: "Company", inverse: "children"),
        RelationshipDescription(name: "children", destination: "Company", inverse: "parent", isToMany: true),
        RelationshipDescription(name: "updates", destination: "Update", inverse: "company", isToMany: true),
        RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
    ])
    let update = EntityDescription(name: "Update", properties: [
        AttributeDescription(name: "price", type: .double),
        AttributeDescription(name: "volume", type: .integer64),
        AttributeDescription(name: "note", type: .string),
        RelationshipDescription(name: "company", destination: "Company", inverse: "updates"),
    ])
    let tag = EntityDescription(name: "Tag", properties: [
        AttributeDescription(name: "name", type: .string),
        RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
    ])
    // Indexed for full-text search (MATCHES[search]); the SQL side has the FTS5 tables of `predicateSearchIndexes`.
    for case let attribute as AttributeDescription in company.properties + update.properties
    where attribute.name == "name" || attribute.name == "note" {
        attribute.isIndexedBySpotlight = true
    }
    let model = ManagedObjectModel(entities: [company, update, tag])
    _ = model.entitiesByName
    return model
}()

func predicateEntity(_ name: String) -> EntityDescription {
    predicateModel.entitiesByName[name]!
}

let predicateStore = StoreIdentity.named("PREDICATE-TESTS")

/// Rows of the three entities, usable as in-memory subjects and as SQLite tables.
final class PredicateTestData {
    struct Row {
        var entity: String
        var pk: Int64
        var values: [String: PropertyValue] = [:]
    }

    var rows: [String: [Int64: Row]] = ["Company": [:], "Update": [:], "Tag": [:]]
    /// (company pk, tag pk) pairs of the many-to-many relationship.
    var companyTags: [(Int64, Int64)] = []

    @discardableResult
    func add(_ entity: String, _ pk: Int64, _ values: [String: PropertyValue]) -> Row {
        let row = Row(entity: entity, pk: pk, values: values)
        rows[entity]![pk] = row
        return row
    }

    func id(_ entity: String, _ pk: Int64) -> ObjectID {
        ObjectID(entity: predicateEntity(entity), store: predicateStore, primaryKey: pk)
    }

    func subject(_ entity: String, _ pk: Int64) -> Subject {
        Subject(data: self, entity: entity, pk: pk)
    }

    /// Primary keys of `entity` rows the predicate matches in memory.
    func matchesInMemory(_ predicate: FetchPredicate, entity: String = "Company") throws -> Set<Int64> {
        var matched = Set<Int64>()
        for pk in rows[entity]!.keys where try predicate.evaluate(with: subject(entity, pk)) {
            matched.insert(pk)
        }
        return matched
    }

    struct Subject: PredicateSubject {
        let data: PredicateTestData
        let entity: String
        let pk: Int64

        var predicateObjectID: ObjectID? { data.id(entity, pk) }

        func predicateValue(forKey key: String) throws -> PredicateValue {
            let description = predicateEntity(entity)
            guard let property = description.propertiesByName[key] else {
                throw ObjectGraphError.unknownKey(key, entity: entity)
            }
            let row = data.rows[entity]![pk]!
            guard let relationship = property as? RelationshipDescription else {
                return .value(row.values[key] ?? .null)
            }
            let destination = relationship.destinationEntityName
            if !relationship.isToMany {
                guard case .integer(let target)? = row.values[key] else { return .value(.null) }
                return .subject(data.subject(destination, target))
            }
            let targets: [Int64]
            switch (entity, key) {
            case ("Company", "tags"): targets = data.companyTags.filter { $0.0 == pk }.map(\.1)
            case ("Tag", "companies"): targets = data.companyTags.filter { $0.1 == pk }.map(\.0)
            default:
                let inverse = relationship.inverseName!
                targets = data.rows[destination]!.values.filter { $0.values[inverse] == .integer(pk) }.map(\.pk).sorted()
            }
            return .collection(targets.map { .subject(data.subject(destination, $0)) })
        }
    }

    // MARK: - SQLite

    /// An in-memory database holding the rows, with the predicate functions registered.
    func database() throws -> Connection {
        let connection = try Connection(path: ":memory:")
        try FetchPredicate.registerFunctions(on: connection)
        try connection.execute("""
            CREATE TABLE ZCOMPANY (Z_PK INTEGER PRIMARY KEY, ZNAME VARCHAR, ZPRICE FLOAT, ZVOLUME INTEGER,
                ZACTIVE INTEGER, ZFOUNDED TIMESTAMP, ZCODE BLOB, ZSITE VARCHAR, ZRATING DECIMAL, ZBLOB BLOB, ZPARENT INTEGER);
            CREATE TABLE ZUPDATE (Z_PK INTEGER PRIMARY KEY, ZPRICE FLOAT, ZVOLUME INTEGER, ZNOTE VARCHAR, ZCOMPANY INTEGER);
            CREATE TABLE ZTAG (Z_PK INTEGER PRIMARY KEY, ZNAME VARCHAR);
            CREATE TABLE Z_1TAGS (Z_1COMPANIES INTEGER, Z_3TAGS INTEGER);
            """)
        // The store's full-text indexes, kept in step by their triggers as the rows go in.
        for statement in SearchIndexLayout.writerTableStatements + predicateSearchIndexes.flatMap(\.creationStatements) {
            try connection.execute(statement)
        }
        for (entity, table) in rows {
            let keys = predicateEntity(entity).slotProperties.filter {
                !(($0 as? RelationshipDescription)?.isToMany ?? false)
            }.map(\.name)
            let columns = ["Z_PK"] + keys.map { "Z" + $0.uppercased() }
            let insert = try connection.prepare(
                "INSERT INTO Z\(entity.uppercased()) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))")
            for row in table.values {
                insert.reset()
                insert.clearBindings()
                try insert.bind(row.pk, at: 1)
                for (index, key) in keys.enumerated() {
                    try bind(PredicateScalar.binding(for: row.values[key] ?? .null), to: insert, at: Int32(index + 2))
                }
                try insert.execute()
            }
        }
        let link = try connection.prepare("INSERT INTO Z_1TAGS (Z_1COMPANIES, Z_3TAGS) VALUES (?, ?)")
        for (company, tag) in companyTags {
            link.reset()
            try link.bind(company, at: 1)
            try link.bind(tag, at: 2)
            try link.execute()
        }
        return connection
    }

    /// Primary keys of `entity` rows the predicate's SQL selects.
    func matchesInSQL(_ predicate: FetchPredicate, on connection: Connection, entity: String = "Company") throws -> Set<Int64> {
        let compiled = try predicate.sql(for: predicateEntity(entity), schema: PredicateTestSchema(), rootAlias: "t0")
        #expect(compiled.bindings == predicate.sqlBindings)
        let sql = "SELECT t0.Z_PK FROM Z\(entity.uppercased()) t0 \(compiled.joins.joined(separator: " ")) WHERE \(compiled.where)"
        let statement = try connection.prepare(sql)
        for (index, value) in compiled.bindings.enumerated() {
            try bind(value, to: statement, at: Int32(index + 1))
        }
        var matched = Set<Int64>()
        while try statement.step() { matched.insert(statement.int64(at: 0)) }
        return matched
    }

    private func bind(_ value: PropertyValue, to statement: Statement, at index: Int32) throws {
        switch value {
        case .null: try statement.bindNull(at: index)
        case .integer(let v): try statement.bind(v, at: index)
        case .double(let v): try statement.bind(v, at: index)
        case .string(let v): try statement.bind(v, at: index)
        case .data(let v): try statement.bind(v, at: index)
        default: Issue.record("unexpected binding \(value)")
        }
    }
}

/// Core Data's layout: `Z<ENTITY>` tables, `Z<NAME>` columns and foreign keys,
/// `Z_1TAGS` join table for Company.tags ↔ Tag.companies.
struct PredicateTestSchema: PredicateSQLSchema {
    func columnSQL(for property: PropertyDescription, alias: String) throws -> String {
        "\(alias).Z\(property.name.uppercased())"
    }

    func toOneJoin(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> String {
        "LEFT JOIN Z\(relationship.destinationEntityName.uppercased()) \(toAlias) ON \(toAlias).Z_PK = \(fromAlias).Z\(relationship.name.uppercased())"
    }

    func toManySource(_ relationship: RelationshipDescription, fromAlias: String, toAlias: String) throws -> (from: String, correlation: String) {
        let destination = "Z\(relationship.destinationEntityName.uppercased())"
        switch relationship.name {
        case "tags":
            return ("Z_1TAGS j\(toAlias) JOIN \(destination) \(toAlias) ON \(toAlias).Z_PK = j\(toAlias).Z_3TAGS",
                    "j\(toAlias).Z_1COMPANIES = \(fromAlias).Z_PK")
        case "companies":
            return ("Z_1TAGS j\(toAlias) JOIN \(destination) \(toAlias) ON \(toAlias).Z_PK = j\(toAlias).Z_1COMPANIES",
                    "j\(toAlias).Z_3TAGS = \(fromAlias).Z_PK")
        default:
            let inverse = relationship.inverseName!.uppercased()
            return ("\(destination) \(toAlias)", "\(toAlias).Z\(inverse) = \(fromAlias).Z_PK")
        }
    }

    func primaryKeySQL(alias: String) -> String {
        "\(alias).Z_PK"
    }

    func searchMatchSQL(for attributes: [AttributeDescription], alias: String, query: String, search: SearchQuery) throws -> String {
        let table = "Z" + attributes[0].entity!.name.uppercased()
        return SearchIndexLayout.matchSQL(index: SearchIndexLayout.name(forTable: table), alias: alias,
                                          columns: attributes.map { "Z" + $0.name.uppercased() }, query: query)
    }
}

/// The FTS5 indexes of the indexed attributes, Company.name and Update.note.
let predicateSearchIndexes = [
    SearchIndexLayout(name: SearchIndexLayout.name(forTable: "ZCOMPANY"), table: "ZCOMPANY", columns: ["ZNAME"]),
    SearchIndexLayout(name: SearchIndexLayout.name(forTable: "ZUPDATE"), table: "ZUPDATE", columns: ["ZNOTE"]),
]

/// A seeded generator (SplitMix64), so every failure can be replayed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A handful of companies, updates and tags for the hand-written tests.
func samplePredicateData() -> PredicateTestData {
    let data = PredicateTestData()
    let reference = Date(timeIntervalSinceReferenceDate: 0)
    data.add("Company", 1, [
        "name": .string("Apple"), "price": .double(189.5), "volume": .integer(1000), "active": .bool(true),
        "founded": .date(reference.addingTimeInterval(100)), "code": .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!),
        "site": .uri(URL(string: "https://apple.com")!), "rating": .decimal(Decimal(string: "4.5")!),
    ])
    data.add("Company", 2, [
        "name": .string("Äpfel GmbH"), "price": .double(12), "volume": .integer(50), "active": .bool(false),
        "founded": .date(reference.addingTimeInterval(-100)), "parent": .integer(1), "rating": .decimal(3),
    ])
    data.add("Company", 3, ["name": .string("banana"), "price": .null, "volume": .integer(7), "parent": .integer(2)])
    data.add("Company", 4, ["name": .null, "price": .double(5), "volume": .null, "active": .bool(true)])
    data.add("Update", 10, ["price": .double(190), "volume": .integer(10), "note": .string("up"), "company": .integer(1)])
    data.add("Update", 11, ["price": .double(185), "volume": .integer(20), "note": .string("down"), "company": .integer(1)])
    data.add("Update", 12, ["price": .double(11), "volume": .null, "note": .null, "company": .integer(2)])
    data.add("Update", 13, ["price": .double(4), "volume": .integer(1), "note": .string("flat"), "company": .integer(1)])
    data.add("Update", 14, ["price": .double(1), "volume": .integer(1), "note": .string("orphan")])
    data.add("Tag", 20, ["name": .string("tech")])
    data.add("Tag", 21, ["name": .string("food")])
    data.companyTags = [(1, 20), (2, 21), (3, 21), (2, 20)]
    return data
}

/// Checks that a predicate matches `expected` rows in memory and that its SQL
/// selects the same rows from SQLite (the shared agreement checker).
func checkPredicateAgreement(_ format: String, _ arguments: Any?..., data: PredicateTestData = samplePredicateData(),
                             entity: String = "Company", expected: Set<Int64>,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
    let predicate = try FetchPredicate(format: format, argumentArray: arguments)
    try predicate.validate(for: predicateEntity(entity))
    let inMemory = try data.matchesInMemory(predicate, entity: entity)
    let inSQL = try data.matchesInSQL(predicate, on: try data.database(), entity: entity)
    #expect(inMemory == expected, "in memory: \(format)", sourceLocation: sourceLocation)
    #expect(inSQL == expected, "SQL: \(format)", sourceLocation: sourceLocation)
}
