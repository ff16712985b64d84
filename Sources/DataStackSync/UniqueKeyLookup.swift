import DataStack
import Foundation

/// Finds the stored object that holds a unique key: a fetch of the replica's
/// store, as it is before the apply in progress.
struct UniqueKeyLookup {
    let context: ManagedObjectContext

    init(coordinator: PersistentStoreCoordinator) {
        context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.name = "sync unique keys"
    }

    /// The first stored object of `entity` (or a superentity's constraint)
    /// whose unique attributes equal those `values` set, for each uniqueness
    /// constraint `values` sets whole.
    func object(entity name: String, values: [String: SyncValue]) throws -> ObjectID? {
        guard let entity = context.persistentStoreCoordinator?.managedObjectModel.entitiesByName[name] else { return nil }
        var level: EntityDescription? = entity
        while let current = level {
            for constraint in current.uniquenessConstraints {
                var format: [String] = []
                var arguments: [Any] = []
                for name in constraint {
                    guard let attribute = current.attributesByName[name], let value = values[name], value != .null,
                          let swift = try value.swiftValue(for: attribute, entity: current.name) else { break }
                    format.append("\(name) == %@")
                    arguments.append(swift)
                }
                guard format.count == constraint.count else { continue }
                var request = FetchRequest<ManagedObject>(entityName: current.name,
                                                          predicate: try FetchPredicate(format: format.joined(separator: " AND "), argumentArray: arguments))
                request.fetchLimit = 1
                let found = try context.performAndWait { try context.fetch(request).first?.objectID }
                if let found { return found }
            }
            level = current.superentity
        }
        return nil
    }
}
