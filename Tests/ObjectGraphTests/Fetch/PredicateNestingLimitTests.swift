import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStorage
@testable import DataStackStores

/// ``FetchPredicate/maximumDepth`` and ``FetchPredicate/maximumKeyPathLength``:
/// a format nested past the limit throws at the offset that passes it, a tree
/// built in code that deep throws from every use, and predicates just under
/// the limit parse, check, evaluate, compile and print — all on a thread with
/// a Dispatch worker's 512 KiB stack, where each of these used to overflow.
@Suite struct PredicateNestingLimitTests {
    /// One way of nesting, written `depth` times around `name == 'a'`.
    struct Nesting: Sendable, CustomStringConvertible {
        var description: String
        /// The format nested `depth` times.
        var format: @Sendable (Int) -> String
        /// The deepest nesting the parser accepts (its levels, counted as
        /// ``FetchPredicate/maximumDepth`` says, are at most 32).
        var deepest: Int
        /// Where the parser says the limit is passed, for any depth beyond `deepest + 1`.
        var offset: Int
    }

    static let nestings: [Nesting] = [
        // OR and AND of the top (2), two per group, the comparison and its left side: 2 + 2k + 2 ≤ 32.
        // Group 16 opens level 33: the error points at what follows its '('.
        Nesting(description: "parentheses", format: { String(repeating: "(", count: $0) + "name == 'a'" + String(repeating: ")", count: $0) },
                deepest: 14, offset: 16),
        // 2 + k NOTs + 2 ≤ 32; the 31st NOT, at 30 × 4, opens level 33 (the 30th's comparison, there too).
        Nesting(description: "NOT", format: { String(repeating: "NOT ", count: $0) + "name == 'a'" },
                deepest: 28, offset: 120),
        // 4 + two per brace (the collection and its element) ≤ 32; brace 15, after "name IN " and 14 braces, opens 33.
        Nesting(description: "braces", format: { "name IN " + String(repeating: "{", count: $0) + "'a'" + String(repeating: "}", count: $0) },
                deepest: 14, offset: 22),
        // Five levels per SUBQUERY in a predicate (the SUBQUERY, its OR, AND, comparison and value):
        // the 7th, at 6 × 23, starts the comparison at level 33.
        Nesting(description: "SUBQUERY in a predicate",
                format: { String(repeating: "SUBQUERY(children, $x, ", count: $0) + "name == 'a'" + String(repeating: ").@count > 0", count: $0) },
                deepest: 5, offset: 138),
        // Two levels per SUBQUERY in a collection (the SUBQUERY and its collection) after six, and its predicate's OR and AND: the 14th inner one, at 9 + 13 × 9, opens 33.
        Nesting(description: "SUBQUERY as a collection",
                format: { "SUBQUERY(" + String(repeating: "SUBQUERY(", count: $0) + "children" + String(repeating: ", $x, TRUEPREDICATE)", count: $0) + ", $y, TRUEPREDICATE).@count > 0" },
                deepest: 12, offset: 126),
        // Two levels per CAST (the CAST and its value) after four; the 15th, at 8 + 14 × 5, opens 33.
        Nesting(description: "CAST", format: { "name == " + String(repeating: "CAST(", count: $0) + "1" + String(repeating: ", \"NSNumber\")", count: $0) },
                deepest: 14, offset: 78),
    ]

    /// The depths the issue found crashing the parser, and one level past the limit.
    @Test(arguments: nestings)
    func aFormatNestedPastTheLimitThrowsAtTheOffsetThatPassesIt(_ nesting: Nesting) {
        for depth in [nesting.deepest + 2, 300, 1_000, 3_400] {
            let format = nesting.format(depth)
            let (thrown, _) = SmallStackThread.run { () -> FetchPredicateError? in
                do {
                    _ = try FetchPredicate(format: format)
                    return nil
                } catch {
                    return error as? FetchPredicateError
                }
            }
            #expect(thrown != nil, "\(nesting) × \(depth) parsed")
            #expect(thrown?.message == "the predicate nests more than 32 levels deep", "\(nesting) × \(depth)")
            #expect(thrown?.offset == nesting.offset, "\(nesting) × \(depth)")
        }
    }

