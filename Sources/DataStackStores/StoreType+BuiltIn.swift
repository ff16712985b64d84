@_spi(StoreImplementation) import DataStackStorage
import Foundation
import ObjectGraph

// The store types this layer builds in. The object graph knows stores only by
// the `PersistentStore` protocol; these are the two it is shipped with.
extension StoreType {
    /// Core Data's SQLite store, in Core Data's file format.
    public static let sqlite = StoreType(rawValue: "SQLite", isShared: true, destroyStore: SQLiteStoreFile.destroy(at:)) {
        try SQLiteStore(configuration: $0)
    }

    /// A store that keeps everything in memory; nothing survives the process.
    /// Destroying one removes nothing: its URL, if it has one, only names it.
    public static let inMemory = StoreType(rawValue: "InMemory", destroyStore: { _ in }) { InMemoryStore(configuration: $0) }
}

extension PersistentStoreCoordinator {
    /// Adds a SQLite store: ``PersistentStoreCoordinator/addPersistentStore(type:configuration:at:options:)``
    /// with ``StoreType/sqlite``, Core Data's default store type.
    ///
    /// ```swift
    /// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    /// try coordinator.addPersistentStore(at: storeURL)
    /// ```
    @discardableResult
    public func addPersistentStore(configuration: String? = nil, at url: URL?,
                                   options: StoreOptions = StoreOptions()) throws -> any PersistentStore {
        try addPersistentStore(type: .sqlite, configuration: configuration, at: url, options: options)
    }
}
