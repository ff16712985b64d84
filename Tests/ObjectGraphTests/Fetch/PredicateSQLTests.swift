@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStorage
@testable import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

private func compile(_ format: String, _ arguments: Any?..., entity: String = "Company") throws
    -> (where: String, joins: [String], bindings: [PropertyValue]) {
    try FetchPredicate(format: format, argumentArray: arguments)
        .sql(for: predicateEntity(entity), schema: PredicateTestSchema(), rootAlias: "t0")
}

@Suite struct PredicateSQLTests {
    // MARK: Generated SQL

    @Test func comparisonsCompileToBoundParameters() throws {
        let sql = try compile("price > %@ AND name BEGINSWITH[c] %@", 5, "Ap")
        #expect(sql.where == "(t0.ZPRICE > ?1 AND DS_BEGINSWITH(t0.ZNAME, ?2, 1))")
        #expect(sql.joins.isEmpty)
        #expect(sql.bindings == [.integer(5), .string("Ap")])
    }

    @Test func nilComparisonsUseIs() throws {
        #expect(try compile("name == nil").where == "t0.ZNAME IS ?1")
        #expect(try compile("name != nil").where == "t0.ZNAME IS NOT ?1")
        #expect(try compile("name == nil").bindings == [.null])
    }

    @Test func crossFamilyComparisonsSwitchOffAffinity() throws {
        #expect(try compile("volume == '5'").where == "+t0.ZVOLUME = ?1")
        #expect(try compile("volume == 5").where == "t0.ZVOLUME = ?1")
        #expect(try compile("name == volume").where == "+t0.ZNAME = +t0.ZVOLUME")
        #expect(try compile("volume IN {1, '2'}").where == "+t0.ZVOLUME IN (?1, ?2)")
        #expect(try compile("name ==[cd] 'a'").where == "DS_FOLD(t0.ZNAME, 3) = DS_FOLD(?1, 3)")
    }

