import Foundation
import Testing
@testable import ObjectGraph
@_spi(DataStackInternal) import DataStackSQLite

/// ``SearchQuery/maximumDepth``: groups nested past it throw at the `(` that
/// passes it; queries at it, and queries of any number of words and
/// operators, parse, match and run in FTS5 — on a 512 KiB stack.
@Suite struct SearchQueryNestingLimitTests {
    private static func nested(_ depth: Int, alternating: Bool = true) -> String {
        var query = "apple"
        for level in 0..<depth {
            let op = !alternating ? "" : ["OR", "AND", "NOT"][level % 3]
            query = "pie \(op) (\(query))"
        }
        return query
    }

    @Test(arguments: [17, 300, 3_400, 100_000])
    func groupsNestedPastTheLimitThrowAtTheParenthesisThatPassesIt(_ depth: Int) {
        let text = String(repeating: "(", count: depth) + "apple" + String(repeating: ")", count: depth)
        let (error, _) = SmallStackThread.run { () -> SearchQueryError? in
            do throws(SearchQueryError) {
                _ = try SearchQuery(text)
                return nil
            } catch {
                return error
            }
        }
        #expect(error == SearchQueryError(.syntaxError, query: text, offset: 16, message: "groups nest more than 16 deep"))
    }

    /// 16 groups, alternating OR, AND and NOT so that none merges with the
    /// one around it: the deepest tree a query can have.
    @Test func queriesAtTheLimitMatchInMemoryAsFTS5Does() throws {
        let text = Self.nested(16)
        let documents = ["pie", "apple", "pie apple", "cherry"]
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE VIRTUAL TABLE texts USING fts5(text, tokenize='unicode61 remove_diacritics 2')")
        let insert = try connection.prepare("INSERT INTO texts(rowid, text) VALUES (?, ?)")
        for (row, document) in documents.enumerated() {
            try insert.bind(Int64(row), at: 1)
            try insert.bind(document, at: 2)
            try insert.execute()
            insert.reset()
        }
        let (outcome, used) = SmallStackThread.run { () -> Result<(Set<Int64>, Set<Int64>), any Error> in
            Result {
                let query = try SearchQuery(text)
                let memory = Set(documents.indices.filter { query.matches([documents[$0]]) }.map(Int64.init))
                let select = try connection.prepare("SELECT rowid FROM texts WHERE texts MATCH ?")
                try select.bind(query.fts5Expression, at: 1)
                var sqlite = Set<Int64>()
                while try select.step() { sqlite.insert(select.int64(at: 0)) }
                _ = query.relevance(of: ["pie apple"])
                return (memory, sqlite)
            }
        }
        let (memory, sqlite) = try outcome.get()
        #expect(memory == sqlite)
        print("SearchQueryNestingLimitTests: 16 groups used \(used) bytes of a 512 KiB stack")
        #expect(used < SmallStackThread.workerStackBytes / 4)
    }

    /// 100,000 words, or as many joined by AND, OR or NOT, are one level of
    /// the tree (FTS5's flattening), not one level each.
    @Test(arguments: ["", "AND ", "OR ", "NOT "])
    func longQueriesWithoutGroupsAreOneLevelDeep(_ op: String) throws {
        let text = "first " + (0..<100_000).map { "w\($0) " }.joined(separator: op)
        let (outcome, _) = SmallStackThread.run { () -> Result<(Bool, Int), any Error> in
            Result {
                let query = try SearchQuery(text)
                return (query.matches(["first w0 w1"]), query.fts5Expression.count)
            }
        }
        let (matches, length) = try outcome.get()
        #expect(matches == (op == "OR "))
        #expect(length > 100_000)
        let root = try SearchQuery(text).root
        switch (op, root) {
        case ("", .and(let operands)), ("AND ", .and(let operands)): #expect(operands.count == 100_001)
        case ("OR ", .or(let operands)): #expect(operands.count == 100_000)   // (first AND w0) OR w1 OR …
        case ("NOT ", .and(let operands)): #expect(operands.count == 2)   // first AND (w0 NOT (w1 OR …))
        default: Issue.record("\(op): the tree is \(String(describing: root).prefix(80))")
        }
    }
}
