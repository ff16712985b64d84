import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Metadata: what a store records of its model, and how it reads it back
@_spi(StoreImplementation)
extension StoreLayout {
    /// The metadata of a new store of `model`: its type and UUID, the model's
    /// version identifiers, hashes and the summaries that let a later model
    /// name what differs (as the SQLite store records them).
    public static func newMetadata(for model: ManagedObjectModel, storeType: String, uuid: String) -> StoreMetadata {
        var metadata: StoreMetadata = [
            StoreMetadataKey.storeType: storeType,
            StoreMetadataKey.storeUUID: uuid,
            StoreMetadataKey.modelVersionIdentifiers: Array(model.versionIdentifiers.sorted()),
        ]
        metadata.recordModel(model)
        // Core Data records a model without version identifiers as one empty identifier.
        if model.versionIdentifiers.isEmpty { metadata[StoreMetadataKey.modelVersionIdentifiers] = [""] }
        return metadata
    }

    /// Why a store whose history holds transactions, opened without
    /// ``StoreOptions/persistentHistoryTracking``, refuses saves (Core Data
    /// forces such a store read-only).
    public static let untrackedHistoryReason = """
        the store records persistent history but was opened without persistentHistoryTracking: \
        saves would leave gaps in its history, so it is read-only (as in Core Data); open it with \
        persistentHistoryTracking, or delete its history first
        """

    /// How `entities` differ from the model recorded in `metadata`, one line
    /// per entity or property and how; empty when they match.
    public static func differences(of entities: [EntityDescription], fromModelRecordedIn metadata: StoreMetadata) -> [String] {
        ManagedObjectModel.differences(of: entities, fromModelRecordedIn: metadata)
    }

    /// `metadata` as the binary property list Core Data keeps in `Z_METADATA.Z_PLIST`.
    public static func encode(_ metadata: StoreMetadata) throws -> Data {
        try StoreMetadataCoding.encode(metadata)
    }

    /// The metadata in a property list written by ``encode(_:)``.
    ///
    /// - Throws: ``PersistentStoreError/Code/notAStore`` when it is missing or damaged.
    public static func decodeMetadata(_ data: Data?) throws -> StoreMetadata {
        try StoreMetadataCoding.decode(data, of: nil)
    }
}