    @Test func valuesAreEncodedAsTheStoreWritesThem() throws {
        let id = UUID()
        let objectID = ObjectID(entity: predicateEntity("Company"), store: predicateStore, primaryKey: 42)
        let sql = try compile("founded == %@ AND active == %@ AND code == %@ AND site == %@ AND rating == %@ AND parent == %@ AND parent == %@",
                              Date(timeIntervalSinceReferenceDate: 5), true, id, URL(string: "https://x.y")!,
                              Decimal(string: "2.5")!, objectID, ObjectID.temporary(for: predicateEntity("Company")), entity: "Company")
            .bindings
        #expect(sql == [.double(5), .integer(1), .data(withUnsafeBytes(of: id.uuid) { Data($0) }),
                        .string("https://x.y"), .double(2.5), .integer(42), .integer(-1)])
    }

    @Test func toOneKeyPathsJoinOncePerRelationship() throws {
        let sql = try compile("parent.name == 'a' OR parent.price > 1 OR parent.parent.volume == 2")
        #expect(sql.joins == [
            "LEFT JOIN ZCOMPANY t0_1 ON t0_1.Z_PK = t0.ZPARENT",
            "LEFT JOIN ZCOMPANY t0_2 ON t0_2.Z_PK = t0_1.ZPARENT",
        ])
        #expect(sql.where == "(t0_1.ZNAME = ?1 OR t0_1.ZPRICE > ?2 OR t0_2.ZVOLUME = ?3)")
        #expect(try compile("parent == %@", ObjectID(entity: predicateEntity("Company"), store: predicateStore, primaryKey: 1)).where
                == "t0.ZPARENT = ?1")
    }

    @Test func toManyKeyPathsCompileToExistsSubqueries() throws {
        #expect(try compile("ANY updates.price > 5").where
                == "EXISTS (SELECT 1 FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK AND t0_1.ZPRICE > ?1)")
        #expect(try compile("NONE updates.price > 5").where
                == "NOT EXISTS (SELECT 1 FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK AND t0_1.ZPRICE > ?1)")
        #expect(try compile("ALL updates.price > 5").where
                == "NOT EXISTS (SELECT 1 FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK AND (t0_1.ZPRICE > ?1) IS NOT 1)")
        #expect(try compile("updates.@count > 3").where
                == "(SELECT COUNT(*) FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK) > ?1")
        #expect(try compile("updates.@max.price > 10").where
                == "(SELECT MAX(t0_1.ZPRICE) FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK) > ?1")
        #expect(try compile("updates.@sum.price > 10").where
                == "(SELECT TOTAL(t0_1.ZPRICE) FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK) > ?1")
        #expect(try compile("SUBQUERY(updates, $u, $u.price > 1 AND $u.company.name == 'x').@count > 0").where
                == "(SELECT COUNT(*) FROM ZUPDATE t0_1 LEFT JOIN ZCOMPANY t0_2 ON t0_2.Z_PK = t0_1.ZCOMPANY WHERE t0_1.ZCOMPANY = t0.Z_PK AND ((t0_1.ZPRICE > ?1 AND t0_2.ZNAME = ?2))) > ?3")
        #expect(try compile("%@ IN updates", ObjectID(entity: predicateEntity("Update"), store: predicateStore, primaryKey: 3)).where
                == "EXISTS (SELECT 1 FROM ZUPDATE t0_1 WHERE t0_1.ZCOMPANY = t0.Z_PK AND ?1 = t0_1.Z_PK)")
    }

    @Test func constantsAreNeverSplicedIntoSQL() throws {
        let hostile = "'); DROP TABLE ZCOMPANY; --"
        let sql = try compile("name == %@ OR name LIKE %@ OR name IN %@ OR name MATCHES %@", hostile, hostile, [hostile], "x")
        #expect(!sql.where.contains("DROP"))
        #expect(sql.bindings.filter { $0 == .string(hostile) }.count == 3)
    }

    @Test func sqlDependsOnlyOnTheShape() throws {
        let a = try FetchPredicate(format: "price > %@ AND ANY updates.note IN %@", 1, ["a", "b"])
        let b = try FetchPredicate(format: "price > %@ AND ANY updates.note IN %@", 7, ["c", "d"])
        #expect(a.shape == b.shape)
        let entity = predicateEntity("Company")
        let sqlA = try a.sql(for: entity, schema: PredicateTestSchema(), rootAlias: "t0")
        let sqlB = try b.sql(for: entity, schema: PredicateTestSchema(), rootAlias: "t0")
        #expect(sqlA.where == sqlB.where)
        #expect(sqlA.bindings == a.sqlBindings)
        #expect(sqlB.bindings == b.sqlBindings)
    }

    @Test func unsupportedConstructsThrowWithTheFormat() throws {
        func reason(_ format: String) -> String? {
            do {
                _ = try compile(format)
                return nil
            } catch let error as FetchPredicateError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(reason("price > $limit") == "the variable $limit has no value; use withSubstitutionVariables(_:)")
        #expect(reason("SUBQUERY(updates, $u, $u.price > 1) == nil")?.contains("collection operator") == true)
        #expect(reason("updates.price > children.price")?.contains("only one side") == true)
        #expect(reason("ALL price > 5")?.contains("ALL needs a to-many key path") == true)
        #expect(reason("prize > 5") == "entity Company has no property 'prize'")
        #expect(reason("price == {1, 2}")?.contains("IN or BETWEEN") == true)
        #expect(reason("5 IN price")?.contains("IN needs a collection") == true)
        #expect(reason("updates.@sum.note > 1")?.contains("@sum needs a number") == true)
    }

    // MARK: SQL functions

    @Test func registeredFunctionsGiveTheEvaluatorsAnswers() throws {
        let connection = try Connection(path: ":memory:")
        try FetchPredicate.registerFunctions(on: connection)
        func value(_ sql: String) throws -> String {
            let statement = try connection.prepare("SELECT " + sql)
            _ = try statement.step()
            switch statement.columnType(at: 0) {
            case .null: return "NULL"
            case .integer: return String(statement.int64(at: 0))
            default: return statement.string(at: 0) ?? "?"
            }
        }
        #expect(try value("DS_FOLD('ÄpFEL', 3)") == "apfel")
        #expect(try value("DS_FOLD(12, 3)") == "12")
        #expect(try value("DS_BEGINSWITH('Apple', 'Ap', 0)") == "1")
        #expect(try value("DS_BEGINSWITH('Apple', 'ap', 0)") == "0")
        #expect(try value("DS_BEGINSWITH('Apple', 'ap', 1)") == "1")
        #expect(try value("DS_ENDSWITH('Apple', NULL, 0)") == "NULL")
        #expect(try value("DS_CONTAINS(12345, '3', 0)") == "0")
        #expect(try value("DS_LIKE('banana', 'b*n?na', 0)") == "1")
        #expect(try value("DS_MATCHES('banana', 'ban', 0)") == "0")
        #expect(try value("DS_MATCHES('banana', 'ban.*', 0)") == "1")
        #expect(try value("DS_MATCHES('banana', '(', 0)") == "0")
    }

    // MARK: Agreement with the in-memory evaluator

    @Test(arguments: 0..<12)
    func randomPredicatesMatchTheSameRowsInMemoryAndInSQLite(batch: Int) throws {
        var random = SplitMix64(seed: 0xDA7A_57AC + UInt64(batch))
        for _ in 0..<5 {
            let data = RandomPredicateData.make(using: &random)
            let connection = try data.database()
            for _ in 0..<10 {
                var generator = RandomPredicateGenerator(data: data)
                let format = generator.predicate(depth: 3, using: &random)
                let predicate: FetchPredicate
                do {
                    predicate = try FetchPredicate(format: format, argumentArray: generator.arguments)
                } catch {
                    Issue.record("generated predicate does not parse: \(format) \(generator.arguments): \(error)")
                    continue
                }
                do {
                    try predicate.validate(for: predicateEntity("Company"))
                    let inMemory = try data.matchesInMemory(predicate)
                    let inSQL = try data.matchesInSQL(predicate, on: connection)
                    #expect(inMemory == inSQL, "\(predicate)\nin memory: \(inMemory.sorted()), SQL: \(inSQL.sorted())")
                } catch {
                    Issue.record("\(predicate): \(error)")
                }
                if !generator.usesObjects {
                    #expect(try FetchPredicate(format: predicate.description) == predicate, "\(predicate)")
                }
            }
        }
    }
}

