import Foundation

// MARK: - Properties

extension LegacyModelDecoder {
    /// Keys of an `XDPMAttribute` or `XDPMRelationship` besides the stereotypes:
    /// the UML property's own fields, which Xcode 3's data model editor leaves at
    /// their defaults and never reads (`_type`, `_default`, `_isDerived`, …).
    private static let propertyKeys: Set<String> = [
        "_name", "XDBucketForStereotypesstorage", "_type", "_default", "_association", "_isComposite", "_isDerived",
        "_isLeaf", "_isOrdered", "_isReadOnly", "_isStatic", "_isUnique",
    ]

    /// Settings of `XD_PPropStereotype`, which every property has. Sync
    /// Services' truth-file flag is read and ignored.
    private static let commonSettings: Set<String> = [
        "XD_PPSK_isOptional", "XD_PPSK_isTransient", "XD_PPSK_isIndexed", "XD_PPSK_elementID",
        "XD_PPSK_versionHashModifier", "XD_PPSK_userInfo", "XD_PPSK_isStoredInTruthFile", "XD_PPSK_isSpotlightIndexed",
    ]

    /// Reads the entity's own properties, in archive order.
    mutating func readProperties(of object: ArchivedObject) throws {
        guard let entity = entitiesByObject[object.identity] else { return }
        let entries = try reading("entity \(entity.name) properties") { try object.entries("XDBucketForOwnedAttributesstorage") ?? [] }
        var properties: [PropertyDescription] = []
        var names = Set<String>()
        for (key, value) in entries {
            guard let property = try property(value, listedAs: key, in: entity) else { continue }
            guard names.insert(property.name).inserted else {
                throw error(.inconsistentModel, "entity \(entity.name) declares two properties named \(property.name)")
            }
            properties.append(property)
        }
        entity.properties = properties
    }

    /// The description of one archived property, or nil for a kind the model
    /// cannot hold (a fetched property), which is a warning.
    private mutating func property(_ object: ArchivedObject, listedAs key: ArchivedObject, in entity: EntityDescription) throws -> PropertyDescription? {
        let listed = try reading("entity \(entity.name) properties") { try key.textValue() }
        let isAttribute = object.isKind(of: "XDPMAttribute")
        guard isAttribute || object.isKind(of: "XDPMRelationship") else {
            let context = "\(entity.name).\(listed ?? "?")"
            if object.className?.contains("Fetched") == true {
                warn(object, "\(context) is a fetched property; fetched properties are not supported and it was left out")
                return nil
            }
            throw error(.malformedArchive, "\(context) is \(object.className ?? "a value"), not an attribute (XDPMAttribute) or a relationship (XDPMRelationship) (\(object.path))")
        }
        guard let name = try reading(object.path, { try object.string("_name") }), !name.isEmpty else {
            throw error(.missingValue, "entity \(entity.name): a property has no name (_name) (\(object.path))")
        }
        let context = "\(entity.name).\(name)"
        if let listed, listed != name {
            throw error(.inconsistentModel, "\(entity.name) lists a property under the name \(listed), but the property is named \(name)")
        }
        checkElementKeys(of: object, known: Self.propertyKeys, in: context)
        let kind = isAttribute ? "XD_PAtt_Stereotype" : "XD_PR_Stereotype"
        let stereotypes = try stereotypes(of: object, expected: ["XD_PPropStereotype", kind], in: context)
        guard let settings = stereotypes[kind] else {
            let what = isAttribute ? "attribute settings (XD_PAtt_Stereotype), so its type" : "relationship settings (XD_PR_Stereotype), so its destination"
            throw error(.missingValue, "\(context) has no \(what) is unknown")
        }
        let property: PropertyDescription = isAttribute
            ? try attribute(named: name, settings, in: context)
            : try relationship(named: name, settings, object: object, in: context)
        guard let common = stereotypes["XD_PPropStereotype"] else {
            warn(object, "\(context) has no property settings (XD_PPropStereotype); it loads as optional and persistent")
            return property
        }
        checkSettings(of: common, known: Self.commonSettings, in: context)
        try reading(context) {
            // Core Data's and Xcode's default for a new property is optional.
            property.isOptional = try common.bool("XD_PPSK_isOptional") ?? true
            property.isTransient = try common.bool("XD_PPSK_isTransient") ?? false
            property.isIndexedBySpotlight = try common.bool("XD_PPSK_isSpotlightIndexed") ?? false
            property.renamingIdentifier = try common.string("XD_PPSK_elementID").flatMap { $0.isEmpty || $0 == name ? nil : $0 }
            property.versionHashModifier = try common.string("XD_PPSK_versionHashModifier").flatMap { $0.isEmpty ? nil : $0 }
            // Relationships carry the flag too (their foreign key is always indexed); only attributes keep it.
            if let attribute = property as? AttributeDescription {
                attribute.isIndexed = try common.bool("XD_PPSK_isIndexed") ?? false
            }
        }
        property.userInfo = try userInfo(common, "XD_PPSK_userInfo", in: context)
        return property
    }

