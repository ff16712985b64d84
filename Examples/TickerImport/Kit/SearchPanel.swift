import DataStack
import Foundation

/// The "search" panel of `--search TEXT`: the companies whose name matches a
/// full-text query, most relevant first, kept live by a
/// `FetchedResultsController` on the main context, as the top movers are.
///
/// ```swift
/// let panel = try SearchPanel(query: SearchQuery("acme OR glob*"), context: stack.mainContext)
/// let (rows, matches) = try panel.read()   // after each merge, on the main queue
/// // rows[0].highlightedName == "[Acme] Todf Labs"
/// ```
///
/// `Company.name` is indexed for search, so the store answers
/// `name MATCHES[search] %@` from its FTS5 index rather than by reading every
/// name, and orders by relevance (``FetchSort/init(key:relevanceTo:ascending:)``),
/// then by name. After each merge the controller re-checks only the companies
/// the save touched — a company renamed into or out of the query, or one the
/// import added — with one query, and the panel loads only the companies it
/// shows; the total number of matches is one count from the index.
// @unchecked Sendable: used only on the main queue, the main context's queue.
final class SearchPanel: FetchedResultsControllerDelegate, @unchecked Sendable {
    /// One line of the panel, as last read from the store.
    struct Row {
        var symbol: String
        var name: String
        /// The name with each match of the query in `[brackets]`.
        var highlightedName: String
        var price: Double
        var previousClose: Double

        /// Change since the opening price, in percent.
        var change: Double { previousClose > 0 ? (price / previousClose - 1) * 100 : 0 }
    }

    let query: SearchQuery
    private let controller: FetchedResultsController<Company>
    /// All the matches, not only the ones shown: the count ``read()`` makes.
    private let countRequest: FetchRequest<Company>
    /// The last change, as `+inserted −deleted ↕moved ~updated`.
    private(set) var lastChange = "—"

    /// Starts following the companies that match `query`, the `count` most relevant.
    ///
    /// - Throws: the store's error when the first fetch fails.
    init(query: SearchQuery, context: ManagedObjectContext, count: Int = 10) throws {
        self.query = query
        var request = FetchRequest<Company>()
        // The query was parsed already (Options), so the predicate holds a valid one.
        request.predicate = try FetchPredicate(format: "name MATCHES[search] %@", query.text)
        countRequest = request
        // Ties (names as relevant as each other) by name, so the order is stable.
        request.sortDescriptors = [FetchSort(key: "name", relevanceTo: query), FetchSort(key: "name")]
        request.fetchLimit = count
        controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
        controller.delegate = self
        try controller.performFetch()
    }

    /// The companies on the panel and how many match in all, as the store has them now.
    ///
    /// - Throws: the store's error; the caller keeps the rows it last read.
    func read() throws -> (rows: [Row], matches: Int) {
        var rows: [Row] = []
        for company in controller.fetchedObjects ?? [] {
            // Throws rather than drawing a fault with empty values; the first call
            // loads every company the last merge turned into a fault, in one query.
            try company.loadValues()
            if company.isDeleted { continue }
            rows.append(Row(symbol: company.symbol, name: company.name, highlightedName: highlighted(company.name),
                            price: company.price, previousClose: company.previousClose))
        }
        return (rows, try controller.managedObjectContext.count(for: countRequest))
    }

    /// `name` with every word or phrase of the query it holds in `[brackets]`.
    private func highlighted(_ name: String) -> String {
        var result = ""
        var cursor = name.startIndex
        for range in query.highlights(in: name) {
            result += name[cursor..<range.lowerBound] + "[" + name[range] + "]"
            cursor = range.upperBound
        }
        return result + name[cursor...]
    }

    func controller(_ controller: FetchedResultsController<Company>, didChangeContentWith change: FetchedResultsChange) {
        let difference = change.difference
        lastChange = "+\(difference.inserts.count) −\(difference.deletes.count) ↕\(difference.moves.count) ~\(difference.updates.count)"
    }
}
