@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Metadata without a stack

extension PersistentStoreCoordinator {
    /// Reads a store's metadata from its file, without adding it to a coordinator
    /// (Core Data: `metadataForPersistentStore(ofType:at:options:)`).
    ///
    /// ```swift
    /// let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(at: storeURL)
    /// if !model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata) { … }
    /// ```
    ///
    /// The result always holds `NSStoreType` and `NSStoreUUID`. A SQLite store is
    /// read with a read-only connection (its `-wal` included). Any other
    /// registered type is opened with an empty model, asked for its metadata
    /// and closed again.
    ///
    /// - Throws: ``PersistentStoreError`` naming the path: `.cannotOpen` when no
    ///   file exists, `.notAStore` when it is not a SQLite database or not a
    ///   Core Data store, `.missingLocation` for an in-memory store.
    /// - Complexity: One query; the file's size does not matter.
    public static func metadataForPersistentStore(type: StoreType = .sqlite, at url: URL) throws -> StoreMetadata {
        if type == .sqlite {
            return try SQLiteStoreFile.metadata(at: url)
        }
        let store = try openDetachedStore(type: type, at: url)
        defer { store.willRemove() }
        var metadata = store.metadata
        metadata[StoreMetadataKey.storeType] = metadata[StoreMetadataKey.storeType] ?? type.rawValue
        metadata[StoreMetadataKey.storeUUID] = metadata[StoreMetadataKey.storeUUID] ?? store.identifier
        return metadata
    }

    /// Writes a store's metadata to its file, without adding it to a coordinator
    /// (Core Data: `setMetadata(_:forPersistentStoreOfType:at:options:)`).
    ///
    /// The whole metadata is replaced in one transaction, except that
    /// `NSStoreType`, `NSStoreUUID` and `NSStoreModelVersionHashes` keep the
    /// file's values, and the framework's own keys (`NS…`, `_NS…`) are kept
    /// when `metadata` leaves them out. A coordinator that has the store open
    /// does not see the change, and overwrites it if it saves metadata of its own.
    ///
    /// Other registered types are opened with an empty model; their
    /// ``PersistentStore/setMetadata(_:)`` is called and an empty save request
    /// asks them to write it.
    ///
    /// - Throws: ``PersistentStoreError`` naming the path, as
    ///   ``metadataForPersistentStore(type:at:)`` does, or `.readOnly`.
    public static func setMetadata(_ metadata: StoreMetadata, forPersistentStoreOfType type: StoreType = .sqlite, at url: URL) throws {
        if type == .sqlite {
            try SQLiteStoreFile.writeMetadata(metadata, at: url)
            return
        }
        let store = try openDetachedStore(type: type, at: url)
        defer { store.willRemove() }
        try store.setMetadata(metadata)
        _ = try store.execute(.save(SaveChangesRequest()), in: nil)
    }

    /// A store of a registered type opened outside any coordinator, for its metadata.
    private static func openDetachedStore(type: StoreType, at url: URL) throws -> any PersistentStore {
        guard type != .inMemory else {
            throw PersistentStoreError(.missingLocation, url: url, message: "an in-memory store has no file to read metadata from")
        }
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw PersistentStoreError(.cannotOpen, url: url, message: "no store file exists at this location")
        }
        let configuration = StoreConfiguration(model: ManagedObjectModel(entities: []), configurationName: nil,
                                               url: url, options: StoreOptions())
        let store = try type.makeStore(configuration)
        try store.loadMetadata()
        return store
    }
}