// MARK: - Random rows and predicates

enum RandomPredicateData {
    static let names: [PropertyValue] = [
        .string("apple"), .string("Apple"), .string("APPLE"), .string("äpple"), .string("Äpple"), .string("straße"),
        .string("STRASSE"), .string(""), .string("a*b"), .string("b"), .string("ab"), .string("é"), .string("e\u{301}"),
        .string("日本"), .string("10"), .string("5"), .string("ﬁ"), .string("Big Apple pie"), .string("e-mail STRASSE"),
        .string("apple, apple AND Äpple"), .null,
    ]
    /// Full-text queries for `MATCHES[search]` over the names.
    static let searchQueries = [
        "apple", "APPLE", "app*", "äpple", "strasse", "straße", "\"big apple\"", "apple OR b", "apple NOT pie", "e",
        "日本", "(apple OR ab) pie", "a*", "mail", "e-mail", "b*", "\"apple and\"", "ﬁ", "AND* OR pie",
    ]
    static let numbers: [PropertyValue] = [
        .integer(-3), .integer(0), .integer(1), .integer(2), .integer(3), .integer(10), .double(-2.5), .double(0.5),
        .double(1.5), .double(3), .double(10), .null,
    ]
    static let dates: [PropertyValue] = [-10.0, 0, 0.5, 100].map { .date(Date(timeIntervalSinceReferenceDate: $0)) } + [.null]
    static let uuids: [PropertyValue] = [
        .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!),
        .uuid(UUID(uuidString: "F0000000-0000-0000-0000-000000000000")!), .null,
    ]
    static let urls: [PropertyValue] = [.uri(URL(string: "https://a.com")!), .uri(URL(string: "http://b.org/x")!), .null]
    static let decimals: [PropertyValue] = [.decimal(0), .decimal(Decimal(string: "1.5")!), .decimal(3), .null]
    static let blobs: [PropertyValue] = [.data(Data()), .data(Data([1, 2])), .data(Data([0xFF])), .null]

    static func make(using random: inout SplitMix64) -> PredicateTestData {
        let data = PredicateTestData()
        let companies = Int.random(in: 4...9, using: &random)
        for pk in 1...Int64(companies) {
            var values: [String: PropertyValue] = [
                "name": names.randomElement(using: &random)!,
                "price": (numbers + [.double(1e20)]).randomElement(using: &random)!,
                "volume": numbers.filter { if case .double = $0 { false } else { true } }.randomElement(using: &random)!,
                "active": [.bool(true), .bool(false), .null].randomElement(using: &random)!,
                "founded": dates.randomElement(using: &random)!,
                "code": uuids.randomElement(using: &random)!,
                "site": urls.randomElement(using: &random)!,
                "rating": decimals.randomElement(using: &random)!,
                "blob": blobs.randomElement(using: &random)!,
            ]
            if Bool.random(using: &random) { values["parent"] = .integer(Int64.random(in: 1...Int64(companies), using: &random)) }
            data.add("Company", pk, values)
        }
        for pk in 100..<(100 + Int64.random(in: 0...14, using: &random)) {
            var values: [String: PropertyValue] = [
                "price": numbers.randomElement(using: &random)!,
                "volume": numbers.filter { if case .double = $0 { false } else { true } }.randomElement(using: &random)!,
                "note": names.randomElement(using: &random)!,
            ]
            if Int.random(in: 0..<5, using: &random) > 0 {
                values["company"] = .integer(Int64.random(in: 1...Int64(companies), using: &random))
            }
            data.add("Update", pk, values)
        }
        for pk in 200..<203 as Range<Int64> {
            data.add("Tag", pk, ["name": [.string("tech"), .string("Tech"), .string("food")][Int(pk - 200)]])
        }
        for company in 1...Int64(companies) {
            for tag in 200..<203 as Range<Int64> where Int.random(in: 0..<3, using: &random) == 0 {
                data.companyTags.append((company, tag))
            }
        }
        return data
    }
}

