import Foundation

// MARK: - Attributes and relationships

extension XcodeModelBuilder {
    /// XML attributes of `<attribute>` that only steer Xcode's code generation or
    /// features with no effect on the stored values; they are accepted without a warning.
    private static let ignoredAttributeKeys: Set<String> = [
        "syncable", "usesScalarValueType", "customClassName", "storedInTruthFile", "allowsCloudEncryption",
    ]

    /// Reads an `<attribute>`.
    ///
    /// The type must be one Core Data stores in a column; a default, minimum or
    /// maximum that does not read as that type throws instead of being dropped.
    mutating func readAttribute(_ node: XcodeModelXMLNode, entity: String) throws -> AttributeDescription {
        let name = try required("name", of: node, in: "an <attribute> of entity \(entity)")
        let context = "\(entity).\(name)"
        checkAttributes(of: node, known: [
            "name", "attributeType", "optional", "transient", "indexed", "defaultValueString", "defaultDateTimeInterval",
            "minValueString", "maxValueString", "minDateTimeInterval", "maxDateTimeInterval", "regularExpressionString",
            "valueTransformerName", "renamingIdentifier", "elementID", "versionHashModifier",
            "allowsExternalBinaryDataStorage", "derived", "derivationExpression", "preserveAfterDeletion",
            "spotlightIndexingEnabled", "indexedBySpotlight",
        ], ignored: Self.ignoredAttributeKeys, in: context)

        let typeName = try required("attributeType", of: node, in: "attribute \(context)")
        guard let type = XcodeModelValues.attributeTypes[typeName] else {
            let reason = XcodeModelValues.unsupportedTypeReason(typeName)
                ?? "it is not one of " + XcodeModelValues.attributeTypes.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw error(.unknownAttributeType, at: node, "\(context) has attribute type \"\(typeName)\", which cannot be loaded: \(reason)")
        }

        let attribute = AttributeDescription(name: name, type: type, isOptional: node.flag("optional"))
        attribute.isTransient = node.flag("transient")
        attribute.isIndexed = node.flag("indexed")
        attribute.renamingIdentifier = node["renamingIdentifier"] ?? node["elementID"]
        attribute.versionHashModifier = node["versionHashModifier"]
        attribute.valueTransformerName = node["valueTransformerName"]
        attribute.preservesValueInHistoryOnDeletion = node.flag("preserveAfterDeletion")
        attribute.isIndexedBySpotlight = node.flag("spotlightIndexingEnabled") || node.flag("indexedBySpotlight")

        if let string = node["defaultDateTimeInterval"] ?? node["defaultValueString"] {
            attribute.defaultValue = try value(string, of: type, at: node, in: "\(context) default value")
        }
        try readLimits(of: node, into: attribute, in: context)
        if let pattern = node["regularExpressionString"], !pattern.isEmpty,
           !XcodeModelValues.applyRegularExpression(pattern, to: attribute) {
            throw self.error(.invalidValue, at: node, "\(context) has a regular expression that does not compile: \(pattern)")
        }

        attribute.allowsExternalBinaryDataStorage = node.flag("allowsExternalBinaryDataStorage")
        if attribute.allowsExternalBinaryDataStorage && !attribute.storesExternalBinaryData {
            warn(at: node, "\(context) allows external binary storage, which only binary and transformable attributes have; the flag has no effect")
        }
        if node.flag("derived") {
            warn(at: node, "\(context) is derived (\(node["derivationExpression"] ?? "?")); it loads as a plain attribute and is not recomputed")
        }
        for child in node.children {
            if child.name == "userInfo" {
                attribute.userInfo.merge(readUserInfo(child, in: context)) { _, new in new }
            } else {
                warn(at: child, "\(context): the element <\(child.name)> is not understood and was ignored")
            }
        }
        return attribute
    }

    /// A typed value from an XML attribute, or a thrown error naming what it should have been.
    private func value(_ string: String, of type: AttributeType, at node: XcodeModelXMLNode, in context: String) throws -> PropertyValue {
        guard let value = XcodeModelValues.value(from: string, for: type) else {
            throw error(.invalidValue, at: node, "\(context) \"\(string)\" is not \(type.valueDescription)")
        }
        return value
    }

    /// Reads minimum and maximum: values for numbers and dates, lengths for strings and data.
    private mutating func readLimits(of node: XcodeModelXMLNode, into attribute: AttributeDescription, in context: String) throws {
        let minimum = attribute.type == .date ? node["minDateTimeInterval"] ?? node["minValueString"] : node["minValueString"]
        let maximum = attribute.type == .date ? node["maxDateTimeInterval"] ?? node["maxValueString"] : node["maxValueString"]
        guard minimum != nil || maximum != nil else { return }
        do {
            if try !XcodeModelValues.applyLimits(minimum: minimum, maximum: maximum, to: attribute) {
                warn(at: node, "\(context): a minimum or maximum has no meaning for \(attribute.type.rawValue) attributes and was ignored")
            }
        } catch {
            throw self.error(.invalidValue, at: node, "\(context) \(error)")
        }
    }

