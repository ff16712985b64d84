import Foundation
@_spi(StoreImplementation) import ObjectGraph

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
    /// open such a store from its tables, columns and indexes, and lets the
    /// hashes decide only for stores written here (``differences(of:fromModelRecordedIn:)``).
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
    /// dictionary was typed when it was read; nil when it is missing or is not
    /// a dictionary of data.
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

// MARK: - What the store records of the model that wrote it

extension StoreMetadataKey {
    /// `NSStoreModelVersionHashesDigest`: base64 of SHA-512 over the entity
    /// names and hashes (see ``ManagedObjectModel/versionChecksum`` for its sibling).
    public static let modelVersionHashesDigest = "NSStoreModelVersionHashesDigest"
    /// `NSStoreModelVersionChecksumKey`: the model's ``ManagedObjectModel/versionChecksum``
    /// (Core Data: `NSPersistentStoreModelVersionChecksumKey`).
    public static let modelVersionChecksum = "NSStoreModelVersionChecksumKey"
    /// `NSStoreModelVersionHashesVersion`: 3 in every store Core Data writes, and here.
    public static let modelVersionHashesVersion = "NSStoreModelVersionHashesVersion"

    /// A readable summary of every entity and property of the model that last
    /// wrote the store's schema, by entity and property name (see
    /// ``StoreMetadata/recordModel(_:)``). Only stores written here carry it.
    static let modelProperties = "DataStackModelProperties"
    /// The version of the hash encoding of the store's `NSStoreModelVersionHashes`
    /// (``VersionHash/format``). Stores written before it was recorded have
    /// hashes of an earlier encoding.
    static let versionHashFormat = "DataStackVersionHashFormat"
    /// The key of an entity's own summary among its property summaries.
    static let entitySummary = "(entity)"

    /// The keys ``StoreMetadata/recordModel(_:)`` writes: only a migration
    /// changes them, so a caller's metadata never replaces or drops them.
    package static let modelRecord = [modelVersionHashes, modelVersionHashesDigest, modelVersionChecksum,
                              modelVersionHashesVersion, modelProperties, versionHashFormat]
}

extension StoreMetadata {
    /// Records `model` as the model that wrote the store: its version hashes
    /// (`NSStoreModelVersionHashes`), with the digest, checksum and hash
    /// version Core Data writes beside them, and, under keys of this
    /// implementation, the hash encoding and a summary of each entity and
    /// property that says what the hash covers.
    ///
    /// The summaries mark the hashes as this implementation's own, which are
    /// comparable with ``EntityDescription/versionHash`` (Apple's are not),
    /// and let an incompatibility name the property and how it differs.
    mutating func recordModel(_ model: ManagedObjectModel) {
        let hashes = model.entityVersionHashesByName
        self[StoreMetadataKey.modelVersionHashes] = hashes
        self[StoreMetadataKey.modelVersionHashesDigest] = VersionHash.digest(of: hashes)
        self[StoreMetadataKey.modelVersionChecksum] = VersionHash.checksum(of: hashes)
        self[StoreMetadataKey.modelVersionHashesVersion] = 3
        self[StoreMetadataKey.versionHashFormat] = VersionHash.format
        var summaries: [String: any Sendable] = [:]
        for entity in model.entities {
            var entry: [String: any Sendable] = [StoreMetadataKey.entitySummary: entity.storeSummary]
            for property in entity.properties { entry[property.name] = property.storeSummary }
            summaries[entity.name] = entry
        }
        self[StoreMetadataKey.modelProperties] = summaries
    }
}

extension ManagedObjectModel {
    /// How `entities` differ from the model recorded in a store written here,
    /// one line per difference naming the entity, the property and how; empty
    /// when they match.
    ///
    /// The version hashes decide: an entity whose hash equals the stored one
    /// matches, and for one whose hash differs the recorded summaries say
    /// what changed. Empty too when the store's hashes cannot be compared with
    /// this implementation's, which leaves the decision to the store's tables,
    /// columns and indexes:
    /// - the store does not record its model: Apple's Core Data wrote it;
    /// - its hashes are of an earlier encoding (no ``StoreMetadataKey/versionHashFormat``
    ///   or another value): a version of this implementation before the
    ///   current hash wrote it.
    ///
    /// A store written here whose `NSStoreModelVersionHashes` is damaged (not
    /// a dictionary of 32-byte data) is compared by its recorded summaries
    /// alone, which describe what the hashes cover: the hashes only make the
    /// comparison cheap, so losing them must not lose the store.
    package static func differences(of entities: [EntityDescription], fromModelRecordedIn metadata: StoreMetadata) -> [String] {
        guard let recorded = metadata[StoreMetadataKey.modelProperties] as? [String: any Sendable],
              Self.integer(metadata[StoreMetadataKey.versionHashFormat]) == VersionHash.format else { return [] }
        let hashes = versionHashes(in: metadata).flatMap { hashes in
            hashes.values.allSatisfy { $0.count == VersionHash.byteCount } ? hashes : nil
        }
        var problems: [String] = []
        for entity in entities {
            if let hashes, hashes[entity.name] == entity.versionHash { continue }
            let found = summaryDifferences(of: entity, recorded: recorded[entity.name] as? [String: any Sendable])
            if found.isEmpty, hashes != nil {
                if let parent = entity.superentity, hashes?[parent.name] != parent.versionHash {
                    problems.append("entity \(entity.name): its superentity \(parent.name) changed")
                } else {
                    problems.append("entity \(entity.name): its version hash differs from the one the store was written with")
                }
            }
            problems += found
        }
        return problems
    }