    // MARK: Attributes

    private static let attributeSettings: Set<String> = [
        "XD_PAttK_attributeType", "XD_PAttK_defaultValueAsString", "XD_PAttK_minValueString", "XD_PAttK_maxValueString",
        "XD_PAttK_regularExpressionString", "XD_PAttK_valueTransformerName", "XD_PAttK_allowsExternalBinaryDataStorage",
    ]

    /// Reads `XD_PAtt_Stereotype`. Its strings read as the XML file's do
    /// (``XcodeModelValues``); an empty string is an empty field: no value.
    private mutating func attribute(named name: String, _ settings: LegacyModelStereotype, in context: String) throws -> AttributeDescription {
        checkSettings(of: settings, known: Self.attributeSettings, in: context)
        let code = try reading(context) { try settings.integer("XD_PAttK_attributeType") }
        guard let code else {
            throw error(.unknownAttributeType, "\(context) has no attribute type (XD_PAttK_attributeType), so it cannot be loaded")
        }
        guard let type = AttributeType(coreDataCode: Int(code)) else {
            let typeName = AttributeType.unsupportedCodeNames[Int(code)] ?? "code \(code)"
            throw error(.unknownAttributeType, "\(context) has attribute type \(typeName), which cannot be loaded")
        }
        let attribute = AttributeDescription(name: name, type: type)
        func text(_ setting: String) throws -> String? {
            try reading(context) { try settings.string(setting) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        attribute.valueTransformerName = try text("XD_PAttK_valueTransformerName")
        if let string = try text("XD_PAttK_defaultValueAsString") {
            guard let value = XcodeModelValues.value(from: string, for: type) else {
                throw error(.invalidValue, "\(context) default value \"\(string)\" is not \(type.valueDescription)")
            }
            attribute.defaultValue = value
        }
        let minimum = try text("XD_PAttK_minValueString"), maximum = try text("XD_PAttK_maxValueString")
        do {
            if try !XcodeModelValues.applyLimits(minimum: minimum, maximum: maximum, to: attribute), minimum != nil || maximum != nil {
                warn(settings.object, "\(context): a minimum or maximum has no meaning for \(type.rawValue) attributes and was ignored")
            }
        } catch {
            throw self.error(.invalidValue, "\(context) \(error)")
        }
        if let pattern = try text("XD_PAttK_regularExpressionString"),
           !XcodeModelValues.applyRegularExpression(pattern, to: attribute) {
            throw error(.invalidValue, "\(context) has a regular expression that does not compile: \(pattern)")
        }
        attribute.allowsExternalBinaryDataStorage =
            try reading(context, { try settings.bool("XD_PAttK_allowsExternalBinaryDataStorage") }) ?? false
        if attribute.allowsExternalBinaryDataStorage && !attribute.storesExternalBinaryData {
            warn(settings.object, "\(context) allows external binary storage, which only binary and transformable attributes have; the flag has no effect")
        }
        return attribute
    }

    // MARK: Relationships

    private static let relationshipSettings: Set<String> = [
        "XD_PRK_destination", "XD_PRK_inverseRelationship", "XD_PRK_deleteRule", "XD_PRK_minCount", "XD_PRK_maxCount",
        "XD_PRK_isToMany", "XD_PRK_ordered",
    ]

    /// Reads `XD_PR_Stereotype`, whose destination and inverse are the archived
    /// entity and relationship themselves. The inverse is checked by
    /// ``resolveRelationships(in:)`` once every entity is read.
    private mutating func relationship(named name: String, _ settings: LegacyModelStereotype, object: ArchivedObject,
                                       in context: String) throws -> RelationshipDescription {
        checkSettings(of: settings, known: Self.relationshipSettings, in: context)
        let (destinationObject, inverseObject) = try reading(context) {
            (try settings.value("XD_PRK_destination"), try settings.value("XD_PRK_inverseRelationship"))
        }
        guard let destinationObject else {
            throw error(.missingValue, "\(context) has no destination entity (XD_PRK_destination)")
        }
        guard let destination = entitiesByObject[destinationObject.identity] else {
            throw error(.danglingReference, "\(context) points to \(destinationObject.className ?? "a value") (\(destinationObject.path)), which is not an entity of the model")
        }
        var inverse: String?
        if let inverseObject {
            guard inverseObject.isKind(of: "XDPMRelationship"),
                  let inverseName = try reading(context, { try inverseObject.string("_name") }), !inverseName.isEmpty else {
                throw error(.danglingReference, "\(context) names \(inverseObject.className ?? "a value") (\(inverseObject.path)) as its inverse, which is not a named relationship")
            }
            inverse = inverseName
        }
        let (ruleCode, minCount, maxCount, toManyFlag, orderedFlag) = try reading(context) {
            (try settings.integer("XD_PRK_deleteRule"), try settings.integer("XD_PRK_minCount"), try settings.integer("XD_PRK_maxCount"),
             try settings.bool("XD_PRK_isToMany"), try settings.bool("XD_PRK_ordered"))
        }
        guard let deleteRule = DeleteRule(rawValue: Int(clamping: ruleCode ?? Int64(DeleteRule.nullify.rawValue))) else {
            throw error(.invalidValue, "\(context) has delete rule \(ruleCode ?? 0); expected 0 (no action) to 3 (deny)")
        }
        for (what, count) in [("minimum", minCount), ("maximum", maxCount)] {
            if let count, !(0...Int64(Int32.max)).contains(count) {
                throw error(.invalidValue, "\(context) has \(what) count \(count), which is not a count")
            }
        }
        // Xcode 3 leaves out the flag on to-one relationships; their maximum is 1.
        let isToMany = toManyFlag ?? (maxCount.map { $0 != 1 } ?? false)
        if !isToMany, let maxCount, maxCount > 1 {
            warn(settings.object, "\(context) is to-one but has maximum count \(maxCount); it is loaded as to-one")
        }
        if !isToMany, orderedFlag == true {
            warn(settings.object, "\(context) is to-one and marked ordered; the order flag was ignored")
        }
        let relationship = RelationshipDescription(name: name, destination: destination.name, inverse: inverse, isToMany: isToMany,
                                                   isOrdered: isToMany && orderedFlag == true, deleteRule: deleteRule)
        if isToMany {
            relationship.minCount = Int(minCount ?? 0)
            relationship.maxCount = Int(maxCount ?? 0)
        }
        readRelationships.append((relationship, object))
        return relationship
    }

    /// Checks every relationship's inverse against its destination.
    ///
    /// A missing inverse throws. An inverse that does not point back (A.r names
    /// B.s, but B.s names another) is only warned about, as for XML models.
    mutating func resolveRelationships(in model: ManagedObjectModel) throws {
        let entities = model.entitiesByName
        for (relationship, object) in readRelationships {
            let context = "\(relationship.entity?.name ?? "?").\(relationship.name)"
            guard let inverseName = relationship.inverseName,
                  let destination = entities[relationship.destinationEntityName] else { continue }
            guard let inverse = destination.relationshipsByName[inverseName] else {
                throw error(.danglingReference, "\(context) names \(inverseName) as its inverse, but \(destination.name) has no relationship of that name")
            }
            if inverse.inverseName != relationship.name {
                warn(object, "\(context) names \(destination.name).\(inverseName) as its inverse, whose own inverse is \(inverse.inverseName ?? "none")")
            }
        }
    }

    // MARK: User info

    /// A user-info setting's string entries. Entries whose key or value is not a
    /// string (Xcode 3 filled every element's with Sync Services' policies, which
    /// are dictionaries and arrays) are left out with one warning per element.
    mutating func userInfo(_ settings: LegacyModelStereotype, _ setting: String, in context: String) throws -> [String: String] {
        let entries = try reading("\(context) user info") { try settings.value(setting)?.asEntries() ?? [] }
        var info: [String: String] = [:]
        var skipped: [String] = []
        for (key, value) in entries {
            let pair = try reading("\(context) user info") { (try key.textValue(), try value.textValue()) }
            guard let name = pair.0, let text = pair.1 else {
                skipped.append(pair.0 ?? "?")
                continue
            }
            info[name] = text
        }
        if !skipped.isEmpty {
            warn(settings.object, "\(context): user info \(skipped.sorted().joined(separator: ", ")) holds values that are not strings; left out")
        }
        return info
    }
}