    /// Reads a `<relationship>`. Its destination and inverse are resolved later by
    /// ``resolveRelationships(in:)``, once every entity is known.
    mutating func readRelationship(_ node: XcodeModelXMLNode, entity: String) throws -> RelationshipDescription {
        let name = try required("name", of: node, in: "a <relationship> of entity \(entity)")
        let context = "\(entity).\(name)"
        checkAttributes(of: node, known: [
            "name", "destinationEntity", "inverseName", "inverseEntity", "toMany", "ordered", "deletionRule", "optional",
            "minCount", "maxCount", "transient", "renamingIdentifier", "elementID", "versionHashModifier",
            "spotlightIndexingEnabled", "indexedBySpotlight",
        ], ignored: ["syncable", "storedInTruthFile", "allowsCloudEncryption"],
                        in: context)
        let destination = try required("destinationEntity", of: node, in: "relationship \(context)")

        let deleteRule: DeleteRule
        if let ruleName = node["deletionRule"] {
            guard let rule = XcodeModelValues.deleteRules[ruleName] else {
                throw error(.invalidValue, at: node, "\(context) has delete rule \"\(ruleName)\"; expected Nullify, Cascade, Deny or No Action")
            }
            deleteRule = rule
        } else {
            deleteRule = .nullify   // Xcode's default, and what it writes for a new relationship
        }
        func count(_ key: String) throws -> Int? {
            guard let string = node[key] else { return nil }
            guard let count = XcodeModelValues.count(from: string) else {
                throw error(.invalidValue, at: node, "\(context) \(key) \"\(string)\" is not a whole number")
            }
            return count
        }
        let minCount = try count("minCount")
        let maxCount = try count("maxCount")

        let isToMany = node.flag("toMany")
        if !isToMany, let maxCount, maxCount > 1 {
            warn(at: node, "\(context) is to-one but has maxCount \(maxCount); it is loaded as to-one")
        }
        if !isToMany && node.flag("ordered") {
            warn(at: node, "\(context) is to-one and marked ordered; the order flag was ignored")
        }
        let relationship = RelationshipDescription(
            name: name, destination: destination, inverse: node["inverseName"].flatMap { $0.isEmpty ? nil : $0 },
            isToMany: isToMany, isOrdered: isToMany && node.flag("ordered"), deleteRule: deleteRule,
            isOptional: node.flag("optional"))
        if isToMany {
            // Xcode writes 0 (or nothing) for "no limit"; so does RelationshipDescription.
            relationship.minCount = minCount ?? 0
            relationship.maxCount = maxCount ?? 0
        }
        relationship.isTransient = node.flag("transient")
        relationship.isIndexedBySpotlight = node.flag("spotlightIndexingEnabled") || node.flag("indexedBySpotlight")
        relationship.renamingIdentifier = node["renamingIdentifier"] ?? node["elementID"]
        relationship.versionHashModifier = node["versionHashModifier"]
        for child in node.children {
            if child.name == "userInfo" {
                relationship.userInfo.merge(readUserInfo(child, in: context)) { _, new in new }
            } else {
                warn(at: child, "\(context): the element <\(child.name)> is not understood and was ignored")
            }
        }
        relationshipNodes.append((relationship, node))
        return relationship
    }

    // MARK: - Resolving names

    /// Checks every relationship's destination and inverse against the model.
    ///
    /// A missing destination or inverse throws. An inverse that does not point back
    /// (A.r names B.s as inverse, but B.s names another one) is only warned about:
    /// Core Data accepts such models and so do we.
    mutating func resolveRelationships(in model: ManagedObjectModel) throws {
        let entities = model.entitiesByName
        for (relationship, node) in relationshipNodes {
            let owner = relationship.entity?.name ?? "?"
            let context = "\(owner).\(relationship.name)"
            guard let destination = entities[relationship.destinationEntityName] else {
                throw error(.danglingReference, at: node,
                            "\(context) points to entity \(relationship.destinationEntityName), which the model does not declare")
            }
            if let inverseEntity = node["inverseEntity"], inverseEntity != relationship.destinationEntityName {
                warn(at: node, "\(context): inverseEntity \(inverseEntity) differs from destinationEntity \(relationship.destinationEntityName); the destination is used")
            }
            guard let inverseName = relationship.inverseName else { continue }
            guard let inverse = destination.relationshipsByName[inverseName] else {
                throw error(.danglingReference, at: node,
                            "\(context) names \(inverseName) as its inverse, but \(destination.name) has no relationship of that name")
            }
            if inverse.inverseName != relationship.name {
                warn(at: node, "\(context) names \(destination.name).\(inverseName) as its inverse, whose own inverse is \(inverse.inverseName ?? "none")")
            }
        }
    }

    /// Checks that uniqueness constraints and fetch indexes name properties of their
    /// entity (inherited ones included).
    mutating func checkPropertyReferences(in model: ManagedObjectModel) throws {
        for (entity, node) in declared {
            let properties = entity.propertiesByName
            for constraint in entity.uniquenessConstraints {
                for key in constraint where properties[key] == nil {
                    throw error(.danglingReference, at: node,
                                "entity \(entity.name) has a uniqueness constraint on \(key), which it does not have")
                }
            }
            for index in entity.indexes {
                for key in index.propertyNames where properties[key] == nil {
                    throw error(.danglingReference, at: node,
                                "entity \(entity.name) has fetch index \(index.name) on \(key), which it does not have")
                }
            }
        }
    }
}