    /// The differences between an entity and its summaries recorded in a store.
    private static func summaryDifferences(of entity: EntityDescription, recorded: [String: any Sendable]?) -> [String] {
        guard let recorded else {
            return ["entity \(entity.name): the store was written without it"]
        }
        func storedSummary(_ key: String) -> String? { recorded[key] as? String }
        var problems: [String] = []
        if let before = storedSummary(StoreMetadataKey.entitySummary), before != entity.storeSummary {
            problems.append("entity \(entity.name): the store was written with \(before), the model says \(entity.storeSummary)")
        }
        for property in entity.properties {
            let now = property.storeSummary
            guard let before = storedSummary(property.name) else {
                problems.append("entity \(entity.name), \(property.kindName) \(property.name): the store was written without it, the model has \(now)")
                continue
            }
            if before != now {
                problems.append("entity \(entity.name), \(property.kindName) \(property.name): the store was written with \(before), the model says \(now)")
            }
        }
        let names = Set(entity.properties.map(\.name))
        for key in recorded.keys.sorted() where key != StoreMetadataKey.entitySummary && !names.contains(key) {
            problems.append("entity \(entity.name): the store was written with a property \(key) (\(storedSummary(key) ?? "?")) that the model lacks")
        }
        return problems
    }

    /// A property's summary in the model recorded in a store written here.
    private static func recordedSummary(of property: String, entity: String, in metadata: StoreMetadata) -> String? {
        guard let recorded = metadata[StoreMetadataKey.modelProperties] as? [String: any Sendable] else { return nil }
        return (recorded[entity] as? [String: any Sendable])?[property] as? String
    }

    /// Whether a store written here recorded the property as required: every
    /// row then has a value (saves validate it), and a migration need not count
    /// NULLs to find out.
    static func wasRecordedRequired(_ property: String, entity: String, in metadata: StoreMetadata) -> Bool {
        guard let summary = recordedSummary(of: property, entity: entity, in: metadata) else { return false }
        return summary.hasPrefix("required ") && !summary.hasPrefix("required transient")
    }

    /// The type an attribute had in the model recorded in a store written
    /// here, read back from its summary; nil when the store does not record it.
    static func recordedType(of attribute: String, entity: String, in metadata: StoreMetadata) -> AttributeType? {
        guard let summary = recordedSummary(of: attribute, entity: entity, in: metadata) else { return nil }
        // "optional Integer 16", "required transient String, version hash modifier …"
        var words = summary.split(separator: ",", maxSplits: 1).first.map(String.init) ?? summary
        for prefix in ["optional ", "required ", "transient "] where words.hasPrefix(prefix) { words.removeFirst(prefix.count) }
        return AttributeType.allCases.first { $0.modelEditorName == words }
    }

    /// A metadata number, whichever integer type the property list gave it.
    private static func integer(_ value: (any Sendable)?) -> Int? {
        switch value {
        case let number as Int: number
        case let number as Int64: Int(exactly: number)
        case let number as NSNumber: number.intValue
        default: nil
        }
    }
}

extension EntityDescription {
    /// What of the entity itself its version hash covers, in words.
    var storeSummary: String {
        var parts = [isAbstract ? "an abstract entity" : "a concrete entity"]
        if let superentity { parts.append("subentity of \(superentity.name)") }
        if !uniquenessConstraints.isEmpty {
            parts.append("unique " + uniquenessConstraints.map { "(" + $0.joined(separator: ", ") + ")" }.sorted().joined(separator: ", "))
        }
        if let versionHashModifier { parts.append("version hash modifier \"\(versionHashModifier)\"") }
        return parts.joined(separator: ", ")
    }
}

extension PropertyDescription {
    /// What the version hash covers of the property, in words: "optional String",
    /// "required to-one Company (inverse updates)".
    var storeSummary: String {
        var text = isOptional ? "optional" : "required"
        if isTransient { text += " transient" }
        switch self {
        case let attribute as AttributeDescription:
            text += " " + attribute.type.modelEditorName
        case let relationship as RelationshipDescription:
            text += relationship.isToMany ? (relationship.isOrdered ? " ordered to-many " : " to-many ") : " to-one "
            text += relationship.destinationEntityName
            text += relationship.inverseName.map { " (inverse \($0))" } ?? " (no inverse)"
            if relationship.minCount != 0 || relationship.maxCount != 0 {
                text += ", count \(relationship.minCount)…\(relationship.maxCount == 0 ? "any" : String(relationship.maxCount))"
            }
            text += ", delete rule \(relationship.deleteRule)"
        default:
            break
        }
        if let versionHashModifier { text += ", version hash modifier \"\(versionHashModifier)\"" }
        return text
    }

    /// "attribute" or "relationship", for messages.
    package var kindName: String { self is RelationshipDescription ? "relationship" : "attribute" }
}

extension AttributeType {
    /// The type's name in Xcode's model editor ("Integer 32", "Binary Data"), for messages.
    var modelEditorName: String {
        switch self {
        case .integer16: "Integer 16"
        case .integer32: "Integer 32"
        case .integer64: "Integer 64"
        case .double: "Double"
        case .float: "Float"
        case .decimal: "Decimal"
        case .boolean: "Boolean"
        case .string: "String"
        case .date: "Date"
        case .binaryData: "Binary Data"
        case .uuid: "UUID"
        case .uri: "URI"
        case .transformable: "Transformable"
        }
    }
}
