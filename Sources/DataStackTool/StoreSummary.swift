import Foundation
import DataStack

/// What `Z_METADATA` says of a store, as inspect shows it.
struct StoreSummary {
    let storeType: String
    let uuid: String
    let frameworkVersion: Int?
    let versionIdentifiers: [String]
    let versionHashes: [String: Data]
    /// Keys that are neither Core Data's (`NS…`, `_NS…`) nor this package's (`DataStack…`).
    let custom: [String: any Sendable]

    init(_ metadata: StoreMetadata) {
        storeType = metadata[StoreMetadataKey.storeType] as? String ?? "?"
        uuid = metadata[StoreMetadataKey.storeUUID] as? String ?? "?"
        frameworkVersion = (metadata["NSPersistenceFrameworkVersion"] as? Int)
            ?? (metadata["NSPersistenceFrameworkVersion"] as? NSNumber)?.intValue
        versionIdentifiers = metadata[StoreMetadataKey.modelVersionIdentifiers] as? [String] ?? []
        var hashes: [String: Data] = [:]
        for (name, value) in metadata[StoreMetadataKey.modelVersionHashes] as? [String: any Sendable] ?? [:] {
            if let data = value as? Data { hashes[name] = data }
        }
        versionHashes = hashes
        custom = metadata.filter { key, _ in !["NS", "_NS", "DataStack"].contains { key.hasPrefix($0) } }
    }

    var json: [String: Any] {
        [
            "storeType": storeType,
            "uuid": uuid,
            "frameworkVersion": frameworkVersion.map { $0 as Any } ?? NSNull(),
            "versionIdentifiers": versionIdentifiers,
            "versionHashes": versionHashes.mapValues { $0.base64EncodedString() },
            "custom": custom.mapValues { ValueFormat.json(metadata: $0) },
        ]
    }
}

/// One entity of the model and how many objects of its own (not of its subentities) the store holds.
struct EntityCount {
    let name: String
    let parent: String?
    /// Attributes and relationships, inherited ones included.
    let attributes: Int
    let relationships: Int
    let objects: Int

    static func counts(in opened: OpenedStore) throws -> [EntityCount] {
        let context = opened.makeContext()
        return try context.performAndWait {
            try opened.model.entities.map { entity in
                var request = FetchRequest<ManagedObject>(entityName: entity.name)
                request.includesSubentities = false
                return EntityCount(name: entity.name, parent: entity.superentity?.name,
                                   attributes: entity.attributesByName.count, relationships: entity.relationshipsByName.count,
                                   objects: try context.count(for: request))
            }
        }
    }

    var json: [String: Any] {
        ["name": name, "parent": parent.map { $0 as Any } ?? NSNull(), "attributes": attributes,
         "relationships": relationships, "objects": objects]
    }
}
