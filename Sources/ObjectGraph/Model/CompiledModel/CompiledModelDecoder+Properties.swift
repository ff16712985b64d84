import Foundation

// MARK: - Properties

extension CompiledModelDecoder {
    /// Keys every archived property description has, whatever its kind.
    private static let propertyKeys: Set<String> = [
        "NSPropertyName", "NSEntity", "NSIsOptional", "NSIsTransient", "NSIsReadOnly", "NSRenamingIdentifier",
        "NSVersionHashModifier", "NSUserInfo", "NSValidationPredicates", "NSValidationWarnings",
        "NSIndexedBySpotlight", "NSIsStoredInExternalRecord", "_P",
    ]

    /// The description of one archived property, or nil for a kind the model
    /// cannot hold (a fetched property), which is a warning.
    mutating func property(_ proxyOrProperty: ArchivedObject, named key: String, in entity: EntityDescription) throws -> PropertyDescription? {
        let context = "\(entity.name).\(key)"
        let object = try followingProxies(from: proxyOrProperty, in: context)
        let chain = object.classChain
        if chain.contains("NSFetchedPropertyDescription") {
            warn(object, "\(context) is a fetched property; fetched properties are not supported and it was left out")
            return nil
        }
        let property: PropertyDescription
        if chain.contains("NSRelationshipDescription") {
            property = try relationship(object, in: context)
        } else if chain.contains("NSAttributeDescription") {
            property = try attribute(object, in: context)
        } else {
            throw error(.malformedArchive, "\(context) is \(object.className ?? "an object without class"), not a property description (\(object.path))")
        }
        let name = try reading(context) { try object.string("NSPropertyName") } ?? key
        guard name == key else {
            throw error(.inconsistentModel, "\(entity.name) lists a property under the name \(key), but the property is named \(name)")
        }
        try reading(context) {
            property.isOptional = try object.bool("NSIsOptional") ?? false
            property.isTransient = try object.bool("NSIsTransient") ?? false
            property.isIndexedBySpotlight = try object.bool("NSIndexedBySpotlight") ?? false
            property.renamingIdentifier = try object.string("NSRenamingIdentifier").flatMap { $0 == name ? nil : $0 }
            property.versionHashModifier = try object.string("NSVersionHashModifier")
        }
        property.userInfo = try userInfo(of: object, in: context)
        return property
    }

    /// The property a proxy stands for (a property the entity inherits, which
    /// the superentity declares), through any chain of proxies; `object` itself
    /// when it is no proxy. A chain that comes back to a proxy already passed
    /// is a damaged archive (followed by recursion, it overflowed the stack:
    /// found by the model-cache fuzz target).
    private func followingProxies(from object: ArchivedObject, in context: String) throws -> ArchivedObject {
        var object = object
        var passed = Set<Int>()
        while object.classChain.contains("_NSPropertyDescriptionProxy") {
            // An object inline in another (no UID) cannot be reached again: only references loop.
            if let uid = object.uid, !passed.insert(uid).inserted {
                throw error(.malformedArchive, "\(context) is a property proxy whose chain of NSUnderlyingProperty comes back to itself (\(object.path))")
            }
            guard let underlying = try reading(context, { try object.object("NSUnderlyingProperty") }) else {
                throw error(.missingValue, "\(context) is a property proxy without the property it stands for (NSUnderlyingProperty)")
            }
            object = underlying
        }
        return object
    }

    // MARK: Attributes

    private mutating func attribute(_ object: ArchivedObject, in context: String) throws -> AttributeDescription {
        let isDerived = object.classChain.contains("NSDerivedAttributeDescription")
        var known = Self.propertyKeys.union([
            "NSAttributeType", "NSAttributeValueClassName", "NSDefaultValue", "NSValueTransformerName", "NSIsIndexed",
            "NSFlagsKey", "NSAllowsExternalBinaryDataStorage",
        ])
        if isDerived { known.formUnion(["NSDerivationExpression", "NSFilteringPredicate"]) }
        checkKeys(of: object, known: known, in: context)

        let code = try reading(context) { try object.integer("NSAttributeType") }
        guard let code, let type = AttributeType(coreDataCode: Int(code)) else {
            let name = code.map { AttributeType.unsupportedCodeNames[Int($0)] ?? "code \($0)" } ?? "no type"
            throw error(.unknownAttributeType, "\(context) has attribute type \(name), which cannot be loaded")
        }
        let attribute = AttributeDescription(name: context, type: type)
        try reading(context) {
            attribute.name = try object.string("NSPropertyName") ?? attribute.name
            attribute.isIndexed = try object.bool("NSIsIndexed") ?? false
            attribute.valueTransformerName = try object.string("NSValueTransformerName")
            // This package's key (see CompiledModelEncoder): Apple's for the flag is not known.
            attribute.allowsExternalBinaryDataStorage = try object.bool("NSAllowsExternalBinaryDataStorage") ?? false
            let flags = try object.integer("NSFlagsKey") ?? 0
            // Bit 16 is Xcode's "Preserve After Deletion" (checked against the fixtures' XML models).
            attribute.preservesValueInHistoryOnDeletion = flags & 16 != 0
            if flags & ~16 != 0 {
                warn(object, "\(context) has attribute flags \(flags & ~16) (NSFlagsKey) that are not understood and were ignored")
            }
        }
        if isDerived {
            warn(object, "\(context) is derived; it loads as a plain attribute and is not recomputed")
        }
        do {
            if let value = try object.value("NSDefaultValue") {
                attribute.defaultValue = try propertyValue(value, of: type, in: "\(context) default value")
            }
        } catch let error as KeyedArchiveError where error.code == .unsupportedClass && type == .transformable {
            // The app's own class, which only the app can decode; the stored values do not depend on it.
            warn(object, "\(context) has a default value of a class of the app's (\(error.message)); it loads without a default")
        } catch let error as KeyedArchiveError {
            throw self.error(.malformedArchive, "\(context) default value: \(error)")
        }
        try readValidation(of: object, into: attribute, in: context)
        return attribute
    }

