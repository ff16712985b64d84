import Foundation
import ObjectGraph

extension FuzzTarget {
    /// A search box's text: parsed, matched and ranked in memory, and turned
    /// into the FTS5 expression the SQLite store runs.
    static let searchQuery = FuzzTarget(
        name: "search-query",
        summary: "SearchQuery(_:), then matches, relevance and its FTS5 expression",
        seeds: { _ in
            [
                "apple pie", "\"apple pie\" -crumble", "café OR cafe", "pie*", "(apple OR pear) tart",
                "NOT plum", "a AND (b OR \"c d\")", "-\"\"", "ünïcödé ÉCLAIR", "naïve* -x*",
            ].map { Data($0.utf8) }
        },
        run: { input in
            let query = try SearchQuery(String(decoding: input, as: UTF8.self))
            let document = ["Apple pie with crumble", nil, "Café au lait, naïve éclair"]
            _ = query.matches(document)
            _ = query.relevance(of: document)
            _ = query.fts5Expression
        }
    )
}