    /// The deepest format of each kind parses, checks against the model,
    /// evaluates, compiles to SQL and prints a format, each on a 512 KiB
    /// stack of which it uses under half (the figures are printed).
    @Test(arguments: nestings)
    func aFormatJustUnderTheLimitWorksOnAWorkerStack(_ nesting: Nesting) throws {
        let format = nesting.format(nesting.deepest)
        let data = PredicateTestData()
        data.add("Company", 1, ["name": .string("a")])
        data.add("Company", 2, ["name": .string("b"), "parent": .integer(1)])
        let connection = try data.database()
        let predicate: FetchPredicate
        do {
            predicate = try FetchPredicate(format: format)
        } catch {
            // A CAST of a CAST never converts: refused, for that, not for its depth.
            #expect((error as? FetchPredicateError)?.message == "the value can't be cast to NSNumber", "\(nesting): \(error)")
            return
        }
        // Nested braces and CASTs are refused by the evaluator and the compiler with an
        // error of their own: the point is that no stage crashes or says "levels deep".
        let stages: [(String, () throws -> Void)] = [
            ("parse", { _ = try FetchPredicate(format: format) }),
            ("validate", { try predicate.validate(for: predicateEntity("Company")) }),
            ("evaluate", { _ = try data.matchesInMemory(predicate) }),
            ("compile", { _ = try data.matchesInSQL(predicate, on: connection) }),
            ("print", { _ = predicate.description }),
        ]
        var figures: [String] = []
        for (stage, body) in stages {
            let (outcome, used) = SmallStackThread.run { () -> String in
                do { try body(); return "ok" } catch { return "\(error)" }
            }
            #expect(!outcome.contains("levels deep"), "\(nesting), \(stage): \(outcome)")
            #expect(used < SmallStackThread.workerStackBytes / 2, "\(nesting), \(stage)")
            figures.append("\(stage) \(used / 1024) KiB")
        }
        print("PredicateNestingLimitTests: \(nesting) × \(nesting.deepest): " + figures.joined(separator: ", "))
    }

    @Test func nestingsThatFitMatchTheSameRowsInMemoryAndInSQLite() throws {
        let data = PredicateTestData()
        data.add("Company", 1, ["name": .string("a")])
        data.add("Company", 2, ["name": .string("b"), "parent": .integer(1)])
        data.add("Company", 3, ["name": .string("a"), "parent": .integer(2)])
        for nesting in Self.nestings where ["parentheses", "NOT", "SUBQUERY in a predicate", "SUBQUERY as a collection"].contains(nesting.description) {
            let predicate = try FetchPredicate(format: nesting.format(nesting.deepest))
            let connection = try data.database()
            let (result, _) = SmallStackThread.run { () -> String in
                do {
                    let memory = try data.matchesInMemory(predicate)
                    let sql = try data.matchesInSQL(predicate, on: connection)
                    return memory == sql ? "\(memory.sorted())" : "memory \(memory.sorted()), SQL \(sql.sorted())"
                } catch {
                    return "\(error)"
                }
            }
            #expect(result.hasPrefix("["), "\(nesting): \(result)")
        }
    }

    // MARK: - Trees built in code

    /// `NOT` chained 10,000 times, `AND` and `OR` alternating as deep, and
    /// nested SUBQUERYs: each use throws the limit (the description stops at
    /// it with `…`), on a 512 KiB stack. The tree is built and released on a
    /// large stack: releasing a tree is Swift's own recursion.
    @Test func aTreeBuiltInCodePastTheLimitThrowsFromEveryUse() {
        SmallStackThread.run(stackBytes: 64 << 20) { () -> Void in
            let leaf = PredicateNode.comparison(lhs: .keyPath(["name"]), op: .equal, rhs: .constant(.string("a")),
                                                options: [], modifier: .direct)
            var not = leaf, alternating = leaf, subquery = leaf
            for level in 0..<10_000 {
                not = .not(not)
                alternating = level.isMultiple(of: 2) ? .and([alternating, leaf]) : .or([alternating, leaf])
                if level < 1_000 {
                    subquery = .comparison(lhs: .aggregate(.count, collection: .subquery(collection: .keyPath(["children"]), variable: "x",
                                                                                          predicate: subquery), keyPath: []),
                                           op: .greater, rhs: .constant(.integer(0)), options: [], modifier: .direct)
                }
            }
            for tree in [not, alternating, subquery] {
                let predicate = FetchPredicate(expression: tree)
                let (outcomes, _) = SmallStackThread.run { () -> [String] in
                    let data = PredicateTestData()
                    data.add("Company", 1, ["name": .string("a")])
                    func reason(_ body: () throws -> Void) -> String {
                        do { try body(); return "no error" } catch { return (error as? FetchPredicateError)?.message ?? "\(error)" }
                    }
                    let description = predicate.description
                    return [
                        reason { try predicate.validate(for: predicateEntity("Company")) },
                        reason { _ = try predicate.evaluate(with: data.subject("Company", 1)) },
                        reason { _ = try predicate.sql(for: predicateEntity("Company"), schema: PredicateTestSchema(), rootAlias: "t0") },
                        reason { _ = try predicate.withSubstitutionVariables(["x": 1]) },
                        description.contains("…") && description.count < 100_000 ? "the limit passed" : description,
                    ]
                }
                #expect(outcomes.dropLast() == Array(repeating: "the predicate nests more than 32 levels deep", count: 4)[...])
                #expect(outcomes.last == "the limit passed")
            }
        }
    }

