import Foundation

/// Writes a ``ManagedObjectModel`` as the keyed archive of a compiled
/// `NSManagedObjectModel`, in the shape ``CompiledModelDecoder`` reads and
/// Core Data writes into a store's `Z_MODELCACHE`: so that a store this
/// package creates carries its model as Core Data's stores do, and opens
/// with `ManagedObjectModel(cachedInStoreAt:)` (DataStackStores) or `datastack` alone.
///
/// The archive holds what the model does: entities with class names,
/// inheritance, their properties (a subentity lists its inherited ones too,
/// as Core Data's archives do), attributes with types, defaults, flags and
/// validation (as the predicates Xcode compiles them to), relationships with
/// destinations, inverses, counts, order and delete rules, uniqueness
/// constraints, fetch indexes, configurations, version identifiers and user
/// info. External binary storage is kept under a key of this package's,
/// `NSAllowsExternalBinaryDataStorage`: the fixtures show no archive of
/// Apple's with the flag, so its key there is unknown.
///
/// A to-many relationship whose maximum is exactly 1 reads back as a to-one:
/// the archive says to-many only by a maximum other than 1, as Core Data's does.
package enum CompiledModelEncoder {
    /// The archive of `model`.
    package static func archive(_ model: ManagedObjectModel) -> Data {
        var writer = KeyedArchiveWriter()
        let modelUID = writer.reserve()
        var entityUIDs: [ObjectIdentifier: Int] = [:]
        var propertyUIDs: [ObjectIdentifier: Int] = [:]
        for entity in model.entities {
            entityUIDs[ObjectIdentifier(entity)] = writer.reserve()
            for property in entity.properties { propertyUIDs[ObjectIdentifier(property)] = writer.reserve() }
        }
        var context = Context(writer: writer, modelUID: modelUID, entityUIDs: entityUIDs, propertyUIDs: propertyUIDs)
        for entity in model.entities {
            context.writeEntity(entity)
            for property in entity.properties { context.writeProperty(property, of: entity) }
        }
        context.writeModel(model)
        return context.writer.archive(root: .uid(modelUID))
    }

    /// The writer and the UIDs reserved for the model's objects.
    private struct Context {
        var writer: KeyedArchiveWriter
        let modelUID: Int
        let entityUIDs: [ObjectIdentifier: Int]
        let propertyUIDs: [ObjectIdentifier: Int]

        func uid(of entity: EntityDescription?) -> PropertyListValue {
            entity.flatMap { entityUIDs[ObjectIdentifier($0)] }.map(PropertyListValue.uid) ?? .uid(0)
        }

        func uid(of property: PropertyDescription?) -> PropertyListValue {
            property.flatMap { propertyUIDs[ObjectIdentifier($0)] }.map(PropertyListValue.uid) ?? .uid(0)
        }

        mutating func writeModel(_ model: ManagedObjectModel) {
            let entities = model.entities.sorted { $0.name < $1.name }.map { (key: writer.string($0.name), value: uid(of: $0)) }
            let byName = model.entitiesByName
            var configurations: [(key: PropertyListValue, value: PropertyListValue)] = []
            for name in model.configurations.keys.sorted() {
                let members = (model.configurations[name] ?? []).sorted().map { uid(of: byName[$0]) }
                configurations.append((writer.string(name), writer.array(members, className: "NSSet")))
            }
            let identifiers = model.versionIdentifiers.sorted().map { writer.string($0) }
            writer.fill(modelUID, classChain: ["NSManagedObjectModel", "NSObject"], fields: [
                "NSEntities": writer.dictionary(entities),
                "NSConfigurations": writer.dictionary(configurations),
                "NSVersionIdentifiers": writer.array(identifiers, className: "NSSet"),
                "NSFetchRequestTemplates": .uid(0),
            ])
        }

        mutating func writeEntity(_ entity: EntityDescription) {
            // Every property the entity has, inherited ones included, under its declaring object.
            var properties: [(key: PropertyListValue, value: PropertyListValue)] = []
            var seen = Set<String>()
            var chain: [EntityDescription] = []
            var current: EntityDescription? = entity
            while let step = current { chain.insert(step, at: 0); current = step.superentity }
            for step in chain {
                for property in step.properties where seen.insert(property.name).inserted {
                    properties.append((writer.string(property.name), uid(of: property)))
                }
            }
            let subentities = entity.subentities.map { (key: writer.string($0.name), value: uid(of: $0)) }
            let tuples = entity.uniquenessConstraints.map { tuple in writer.array(tuple.map { writer.string($0) }) }
            let indexes = entity.indexes.map { index in writeFetchIndex(index) }
            let fields: [String: PropertyListValue] = [
                "NSEntityName": writer.string(entity.name),
                "NSClassNameForEntity": writer.string(entity.managedObjectClassName),
                "NSRenamingIdentifier": writer.string(entity.renamingIdentifier ?? entity.name),
                "NSVersionHashModifier": writer.string(entity.versionHashModifier),
                "NSManagedObjectModel": .uid(modelUID),
                "NSSuperentity": uid(of: entity.superentity),
                "NSSubentities": writer.dictionary(subentities),
                "NSProperties": writer.dictionary(properties),
                "NSIsAbstract": .bool(entity.isAbstract),
                "NSUniqueTuples": writer.array(tuples),
                "NSFetchIndexDescriptions": writer.array(indexes),
                "NSUserInfo": userInfo(entity.userInfo),
            ]
            guard case .uid(let entityUID) = uid(of: entity) else { return }
            writer.fill(entityUID, classChain: ["NSEntityDescription", "NSObject"], fields: fields)
        }

        private mutating func writeFetchIndex(_ index: FetchIndexDescription) -> PropertyListValue {
            let elements = index.propertyNames.map { name in
                writer.object(["NSFetchIndexElementDescription", "NSObject"]) { writer in
                    ["NSPropertyName": writer.string(name), "NSAscending": .bool(true), "NSFetchIndexElementType": .integer(0)]
                }
            }
            let elementArray = writer.array(elements)
            return writer.object(["NSFetchIndexDescription", "NSObject"]) { writer in
                ["NSIndexName": writer.string(index.name), "NSIndexElements": elementArray, "NSPartialIndexPredicate": .uid(0)]
            }
        }

        mutating func writeProperty(_ property: PropertyDescription, of entity: EntityDescription) {
            var fields: [String: PropertyListValue] = [
                "NSPropertyName": writer.string(property.name),
                "NSEntity": uid(of: entity),
                "NSIsOptional": .bool(property.isOptional),
                "NSIsTransient": .bool(property.isTransient),
                "NSIndexedBySpotlight": .bool(property.isIndexedBySpotlight),
                "NSRenamingIdentifier": writer.string(property.renamingIdentifier ?? property.name),
                "NSVersionHashModifier": writer.string(property.versionHashModifier),
                "NSUserInfo": userInfo(property.userInfo),
            ]
            let chain: [String]
            switch property {
            case let attribute as AttributeDescription:
                chain = ["NSAttributeDescription", "NSPropertyDescription", "NSObject"]
                fields.merge(attributeFields(attribute)) { _, new in new }
            case let relationship as RelationshipDescription:
                chain = ["NSRelationshipDescription", "NSPropertyDescription", "NSObject"]
                fields.merge([
                    "NSDestinationEntity": uid(of: relationship.destinationEntity),
                    "_NSDestinationEntityName": writer.string(relationship.destinationEntityName),
                    "NSInverseRelationship": uid(of: relationship.inverseRelationship),
                    "_NSInverseRelationshipName": writer.string(relationship.inverseName),
                    "NSDeleteRule": .integer(Int64(relationship.deleteRule.rawValue)),
                    "NSMinCount": .integer(Int64(relationship.isToMany ? relationship.minCount : 0)),
                    "NSMaxCount": .integer(Int64(relationship.isToMany ? relationship.maxCount : 1)),
                    "NSIsOrdered": .bool(relationship.isOrdered),
                ]) { _, new in new }
            default:
                return
            }
            guard case .uid(let propertyUID) = uid(of: property) else { return }
            writer.fill(propertyUID, classChain: chain, fields: fields)
        }

        private mutating func attributeFields(_ attribute: AttributeDescription) -> [String: PropertyListValue] {
            var fields: [String: PropertyListValue] = [
                "NSAttributeType": .integer(Int64(attribute.type.coreDataCode)),
                "NSValueTransformerName": writer.string(attribute.valueTransformerName),
                "NSIsIndexed": .bool(attribute.isIndexed),
                "NSFlagsKey": .integer(attribute.preservesValueInHistoryOnDeletion ? 16 : 0),
                "NSDefaultValue": Self.archivedValue(attribute.defaultValue).map { writer.encode($0) } ?? .uid(0),
            ]
            if attribute.allowsExternalBinaryDataStorage { fields["NSAllowsExternalBinaryDataStorage"] = .bool(true) }
            let predicates = validationPredicates(of: attribute)
            if !predicates.isEmpty {
                fields["NSValidationPredicates"] = writer.array(predicates)
                fields["NSValidationWarnings"] = writer.array(predicates.map { _ in writer.string("") })
            }
            return fields
        }

        /// Minimum and maximum, lengths and the regular expression, as the
        /// comparison predicates Xcode compiles them to.
        private mutating func validationPredicates(of attribute: AttributeDescription) -> [PropertyListValue] {
            var predicates: [PropertyListValue] = []
            let bounds: [(PropertyValue?, Int64)] = [(attribute.minimumValue, 3), (attribute.maximumValue, 1)]
            for (bound, op) in bounds {
                if let bound, let value = Self.archivedValue(bound) { predicates.append(comparison(keyPath: nil, op, value)) }
            }
            let lengths: [(Int?, Int64)] = [(attribute.minimumLength, 3), (attribute.maximumLength, 1)]
            for (length, op) in lengths {
                if let length { predicates.append(comparison(keyPath: "length", op, .integer(Int64(length)))) }
            }
            if let pattern = attribute.regularExpression { predicates.append(comparison(keyPath: nil, 6, .string(pattern))) }
            return predicates
        }

        /// `SELF <op> constant`, or `keyPath <op> constant`.
        private mutating func comparison(keyPath: String?, _ op: Int64, _ constant: ArchivedValue) -> PropertyListValue {
            let left: PropertyListValue
            if let keyPath {
                left = writer.object(["NSKeyPathSpecifierExpression", "NSExpression", "NSObject"]) { writer in
                    ["NSKeyPath": writer.string(keyPath), "NSExpressionType": .integer(10)]
                }
            } else {
                left = writer.object(["NSSelfExpression", "NSExpression", "NSObject"]) { _ in ["NSExpressionType": .integer(1)] }
            }
            let right = writer.object(["NSConstantValueExpression", "NSExpression", "NSObject"]) { writer in
                ["NSConstantValue": writer.encode(constant), "NSExpressionType": .integer(0)]
            }
            let operation = writer.object(["NSComparisonPredicateOperator", "NSPredicateOperator", "NSObject"]) { _ in
                ["NSOperatorType": .integer(op), "NSModifier": .integer(0), "NSOptions": .integer(0), "NSVariant": .integer(0)]
            }
            return writer.object(["NSComparisonPredicate", "NSPredicate", "NSObject"]) { _ in
                ["NSLeftExpression": left, "NSRightExpression": right, "NSPredicateOperator": operation]
            }
        }

        private mutating func userInfo(_ info: [String: String]) -> PropertyListValue {
            writer.dictionary(info.keys.sorted().map { (key: writer.string($0), value: writer.string(info[$0])) })
        }

        /// A default or bound as the Foundation value Core Data archives; nil for none.
        static func archivedValue(_ value: PropertyValue) -> ArchivedValue? {
            switch value {
            case .null, .object, .objects: nil
            case .integer(let v): .integer(v)
            case .double(let v): .double(v)
            case .bool(let v): .bool(v)
            case .string(let v): .string(v)
            case .date(let v): .date(v)
            case .data(let v): .data(v)
            case .uuid(let v): .uuid(v)
            case .uri(let v): .url(v)
            case .decimal(let v): .string(v.description)
            }
        }
    }
}
