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
    /// open a store from its tables, columns and declared column types, and
    /// compares the hashes only for stores written here, which record the model
    /// that wrote them (``differences(of:fromModelRecordedIn:)``).
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

// MARK: - What the store records of the model that wrote it

extension StoreMetadataKey {
    /// A readable summary of every entity and property of the model that last
    /// wrote the store's schema, by entity and property name (see
    /// ``StoreMetadata/recordModel(_:)``). Only stores written here carry it.
    static let modelProperties = "DataStackModelProperties"
    /// The key of an entity's own summary among its property summaries.
    static let entitySummary = "(entity)"
}

extension StoreMetadata {
    /// Records `model` as the model that wrote the store: its version hashes
    /// (`NSStoreModelVersionHashes`) and, under a key of this implementation,
    /// a summary of each entity and property that says what the hash covers.
    ///
    /// The summaries mark the hashes as this implementation's own, which are
    /// comparable with ``EntityDescription/versionHash`` (Apple's are not),
    /// and let an incompatibility name the property and how it differs.
    mutating func recordModel(_ model: ManagedObjectModel) {
        self[StoreMetadataKey.modelVersionHashes] = model.entityVersionHashesByName
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
    /// one line per difference; empty when they match, or when the store does
    /// not record its model (Apple's Core Data wrote it, or an earlier version
    /// of this implementation did), which leaves the decision to the store's
    /// tables and columns.
    ///
    /// An entity matches when its version hash equals the stored one. The hash
    /// covers what the columns cannot show: optionality, transience, a
    /// relationship's counts and inverse, version hash modifiers.
    static func differences(of entities: [EntityDescription], fromModelRecordedIn metadata: StoreMetadata) -> [String] {
        guard let recorded = metadata[StoreMetadataKey.modelProperties] as? [String: any Sendable],
              let hashes = versionHashes(in: metadata) else { return [] }
        var problems: [String] = []
        for entity in entities where hashes[entity.name] != entity.versionHash {
            let stored = recorded[entity.name] as? [String: any Sendable] ?? [:]
            func storedSummary(_ key: String) -> String? { stored[key] as? String }
            var found = false
            if let before = storedSummary(StoreMetadataKey.entitySummary), before != entity.storeSummary {
                problems.append("entity \(entity.name): the store was written with \(before), the model says \(entity.storeSummary)")
                found = true
            }
            for property in entity.properties {
                let now = property.storeSummary
                guard let before = storedSummary(property.name) else {
                    problems.append("entity \(entity.name), \(property.kindName) \(property.name): the store was written without it, the model has \(now)")
                    found = true
                    continue
                }
                if before != now {
                    problems.append("entity \(entity.name), \(property.kindName) \(property.name): the store was written with \(before), the model says \(now)")
                    found = true
                }
            }
            let names = Set(entity.properties.map(\.name))
            for key in stored.keys.sorted() where key != StoreMetadataKey.entitySummary && !names.contains(key) {
                problems.append("entity \(entity.name): the store was written with a property \(key) (\(storedSummary(key) ?? "?")) that the model lacks")
                found = true
            }
            if !found {
                problems.append("entity \(entity.name): its version hash differs from the one the store was written with")
            }
        }
        return problems
    }
}

extension EntityDescription {
    /// What of the entity itself its version hash covers, in words.
    var storeSummary: String {
        var parts = [isAbstract ? "an abstract entity" : "a concrete entity"]
        if let superentity { parts.append("subentity of \(superentity.name)") }
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
        default:
            break
        }
        if let versionHashModifier { text += ", version hash modifier \"\(versionHashModifier)\"" }
        return text
    }

    /// "attribute" or "relationship", for messages.
    var kindName: String { self is RelationshipDescription ? "relationship" : "attribute" }
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
