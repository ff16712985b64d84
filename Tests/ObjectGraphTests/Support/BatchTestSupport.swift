import Foundation
@testable import ObjectGraph

extension GraphStack {
    /// Every row of the store, as text (ID, version, values), sorted: equal
    /// before and after a request that must change nothing.
    func rows() throws -> [String] {
        guard let store = coordinator.persistentStores.first else { return [] }
        return try coordinator.managedObjectModel.entities.filter { $0.superentity == nil }.flatMap { entity -> [String] in
            let fetch = StoreFetch(entity: entity, predicate: nil, sortDescriptors: [], fetchLimit: 0, fetchOffset: 0,
                                   includesSubentities: true, resultType: .managedObject, propertiesToFetch: nil,
                                   returnsDistinctResults: false)
            guard case .nodes(let nodes) = try store.execute(.fetch(fetch), in: nil) else { return [] }
            return nodes.map { "\($0.objectID) v\($0.version) \(Array($0.values))" }
        }.sorted()
    }

    /// A row's version (`Z_OPT`) as the store has it.
    func version(of id: ObjectID) throws -> Int64 {
        try coordinator.persistentStores[0].newValues(forObjectWith: id, in: nil).version
    }

    /// Saves listings `symbol → price` and returns their IDs in order.
    func saveListings(_ listings: [(String, Double)]) throws -> [ObjectID] {
        let context = context()
        return try context.performAndWait {
            let objects = listings.map { symbol, price -> Listing in
                let listing = Listing(context: context)
                listing.symbol = symbol
                listing.price = price
                return listing
            }
            try context.save()
            return objects.map(\.objectID)
        }
    }

    /// The symbols and prices of the stored listings, by symbol.
    func prices() throws -> [String: Double] {
        let context = context()
        return try context.performAndWait {
            Dictionary(uniqueKeysWithValues: try context.fetch(FetchRequest<Listing>(entityName: "Listing")).map { ($0.symbol, $0.price) })
        }
    }

    func count(_ entity: String) throws -> Int {
        let context = context()
        return try context.performAndWait { try context.count(for: FetchRequest<ManagedObject>(entityName: entity)) }
    }
}