    /// 196 `NOT`s by the public combinators pass the limit; 30 (with the
    /// comparison and its sides, 32 levels) are within it, and evaluate and
    /// compile. (Their description does not parse back: the parser counts the
    /// top's OR and AND too, see ``FetchPredicate/maximumDepth``.)
    @Test func combinatorsThatPassTheLimitThrowAndThoseWithinItEvaluate() throws {
        let data = PredicateTestData()
        data.add("Company", 1, ["name": .string("a")])
        var predicate = try FetchPredicate(format: "name == 'a'")
        for _ in 0..<98 { predicate = .not(.not(predicate)) }
        #expect(throws: FetchPredicateError.self) { try predicate.evaluate(with: data.subject("Company", 1)) }
        predicate = try FetchPredicate(format: "name == 'a'")
        for _ in 0..<15 { predicate = .not(.not(predicate)) }
        #expect(try predicate.evaluate(with: data.subject("Company", 1)))
        #expect(try data.matchesInSQL(predicate, on: data.database()) == [1])
    }

    /// A nested array given for `%@` is a collection of collections: as deep as the limit, no deeper.
    @Test func anArgumentOfArraysNestedPastTheLimitThrows() {
        var array: Any = [1]
        for _ in 0..<200 { array = [array] }
        let error = #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "name IN %@", array) }
        #expect(error?.message == "the predicate nests more than 32 levels deep")
        #expect(error?.offset == 8)
    }

    // MARK: - Key paths

    /// A key path of 200,000 keys (which took minutes to refuse, quadratic in
    /// its length) is refused at its 65th key; one of 64 keys parses.
    @Test func aKeyPathLongerThanTheLimitIsRefusedAtTheKeyThatPassesIt() throws {
        let long = Array(repeating: "parent", count: 200_000).joined(separator: ".") + ".name == 'a'"
        let error = #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: long) }
        #expect(error?.message == "the key path has more than 64 keys")
        #expect(error?.offset == 64 * 7)

        let keys = Array(repeating: "parent", count: 63) + ["name"]
        let fits = try FetchPredicate(format: keys.joined(separator: ".") + " == 'a'")
        try fits.validate(for: predicateEntity("Company"))
        #expect(fits.expression == .comparison(lhs: .keyPath(keys), op: .equal, rhs: .constant(.string("a")), options: [], modifier: .direct))
    }

    @Test func aKeyPathLongerThanTheLimitIsRefusedAfterACollectionOperatorAndForK() throws {
        let path = Array(repeating: "parent", count: 200_000).joined(separator: ".")
        let aggregate = #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "children.@max.\(path) > 1") }
        #expect(aggregate?.message == "the key path has more than 64 keys")
        #expect(aggregate?.offset == "children.@max.".count + 64 * 7)

        let argument = #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "%K == 1", path) }
        #expect(argument?.message == "the key path given for %K has more than 64 keys")

        let built = FetchPredicate(expression: .comparison(lhs: .keyPath(Array(repeating: "parent", count: 200_000)), op: .equal,
                                                           rhs: .constant(.null), options: [], modifier: .direct))
        let validation = #expect(throws: FetchPredicateError.self) { try built.validate(for: predicateEntity("Company")) }
        #expect(validation?.message == "the key path has more than 64 keys")
    }
}
