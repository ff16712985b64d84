import DataStack
import Foundation

// The model is these two classes (`ManagedObjectModel(classes:)`): the current
// version, equal to `TickerModel 2` of `Resources/TickerModel.xcdatamodeld`
// (same version hashes), which `--model-file` loads instead.

/// A listed company and its latest quote.
final class Company: ManagedObject {
    /// One company per symbol: two importers that meet a new symbol at once
    /// still leave one row (the store settles it at save).
    @Managed(.unique) var symbol: String
    /// Indexed for `--search` (SearchPanel; Xcode: "Index in Spotlight"): the
    /// store keeps an FTS5 index of the names, and builds it when it opens a
    /// store made before. Outside the version hash, as in Core Data, so no
    /// migration. The feed renames a company now and then.
    @Managed(.spotlight) var name: String = ""
    @Managed var price: Double = 0
    @Managed var previousClose: Double = 0
    @Managed var lastUpdate: Date?
    @Managed var updateCount: Int64 = 0
    /// New in the model's second version (`TickerModel 2`): a store made by the
    /// first is migrated when the stack is set up, and the app fills it in.
    @Managed var sector: String?
    @Managed(inverse: \.company, deleteRule: .cascade) var updates: Set<StockUpdate>

    override class var entityDeclaration: EntityDeclaration {
        EntityDeclaration(indexes: [IndexDeclaration(name: "bySector", \Company.sector)])
    }
}

/// One price update from the feed.
final class StockUpdate: ManagedObject {
    @Managed var price: Double = 0
    @Managed var volume: Int64 = 0
    @Managed var time: Date = Date(timeIntervalSinceReferenceDate: 0)
    /// Its inverse, `Company.updates`, is declared there.
    @Managed var company: Company?
}

enum TickerModel {
    /// The classes the model is derived from.
    static let classes: [ManagedObject.Type] = [Company.self, StockUpdate.self]
}
