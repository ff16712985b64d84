import Foundation

// MARK: - Version hashes and store compatibility

extension ManagedObjectModel {
    /// Whether a store with this metadata was written with this model's
    /// configuration (Core Data: `isConfiguration(withName:compatibleWithStoreMetadata:)`).
    ///
    /// ```swift
    /// let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(at: storeURL)
    /// let needsMigration = !model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata)
    /// ```
    ///
    /// Compares the store's `NSStoreModelVersionHashes` with
    /// ``entityVersionHashesByName`` for the configuration's entities: the same
    /// entity names, each with the same hash.
    ///
    /// These hashes are this implementation's own. Apple's Core Data computes
    /// different ones for the same model, so a store that Core Data wrote is never
    /// compatible by this test; ``SQLiteStore`` therefore decides whether it can
    /// open a store from its tables and columns, not from the hashes.
    ///
    /// - Parameter name: a configuration name, or nil for the whole model.
    /// - Complexity: O(*e*), *e* = the configuration's entities.
    public func isConfiguration(withName name: String?, compatibleWithStoreMetadata metadata: StoreMetadata) -> Bool {
        guard let stored = Self.versionHashes(in: metadata) else { return false }
        let entities = entities(forConfigurationName: name)
        guard stored.count == entities.count else { return false }
        return entities.allSatisfy { stored[$0.name] == $0.versionHash }
    }

    /// The `NSStoreModelVersionHashes` of a store's metadata, whichever way the
    /// dictionary was typed when it was read.
    static func versionHashes(in metadata: StoreMetadata) -> [String: Data]? {
        switch metadata[StoreMetadataKey.modelVersionHashes] {
        case let hashes as [String: Data]:
            return hashes
        case let hashes as [String: any Sendable]:
            var result: [String: Data] = [:]
            for (name, value) in hashes {
                guard let data = value as? Data else { return nil }
                result[name] = data
            }
            return result
        default:
            return nil
        }
    }
}
