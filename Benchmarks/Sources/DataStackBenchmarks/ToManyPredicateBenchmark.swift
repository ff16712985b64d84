import DataStack
import Foundation
import GRDBSQLite

/// Task `tomany` (issue #18's cliffs): fetches whose predicate crosses a
/// to-many (`ANY updates.price > %@`) and a many-to-many (`ANY tags.name ==
/// %@`), against the same `EXISTS` written by hand and run raw on the same
/// file. N / 10 companies with 10 price updates each and 3 of 50 tags each.
enum ToManyPredicateBenchmark {
    struct Result: Sendable {
        var companies: Int
        var rows: [(task: String, raw: Duration, dataStack: Duration, matches: Int)]
    }

    static func model() -> ManagedObjectModel {
        func to(_ name: String, _ destination: String, inverse: String, many: Bool) -> RelationshipDescription {
            RelationshipDescription(name: name, destination: destination, inverse: inverse, isToMany: many,
                                    deleteRule: many ? .cascade : .nullify)
        }
        return ManagedObjectModel(entities: [
            EntityDescription(name: "Company", properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                to("updates", "Update", inverse: "company", many: true),
                RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
            ]),
            EntityDescription(name: "Update", properties: [
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                to("company", "Company", inverse: "updates", many: false),
            ]),
            EntityDescription(name: "Tag", properties: [
                AttributeDescription(name: "name", type: .string, isOptional: false),
                RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
            ]),
        ])
    }

    static func run(companies: Int, repetitions: Int) throws -> Result {
        let directory = ScratchDirectory("tomany")
        let url = directory.file("ToMany.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model())
        try coordinator.addPersistentStore(type: .sqlite, at: url)
        try fill(url, companies: companies)

        // About 1 % of the companies have an update above the threshold; tag 7 is on 6 % of them.
        let threshold = Double(companies * 10) * 0.999
        let tasks: [(name: String, format: String, argument: any Sendable, sql: (Join) -> String)] = [
            ("ANY updates.price > %@ (to-many)", "ANY updates.price > %@", threshold, { _ in
                "SELECT c.Z_PK, c.ZSYMBOL FROM ZCOMPANY c WHERE EXISTS (SELECT 1 FROM ZUPDATE u WHERE u.ZCOMPANY = c.Z_PK AND u.ZPRICE > ?)"
            }),
            ("ANY tags.name == %@ (many-to-many)", "ANY tags.name == %@", "tag7", { join in
                """
                SELECT c.Z_PK, c.ZSYMBOL FROM ZCOMPANY c WHERE EXISTS (SELECT 1 FROM \(join.table) j JOIN ZTAG t \
                ON t.Z_PK = j.\(join.tagColumn) WHERE j.\(join.companyColumn) = c.Z_PK AND t.ZNAME = ?)
                """
            }),
        ]
        let join = try Join(url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        var rows: [(task: String, raw: Duration, dataStack: Duration, matches: Int)] = []
        for task in tasks {
            var raw = Duration.seconds(1_000_000), dataStack = raw
            var rawRead = (matches: 0, characters: 0), dataStackRead = rawRead
            for _ in 0..<repetitions {
                let db = try RawConnection(url.path)
                let start = ContinuousClock.now
                let statement = try db.prepare(task.sql(join))
                if let value = task.argument as? Double { sqlite3_bind_double(statement, 1, value) }
                if let value = task.argument as? String { sqlite3_bind_text(statement, 1, value, -1, RawConnection.transient) }
                var matches = 0, characters = 0
                while sqlite3_step(statement) == SQLITE_ROW {
                    matches += 1
                    characters += Int(sqlite3_column_bytes(statement, 1))
                }
                sqlite3_finalize(statement)
                raw = min(raw, ContinuousClock.now - start)
                rawRead = (matches, characters)

                context.performAndWait { context.reset() }
                let (duration, found) = try context.performAndWait {
                    let request = FetchRequest<ManagedObject>(entityName: "Company",
                                                              predicate: try FetchPredicate(format: task.format, task.argument))
                    let start = ContinuousClock.now
                    let companies = try context.fetch(request)
                    var characters = 0
                    for company in companies { characters += (try company.value(forKey: "symbol") as? String)?.utf8.count ?? 0 }
                    return (ContinuousClock.now - start, (matches: companies.count, characters: characters))
                }
                dataStack = min(dataStack, duration)
                dataStackRead = found
            }
            guard rawRead == dataStackRead, rawRead.matches > 0 else {
                throw BenchError("tomany: \(task.name) read \(dataStackRead) in DataStack, \(rawRead) raw")
            }
            rows.append((task.name, raw, dataStack, rawRead.matches))
        }
        return Result(companies: companies, rows: rows)
    }

    /// The many-to-many's join table and columns, as the store named them.
    struct Join {
        var table = "", companyColumn = "", tagColumn = ""

        init(_ url: URL) throws {
            let db = try RawConnection(url.path)
            let tables = try db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z!_%' ESCAPE '!' AND name NOT IN ('Z_PRIMARYKEY', 'Z_METADATA', 'Z_MODELCACHE')")
            defer { sqlite3_finalize(tables) }
            guard sqlite3_step(tables) == SQLITE_ROW, let name = sqlite3_column_text(tables, 0) else { throw BenchError("tomany: no join table") }
            table = String(cString: name)
            let columns = try db.prepare("SELECT name FROM pragma_table_info('\(table)') ORDER BY cid")
            defer { sqlite3_finalize(columns) }
            while sqlite3_step(columns) == SQLITE_ROW, let column = sqlite3_column_text(columns, 0) {
                let name = String(cString: column)
                if name.hasSuffix("COMPANIES") { companyColumn = name } else if name.hasSuffix("TAGS") { tagColumn = name }
            }
            guard !companyColumn.isEmpty, !tagColumn.isEmpty else { throw BenchError("tomany: join table \(table) has unexpected columns") }
        }
    }

    /// Companies, their updates and tags written raw into the store's tables, keys and `Z_MAX` as Core Data keeps them.
    private static func fill(_ url: URL, companies: Int) throws {
        let join = try Join(url)
        let db = try RawConnection(url.path)
        func entity(_ name: String) throws -> Int64 { try db.integer("SELECT Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME = '\(name)'") }
        let (company, update, tag) = (try entity("Company"), try entity("Update"), try entity("Tag"))
        try db.execute("BEGIN")
        try db.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
            INSERT INTO ZTAG (Z_PK, Z_ENT, Z_OPT, ZNAME) SELECT i, \(tag), 1, 'tag' || i FROM n
            """)
        try db.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(companies))
            INSERT INTO ZCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL) SELECT i, \(company), 1, 'C' || i FROM n
            """)
        try db.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(companies * 10))
            INSERT INTO ZUPDATE (Z_PK, Z_ENT, Z_OPT, ZPRICE, ZCOMPANY) SELECT i, \(update), 1, (i * 7919) % \(companies * 10), (i - 1) / 10 + 1 FROM n
            """)
        try db.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(companies)), k(j) AS (VALUES (0), (17), (31))
            INSERT INTO \(join.table) (\(join.companyColumn), \(join.tagColumn)) SELECT i, (i + j) % 50 + 1 FROM n, k
            """)
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = 50 WHERE Z_ENT = \(tag)")
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = \(companies) WHERE Z_ENT = \(company)")
        try db.execute("UPDATE Z_PRIMARYKEY SET Z_MAX = \(companies * 10) WHERE Z_ENT = \(update)")
        try db.execute("COMMIT")
    }
}