/// Builds random predicate formats over the Company entity, with `%@` arguments.
struct RandomPredicateGenerator {
    let data: PredicateTestData
    var arguments: [Any?] = []
    var usesObjects = false

    init(data: PredicateTestData) { self.data = data }

    private enum Kind { case text, number, date, uuid, url, blob, object }

    private static let attributes: [(String, Kind)] = [
        ("name", .text), ("price", .number), ("volume", .number), ("active", .number), ("founded", .date),
        ("code", .uuid), ("site", .url), ("rating", .number), ("blob", .blob), ("parent.name", .text),
        ("parent.price", .number), ("parent.parent.volume", .number), ("parent", .object), ("SELF", .object),
    ]
    private static let toMany: [(String, Kind)] = [
        ("updates.price", .number), ("updates.volume", .number), ("updates.note", .text), ("tags.name", .text),
        ("children.price", .number), ("children.name", .text), ("parent.updates.price", .number),
        ("children.updates.volume", .number), ("tags.companies.volume", .number), ("updates.company.name", .text),
    ]

    mutating func predicate(depth: Int, using random: inout SplitMix64) -> String {
        if depth > 0, Int.random(in: 0..<10, using: &random) < 4 {
            switch Int.random(in: 0..<5, using: &random) {
            case 0: return "NOT (" + predicate(depth: depth - 1, using: &random) + ")"
            case 1: return "(" + predicate(depth: depth - 1, using: &random) + ") OR (" + predicate(depth: depth - 1, using: &random) + ")"
            case 2: return predicate(depth: depth - 1, using: &random) + " OR " + predicate(depth: depth - 1, using: &random)
            case 3: return "!" + comparison(using: &random) + " && " + predicate(depth: depth - 1, using: &random)
            default: return predicate(depth: depth - 1, using: &random) + " AND " + predicate(depth: depth - 1, using: &random)
            }
        }
        return comparison(using: &random)
    }

