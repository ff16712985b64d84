@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - A store with the model it caches

extension PersistentStoreCoordinator {
    /// A coordinator for a Core Data store that carries its own model, with the
    /// store added: for the stores that come without a model file.
    ///
    /// ```swift
    /// let coordinator = try PersistentStoreCoordinator(openingStoreWithItsCachedModelAt: noteStoreURL)
    /// let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    /// ```
    ///
    /// The model is ``ManagedObjectModel/init(cachedInStoreAt:)``'s. The store
    /// opens read-only unless `readOnly` is false: such a store usually belongs
    /// to another app, and writing to it with a model that has none of that
    /// app's code is rarely what is meant.
    ///
    /// - Throws: what ``ManagedObjectModel/init(cachedInStoreAt:)`` and
    ///   ``addPersistentStore(type:configuration:at:options:)`` throw.
    public convenience init(openingStoreWithItsCachedModelAt url: URL, readOnly: Bool = true) throws {
        self.init(managedObjectModel: try ManagedObjectModel(cachedInStoreAt: url))
        var options = StoreOptions()
        options.isReadOnly = readOnly
        try addPersistentStore(type: .sqlite, at: url, options: options)
    }
}
