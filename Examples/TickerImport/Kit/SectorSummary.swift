import DataStack
import Foundation

/// The market by sector — companies, price updates, average price — read
/// with one grouped dictionary fetch on the main context after every merge.
///
/// ```swift
/// let sectors = try SectorSummary.read(in: stack.mainContext)   // on the main queue
/// // [Row(sector: "Consumer", companies: 77, updates: 1_912, averagePrice: 251.2), …]
/// ```
///
/// The fetch is `SELECT ZSECTOR, count(*), total(ZUPDATECOUNT), avg(ZPRICE)
/// FROM ZCOMPANY GROUP BY ZSECTOR`: computed by the store from the companies'
/// rows, so it registers no object in the main context, and it includes what
/// the last merge brought (and whatever was committed after it). It reads the
/// companies rather than the stock updates so that its cost follows the
/// market's size, not the length of the run: `updates` sums
/// `Company.updateCount`, every update a company ever had, which
/// `--keep-updates` does not trim.
///
/// - Complexity: O(*c*) for *c* companies, whatever the number of stock updates.
enum SectorSummary {
    /// One sector's line.
    struct Row: Encodable, Equatable {
        /// Nil for companies that have none (kept from a store of the model's
        /// first version, outside the market).
        var sector: String?
        var companies: Int
        var updates: Int64
        var averagePrice: Double
    }

    /// The sectors, by name (companies without one last).
    ///
    /// - Throws: the store's error; the caller keeps the rows it last read.
    static func read(in context: ManagedObjectContext) throws -> [Row] {
        var request = FetchRequest<[String: Any]>(entityName: "Company")
        request.resultType = .dictionary
        request.propertiesToFetch = [
            "sector",
            .expression(ExpressionDescription(name: "companies", expression: .count(), resultType: .integer64)),
            .expression(ExpressionDescription(name: "updates", expression: .sum(.keyPath("updateCount")), resultType: .integer64)),
            .expression(ExpressionDescription(name: "averagePrice", expression: .average(.keyPath("price")), resultType: .double)),
        ]
        request.propertiesToGroupBy = ["sector"]
        // Integers come back as `Int`, as key-value coding reads every integer attribute.
        let rows = try context.fetch(request).map { values in
            Row(sector: values["sector"] as? String, companies: values["companies"] as? Int ?? 0,
                updates: Int64(values["updates"] as? Int ?? 0), averagePrice: values["averagePrice"] as? Double ?? 0)
        }
        return rows.sorted { ($0.sector == nil ? 1 : 0, $0.sector ?? "") < ($1.sector == nil ? 1 : 0, $1.sector ?? "") }
    }
}