    private mutating func comparison(using random: inout SplitMix64) -> String {
        switch Int.random(in: 0..<23, using: &random) {
        case 20..<23:
            let (key, toMany) = [("name", false), ("SELF", false), ("parent.name", false), ("parent", false),
                                 ("updates.note", true), ("children.name", true), ("updates.company.name", true), ("updates", true)]
                .randomElement(using: &random)!
            let modifier = toMany ? ["", "ANY ", "ALL ", "NONE "].randomElement(using: &random)! : ""
            let query = RandomPredicateData.searchQueries.randomElement(using: &random)!
            return modifier + "\(key) MATCHES[search] " + (Bool.random(using: &random) ? argument(query) : QuotedString.predicateLiteral(query))
        case 0..<7:
            let (key, kind) = Self.attributes.randomElement(using: &random)!
            return scalarComparison(key, kind, using: &random)
        case 7..<11:
            let (key, kind) = Self.toMany.randomElement(using: &random)!
            let modifier = ["", "ANY ", "ALL ", "NONE ", "SOME "].randomElement(using: &random)!
            return modifier + scalarComparison(key, kind, using: &random)
        case 11..<14:
            let aggregate = [
                "updates.@count", "tags.@count", "children.@count", "updates.@sum.price", "updates.@avg.volume",
                "updates.@min.note", "updates.@max.price", "children.@max.name", "parent.updates.@sum.volume",
                "children.updates.@count", "updates.@avg.company.price",
            ].randomElement(using: &random)!
            let kind: Kind = aggregate.hasSuffix("note") || aggregate.hasSuffix("name") ? .text : .number
            return aggregate + " " + ordering(using: &random) + " " + value(kind, using: &random)
        case 14..<16:
            // Built only once chosen, so that only its arguments join the list.
            let inner = switch Int.random(in: 0..<6, using: &random) {
            case 0: "$u.price " + ordering(using: &random) + " " + value(.number, using: &random)
            case 1: "$u.note " + stringOperator(using: &random) + " " + value(.text, using: &random)
            case 2: "$u.volume < $u.company.volume"
            case 3: "$u.price >= price"
            case 4: "ANY $u.company.tags.name ==[c] 'tech'"
            default: "$u.price > 0 AND $u.note != nil"
            }
            return "SUBQUERY(updates, $u, \(inner)).@count " + ordering(using: &random) + " " + String(Int.random(in: 0...2, using: &random))
        case 16:
            let (key, kind) = Self.attributes.randomElement(using: &random)!
            let count = Int.random(in: 0...3, using: &random)
            let values = (0..<count).map { _ in value(Bool.random(using: &random) ? kind : .number, using: &random) }
            return "\(key) IN\(options(using: &random)) {\(values.joined(separator: ", "))}"
        case 17:
            let (key, kind) = [("price", Kind.number), ("name", .text), ("founded", .date), ("updates.volume", .number)]
                .randomElement(using: &random)!
            return "\(key) BETWEEN {\(value(kind, using: &random)), \(value(kind, using: &random))}"
        case 18:
            usesObjects = true
            let update = data.rows["Update"]!.keys.randomElement(using: &random) ?? 1
            arguments.append(data.id("Update", update))
            return ["%@ IN updates", "ANY updates == %@", "NONE updates != %@"].randomElement(using: &random)!
        default:
            return [
                "TRUEPREDICATE", "FALSEPREDICATE", "'tech' IN tags.name", "'pp' IN[c] name", "name == parent.name",
                "price > parent.price", "volume == name", "name ==[cd] parent.name", "ANY children.price < price",
            ].randomElement(using: &random)!
        }
    }