    /// An archived Foundation value as a value of the attribute's type.
    func propertyValue(_ value: ArchivedValue, of type: AttributeType, in context: String) throws -> PropertyValue {
        let converted: PropertyValue? = switch (type, value) {
        case (_, .null): .null
        case (.integer16, .integer(let v)), (.integer32, .integer(let v)), (.integer64, .integer(let v)):
            type.integerRange?.contains(v) == true ? .integer(v) : nil
        case (.integer16, .double(let v)), (.integer32, .double(let v)), (.integer64, .double(let v)):
            Int64(exactly: v).flatMap { type.integerRange?.contains($0) == true ? .integer($0) : nil }
        case (.double, .double(let v)), (.float, .double(let v)): .double(v)
        case (.double, .integer(let v)), (.float, .integer(let v)): .double(Double(v))
        case (.decimal, .double(let v)): .decimal(Decimal(v))
        case (.decimal, .integer(let v)): .decimal(Decimal(v))
        case (.decimal, .string(let v)): Decimal(string: v, locale: Locale(identifier: "en_US_POSIX")).map(PropertyValue.decimal)
        case (.boolean, .bool(let v)): .bool(v)
        case (.boolean, .integer(let v)) where v == 0 || v == 1: .bool(v == 1)
        case (.string, .string(let v)): .string(v)
        case (.date, .date(let v)): .date(v)
        case (.binaryData, .data(let v)), (.transformable, .data(let v)): .data(v)
        case (.uuid, .uuid(let v)): .uuid(v)
        case (.uri, .url(let v)): .uri(v)
        case (.uri, .string(let v)): URL(string: v).map(PropertyValue.uri)
        default: nil
        }
        guard let converted else {
            throw error(.invalidValue, "\(context) \(value) is not \(type.valueDescription)")
        }
        return converted
    }

    // MARK: Relationships

    private mutating func relationship(_ object: ArchivedObject, in context: String) throws -> RelationshipDescription {
        checkKeys(of: object, known: Self.propertyKeys.union([
            "NSDestinationEntity", "_NSDestinationEntityName", "NSInverseRelationship", "_NSInverseRelationshipName",
            "NSDeleteRule", "NSMinCount", "NSMaxCount", "NSIsOrdered",
        ]), in: context)
        return try reading(context) {
            var destination = try object.string("_NSDestinationEntityName")
            if destination == nil, let entity = try object.object("NSDestinationEntity") {
                destination = try entity.string("NSEntityName")
            }
            guard let destination, !destination.isEmpty else {
                throw error(.missingValue, "\(context) has no destination entity")
            }
            var inverse = try object.string("_NSInverseRelationshipName")
            if inverse == nil, let relationship = try object.object("NSInverseRelationship") {
                inverse = try relationship.string("NSPropertyName")
            }
            let ruleCode = try object.integer("NSDeleteRule") ?? Int64(DeleteRule.nullify.rawValue)
            guard let deleteRule = DeleteRule(rawValue: Int(clamping: ruleCode)) else {
                throw error(.invalidValue, "\(context) has delete rule \(ruleCode); expected 0 (no action) to 3 (deny)")
            }
            let minCount = try object.integer("NSMinCount") ?? 0
            // A model built in code may say -1 for "no limit", which Xcode writes as 0.
            let maxCount = max(try object.integer("NSMaxCount") ?? 0, 0)
            guard minCount >= 0, minCount <= Int64(Int32.max), maxCount <= Int64(Int32.max) else {
                throw error(.invalidValue, "\(context) has counts \(minCount)…\(maxCount), which are not counts")
            }
            // Core Data's rule: a relationship is to-many unless its maximum is exactly 1.
            let isToMany = maxCount != 1
            let relationship = RelationshipDescription(
                name: context, destination: destination, inverse: inverse.flatMap { $0.isEmpty ? nil : $0 },
                isToMany: isToMany, isOrdered: try isToMany && (object.bool("NSIsOrdered") ?? false), deleteRule: deleteRule)
            relationship.name = try object.string("NSPropertyName") ?? relationship.name
            if isToMany {
                relationship.minCount = Int(minCount)
                relationship.maxCount = Int(maxCount)
            }
            return relationship
        }
    }

