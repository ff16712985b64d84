import DataStack
import Foundation

/// A listed company and its latest quote.
final class Company: ManagedObject {
    @Managed var symbol: String
    /// Indexed for search (Xcode: "Index in Spotlight"); the feed renames a company now and then.
    @Managed var name: String
    @Managed var price: Double
    @Managed var previousClose: Double
    @Managed var lastUpdate: Date?
    @Managed var updateCount: Int64
    /// New in the model's second version (`TickerModel 2`): a store made by the
    /// first is migrated when the stack is set up, and the app fills it in.
    @Managed var sector: String?
    @Managed var updates: Set<StockUpdate>
}

/// One price update from the feed.
final class StockUpdate: ManagedObject {
    @Managed var price: Double
    @Managed var volume: Int64
    @Managed var time: Date
    @Managed var company: Company?
}

enum TickerModel {
    /// The model, declared in code with the classes above: the current
    /// version, `TickerModel 2` of `Resources/TickerModel.xcdatamodeld`.
    static func make() -> ManagedObjectModel {
        let name = AttributeDescription(name: "name", type: .string, isOptional: false, defaultValue: .string(""))
        // Indexed for `--search` (SearchPanel): the store keeps an FTS5 index of
        // the names, and builds it when it opens a store made before. Outside the
        // version hash, as in Core Data, so no migration.
        name.isIndexedBySpotlight = true
        let company = EntityDescription(name: "Company", managedObjectClass: Company.self, properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            name,
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "previousClose", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "lastUpdate", type: .date),
            AttributeDescription(name: "updateCount", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "sector", type: .string),
            RelationshipDescription(name: "updates", destination: "StockUpdate", inverse: "company",
                                    isToMany: true, deleteRule: .cascade),
        ])
        company.uniquenessConstraints = [["symbol"]]
        company.indexes = [FetchIndexDescription(name: "bySector", propertyNames: ["sector"])]
        let update = EntityDescription(name: "StockUpdate", managedObjectClass: StockUpdate.self, properties: [
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "time", type: .date, isOptional: false, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            RelationshipDescription(name: "company", destination: "Company", inverse: "updates", deleteRule: .nullify),
        ])
        return ManagedObjectModel(entities: [company, update])
    }
}
