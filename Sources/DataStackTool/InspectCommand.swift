import Foundation
import DataStack

/// `datastack inspect FILE [--json] [--model PATH]`: the store's metadata,
/// its model, each entity's object count and a summary of its persistent history.
struct InspectCommand: ToolCommand {
    let file: URL
    let json: Bool
    let modelPath: String?

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json"], options: ["--model"])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
        modelPath = parsed.values["--model"]
    }

    func run() throws {
        let opened = try OpenedStore(file, modelPath: modelPath, tracksHistory: true)
        let metadata = StoreSummary(opened.coordinator.metadata(for: opened.store))
        let entities = try EntityCount.counts(in: opened)
        let history = try HistorySummary(opened)
        if json {
            Output.standard.write(try JSONText.pretty([
                "file": file.path,
                "metadata": metadata.json,
                "model": [
                    "source": opened.source.kind,
                    "path": opened.source.path.map { $0 as Any } ?? NSNull(),
                    "entities": entities.map(\.json),
                ] as [String: Any],
                "history": history?.json ?? NSNull(),
            ] as [String: Any]))
        } else {
            writeText(metadata: metadata, source: opened.source, entities: entities, history: history)
        }
    }

    private func writeText(metadata: StoreSummary, source: ModelSource, entities: [EntityCount], history: HistorySummary?) {
        let out = Output.standard
        let header: [[String]] = [
            ["store", file.path], ["type", metadata.storeType], ["uuid", metadata.uuid],
            ["framework", metadata.frameworkVersion.map(String.init) ?? "-"],
            ["identifiers", ValueFormat.text(metadata: metadata.versionIdentifiers)],
            ["model", source.description],
            ["history", history?.text ?? "none"],
        ]
        TextTable.lines(header).forEach(out.write)
        out.write("")
        let rows = [["entity", "parent", "attributes", "relationships", "objects"]] + entities.map {
            [$0.name, $0.parent ?? "-", String($0.attributes), String($0.relationships), String($0.objects)]
        }
        TextTable.lines(rows).forEach(out.write)
        if !metadata.versionHashes.isEmpty {
            out.write("")
            out.write("model version hashes")
            TextTable.lines(metadata.versionHashes.keys.sorted().map { [$0, metadata.versionHashes[$0]?.base64EncodedString() ?? ""] },
                            indent: "  ").forEach(out.write)
        }
        if !metadata.custom.isEmpty {
            out.write("")
            out.write("custom metadata")
            TextTable.lines(metadata.custom.keys.sorted().map { [$0, ValueFormat.text(metadata: metadata.custom[$0] ?? "")] },
                            indent: "  ").forEach(out.write)
        }
    }
}

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