    // MARK: Entity parts

    /// The `NSUserInfo` dictionary of a model object, with string keys and values.
    mutating func userInfo(of object: ArchivedObject, in context: String) throws -> [String: String] {
        let entries = try reading("\(context).NSUserInfo") { try object.entries("NSUserInfo") ?? [] }
        var info: [String: String] = [:]
        for (key, value) in entries {
            guard let key = try reading("\(context).NSUserInfo", { try key.textValue() }),
                  let value = try reading("\(context).NSUserInfo", { try value.textValue() }) else {
                warn(object, "\(context): a userInfo entry that is not a string pair was ignored")
                continue
            }
            info[key] = value
        }
        return info
    }

    /// The entity's fetch indexes (`NSFetchIndexDescriptions`), and the compound
    /// indexes of models from before them.
    mutating func fetchIndexes(of object: ArchivedObject, in context: String) throws -> [FetchIndexDescription] {
        var indexes: [FetchIndexDescription] = []
        let descriptions = try reading("\(context).NSFetchIndexDescriptions") { try object.objects("NSFetchIndexDescriptions") ?? [] }
        for description in descriptions {
            let name = try reading(context) { try description.string("NSIndexName") } ?? "index\(indexes.count + 1)"
            if try reading(context, { try description.object("NSPartialIndexPredicate") }) != nil {
                warn(description, "\(context) fetch index \(name) is partial; its predicate was ignored and the index covers every row")
            }
            let elements = try reading("\(context) fetch index \(name)") { try description.objects("NSIndexElements") ?? [] }
            var properties: [String] = []
            for element in elements {
                guard let property = try reading("\(context) fetch index \(name)", { try element.string("NSPropertyName") }) else {
                    throw error(.invalidValue, "\(context) fetch index \(name): an element without a property (expression indexes are not supported)")
                }
                if let kind = try reading(context, { try element.integer("NSFetchIndexElementType") }), kind != 0 {
                    warn(element, "\(context) fetch index \(name): element type \(kind) is not supported; a plain (binary) index is used")
                }
                if try reading(context, { try element.bool("NSAscending") }) == false {
                    warn(element, "\(context) fetch index \(name): \(property) is descending; the index is kept ascending")
                }
                properties.append(property)
            }
            indexes.append(FetchIndexDescription(name: name, propertyNames: properties))
        }
        let compound = try reading("\(context).NSCompoundIndexes") { try object.objects("NSCompoundIndexes") ?? [] }
        for index in compound {
            let names = try reading("\(context).NSCompoundIndexes") {
                try index.asElements().compactMap { try $0.textValue() ?? $0.string("NSPropertyName") }
            }
            // Core Data also writes each multi-property fetch index as a compound index.
            guard !names.isEmpty, !indexes.contains(where: { $0.propertyNames == names }) else { continue }
            indexes.append(FetchIndexDescription(name: "compoundIndex\(indexes.count + 1)", propertyNames: names))
        }
        return indexes
    }

    /// Takes out what compiling added to the entity's indexes, so that the model
    /// reads as its source: an indexed attribute compiles to a fetch index named
    /// after it, and a fetch index over one attribute marks that attribute indexed.
    func removeCompiledIndexes(of entity: EntityDescription) {
        for case let attribute as AttributeDescription in entity.properties where attribute.isIndexed {
            let single = [attribute.name]
            entity.indexes.removeAll { $0.name == attribute.name && $0.propertyNames == single }
            if entity.indexes.contains(where: { $0.propertyNames == single }) {
                attribute.isIndexed = false
            }
        }
    }

    /// The model's configurations: each name with the names of its entities.
    mutating func readConfigurations(of root: ArchivedObject) throws -> [String: [String]] {
        let entries = try reading("model.NSConfigurations") { try root.entries("NSConfigurations") ?? [] }
        var configurations: [String: [String]] = [:]
        for (key, members) in entries {
            guard let name = try reading("model.NSConfigurations", { try key.textValue() }) else {
                warn(root, "model: a configuration whose name is not a string was ignored")
                continue
            }
            let entities = try reading("configuration \(name)") { try members.asElements() }
            configurations[name] = try entities.map { member in
                if let entityName = try reading("configuration \(name)", { try member.textValue() }) { return entityName }
                guard let entity = entitiesByObject[member.identity] else {
                    throw error(.danglingReference, "configuration \(name) names an entity the model's NSEntities does not list")
                }
                return entity.name
            }.sorted()
        }
        return configurations
    }
}