    private mutating func scalarComparison(_ key: String, _ kind: Kind, using random: inout SplitMix64) -> String {
        let crossKind: [Kind] = [.text, .number, .date, .uuid, .url, .blob]
        let valueKind = Int.random(in: 0..<5, using: &random) == 0 ? crossKind.randomElement(using: &random)! : kind
        if kind == .text, Bool.random(using: &random) {
            let op = stringOperator(using: &random)
            let pattern: String
            if op.hasPrefix("LIKE") {
                pattern = argument(["*a*", "?pple", "a\\*b", "*", "", "A*", "*e", "STRA?SE", "*\u{301}"].randomElement(using: &random)!)
            } else if op.hasPrefix("MATCHES") {
                pattern = argument(["a.*", "[A-Z].*", "b", ".*\\d.*", "ß|ss", "", "e."].randomElement(using: &random)!)
            } else {
                pattern = value(valueKind, using: &random)
            }
            return "\(key) \(op) \(pattern)"
        }
        let op = ["==", "!=", "<", "<=", ">", ">=", "=", "<>", "=<", "=>"].randomElement(using: &random)!
        let options = kind == .text ? self.options(using: &random) : ""
        if Int.random(in: 0..<8, using: &random) == 0 {
            return "\(value(valueKind, using: &random)) \(op)\(options) \(key)"
        }
        return "\(key) \(op)\(options) \(value(valueKind, using: &random))"
    }

    private func ordering(using random: inout SplitMix64) -> String {
        ["==", "!=", "<", "<=", ">", ">="].randomElement(using: &random)!
    }

    private func options(using random: inout SplitMix64) -> String {
        ["", "", "[c]", "[d]", "[cd]"].randomElement(using: &random)!
    }

    private func stringOperator(using random: inout SplitMix64) -> String {
        ["BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"].randomElement(using: &random)! + options(using: &random)
    }

    private mutating func argument(_ value: Any?) -> String {
        arguments.append(value)
        return "%@"
    }

    private mutating func value(_ kind: Kind, using random: inout SplitMix64) -> String {
        if Int.random(in: 0..<10, using: &random) == 0 { return Bool.random(using: &random) ? "nil" : argument(nil) }
        switch kind {
        case .text:
            guard case .string(let text)? = RandomPredicateData.names.randomElement(using: &random) else { return "nil" }
            return Bool.random(using: &random) ? argument(text) : QuotedString.predicateLiteral(text)
        case .number:
            switch RandomPredicateData.numbers.randomElement(using: &random)! {
            case .integer(let v): return Bool.random(using: &random) ? String(v) : argument(Int(v))
            case .double(let v): return Bool.random(using: &random) ? "\(v)" : argument(v)
            default:
                // Only the chosen one may become an argument: the arguments must line up with the format's %@s.
                switch Int.random(in: 0..<4, using: &random) {
                case 0: return "TRUE"
                case 1: return "NO"
                case 2: return argument(Decimal(string: "1.5")!)
                default: return argument(false)
                }
            }
        case .date:
            guard case .date(let date)? = RandomPredicateData.dates.randomElement(using: &random) else { return "nil" }
            return argument(date)
        case .uuid:
            guard case .uuid(let uuid)? = RandomPredicateData.uuids.randomElement(using: &random) else { return "nil" }
            return argument(uuid)
        case .url:
            guard case .uri(let url)? = RandomPredicateData.urls.randomElement(using: &random) else { return "nil" }
            return Bool.random(using: &random) ? argument(url) : QuotedString.predicateLiteral(url.absoluteString)
        case .blob:
            guard case .data(let bytes)? = RandomPredicateData.blobs.randomElement(using: &random) else { return "nil" }
            return argument(bytes)
        case .object:
            usesObjects = true
            let pk = data.rows["Company"]!.keys.randomElement(using: &random)!
            return argument(data.id("Company", pk))
        }
    }
}
