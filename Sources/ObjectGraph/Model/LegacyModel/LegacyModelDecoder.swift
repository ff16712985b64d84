import Foundation

/// Rebuilds a model from the `elements` file of an Xcode 3 model: the only
/// source an `.xcdatamodel` saved by Xcode 3 (2007–2011) has, before Xcode 4
/// introduced the XML `contents` file.
///
/// The file is an `NSKeyedArchiver` archive of the model editor's own objects,
/// which come from a UML framework (see ``LegacyModelStereotype`` for how
/// Core Data's settings hang off them):
///
/// ```
/// XDPMModel                                   $top.root
///   _xd_rootPackage: XDModelPackage
///     XDBucketForClassesstorage: {name: XDPMEntity}
///       XDPMEntity  _name, stereotype XD_PStereotype (class name, abstract, user info, …)
///         XDBucketForGeneralizationsstorage: [the parent entity]
///         XDBucketForOwnedAttributesstorage: {name: XDPMAttribute | XDPMRelationship}
///           stereotype XD_PPropStereotype: optional, transient, indexed, user info, …
///           stereotype XD_PAtt_Stereotype: type code (NSAttributeType), default, limits, …
///           stereotype XD_PR_Stereotype:  destination and inverse (the objects), counts, delete rule, …
///   _configurationsByName, _modelVersionIdentifier
/// ```
///
/// The settings and what they become:
///
/// | setting | model |
/// |---|---|
/// | `XD_PSK_entityClassName`, `XD_PSK_isAbstract` (or `_isAbstract`) | ``EntityDescription/managedObjectClassName``, ``EntityDescription/isAbstract`` |
/// | `XD_PSK_userInfo`, `XD_PPSK_userInfo` | ``EntityDescription/userInfo``, ``PropertyDescription/userInfo`` (string entries) |
/// | `XD_PSK_elementID`, `XD_PPSK_elementID` | renaming identifiers |
/// | `XD_PSK_versionHashModifier`, `XD_PPSK_versionHashModifier` | version hash modifiers |
/// | `XD_PPSK_isOptional`, `XD_PPSK_isTransient`, `XD_PPSK_isIndexed` | optional (default true), transient, indexed |
/// | `XD_PPSK_isSpotlightIndexed` | ``PropertyDescription/isIndexedBySpotlight`` |
/// | `XD_PAttK_attributeType` | ``AttributeType`` by Core Data's code (100 … 1800) |
/// | `XD_PAttK_defaultValueAsString`, `…minValueString`, `…maxValueString`, `…regularExpressionString`, `…valueTransformerName` | as the XML file's strings |
/// | `XD_PRK_destination`, `XD_PRK_inverseRelationship` | destination entity and inverse name |
/// | `XD_PRK_isToMany` (else: `maxCount` other than 1), `XD_PRK_ordered`, `XD_PRK_minCount`, `XD_PRK_maxCount`, `XD_PRK_deleteRule` | cardinality, order, counts (to-many only), ``DeleteRule`` by code |
///
/// Checked against the two Xcode 3 models of the fixture corpus (RestKit's
/// Twitter example, Apple's Recipes sample) and the stores they wrote.
/// Neither model has a subentity, a fetched property or a configuration, so
/// those parts follow the UML framework's shape unconfirmed: a generalization
/// names its parent in `_general` (or is the parent entity itself), and a
/// configuration lists entities or entity names.
///
/// What the editor keeps only for itself (sync services flags,
/// the class mapping, diagram bookkeeping such as `XDBucketFor…wasEncoded`) is
/// ignored; settings and keys the decoder does not know, user-info entries
/// that are not strings, and fetch requests are warnings naming their path in
/// the archive. What would make the model wrong (an unknown attribute type, a
/// dangling destination or inverse, an inheritance cycle, a damaged archive)
/// throws ``ModelLoadingError`` naming the entity and property.
struct LegacyModelDecoder: ArchivedModelReader {
    /// The `elements` file, for messages.
    let path: String
    var warnings: [String] = []

    /// Entities by archive object, so that destinations and parents resolve to one description.
    var entitiesByObject: [Int: EntityDescription] = [:]
    /// Relationships whose inverse is checked once every entity is read.
    var readRelationships: [(relationship: RelationshipDescription, object: ArchivedObject)] = []

    init(path: String) {
        self.path = path
    }

    // MARK: - Messages

    /// Keys of every UML element that only the editor uses.
    static let editorKeys: Set<String> = ["_owner", "_uniqueElementID", "_visibility"]

    /// Warns about each key of `object` that is neither read (`known`), nor the
    /// editor's (``editorKeys``), nor a bucket's bookkeeping (`XDBucketFor…wasEncoded`,
    /// `…ordered`, `…duplicates`).
    mutating func checkElementKeys(of object: ArchivedObject, known: Set<String>, in context: String) {
        checkKeys(of: object, known: known, in: context) { key in
            Self.editorKeys.contains(key)
                || key.hasPrefix("XDBucketFor") && ["wasEncoded", "ordered", "duplicates"].contains(where: { key.hasSuffix($0) })
        }
    }

    /// Warns about each setting of a stereotype that is neither read nor ignored.
    mutating func checkSettings(of stereotype: LegacyModelStereotype, known: Set<String>, in context: String) {
        for setting in stereotype.settingNames where !known.contains(setting) {
            warn(stereotype.object, "\(context): the setting \(setting) is not understood and was ignored")
        }
    }

    // MARK: - The model

    /// Decodes the bytes of an `elements` file.
    ///
    /// - Throws: ``ModelLoadingError``: `.malformedArchive` when the bytes are
    ///   not a readable keyed archive, `.legacyBinaryModel` when the archive (or
    ///   property list) is not an Xcode 3 data model, or a problem of the model.
    mutating func decode(_ data: Data) throws -> ModelDefinition {
        let archive: KeyedArchive
        do {
            archive = try KeyedArchive(data: data)
        } catch where error.code == .notKeyedArchive {
            throw self.error(.legacyBinaryModel, "the file is a property list but not a keyed archive (\(error.message)), so it is not an Xcode 3 data model")
        } catch {
            throw self.error(.malformedArchive, "the file is not a readable Xcode 3 model (a keyed archive): \(error)")
        }
        return try decode(archive)
    }

    /// Decodes the archive's root `XDPMModel`.
    mutating func decode(_ archive: KeyedArchive) throws -> ModelDefinition {
        guard let root = try reading("the archive", { try archive.topObject() }) else {
            throw error(.legacyBinaryModel, "the keyed archive has no root object, so it is not an Xcode 3 data model")
        }
        guard root.isKind(of: "XDPMModel") else { throw notADataModel(root) }
        checkElementKeys(of: root, known: [
            "_xd_rootPackage", "_configurationsByName", "_modelVersionIdentifier",
            "_xd_comments", "_xd_modelManager", "_xd_modelName",   // the editor's
        ], in: "model")
        let package = try rootPackage(of: root)
        let entries = try reading("the model's entities") { try package.entries("XDBucketForClassesstorage") ?? [] }
        var output = ModelDefinition()
        for (key, object) in entries {
            output.entities.append(try entity(object, listedAs: key))
        }
        try linkInheritance(entries.map(\.value))
        for (_, object) in entries {
            try readProperties(of: object)
        }
        try checkInheritedNames(output.entities)
        // Only resolves names; the caller adopts the entities into its own model.
        try resolveRelationships(in: ManagedObjectModel(entities: output.entities))
        output.configurations = try readConfigurations(of: root)
        if let identifier = try reading("model._modelVersionIdentifier", { try root.string("_modelVersionIdentifier") }), !identifier.isEmpty {
            output.versionIdentifiers = [identifier]
        }
        return output
    }

    /// Why an archive whose root is not an `XDPMModel` cannot be read.
    private func notADataModel(_ root: ArchivedObject) -> ModelLoadingError {
        let found = root.className ?? "a value (\(root.value.kindDescription))"
        if root.isKind(of: "NSManagedObjectModel") {
            return error(.legacyBinaryModel, "the archive holds a compiled model (NSManagedObjectModel), not Xcode 3's model source (XDPMModel); load it as a .mom file")
        }
        if found.hasPrefix("XD") {
            return error(.legacyBinaryModel, "the archive holds an Xcode 3 document of class \(found), not a data model (XDPMModel); Xcode 3's class models and diagrams share the 'elements' format")
        }
        return error(.legacyBinaryModel, "the keyed archive's root object is \(found), not an Xcode 3 data model (XDPMModel)")
    }

    /// The package that holds the entities, after checking that it holds nothing else.
    private mutating func rootPackage(of root: ArchivedObject) throws -> ArchivedObject {
        guard let package = try reading("model._xd_rootPackage", { try root.object("_xd_rootPackage") }) else {
            throw error(.malformedArchive, "the model has no package of entities (_xd_rootPackage)")
        }
        guard package.isKind(of: "XDUMLPackageImp") else {
            throw error(.malformedArchive, "the model's package is \(package.className ?? "a value"), not an XDModelPackage (\(package.path))")
        }
        checkElementKeys(of: package, known: [
            "XDBucketForClassesstorage", "XDBucketForPackagesstorage", "XDBucketForInterfacesstorage",
            "XDBucketForDataTypesstorage", "_name", "_xd_owningModel",
        ], in: "the model's package")
        if try reading("the model's packages", { try package.entries("XDBucketForPackagesstorage") ?? [] }).isEmpty == false {
            throw error(.malformedArchive, "the model nests packages (XDBucketForPackagesstorage), which Xcode 3's data model editor does not write; their entities cannot be read")
        }
        for bucket in ["XDBucketForInterfacesstorage", "XDBucketForDataTypesstorage"] {
            if try reading("the model's package", { try package.entries(bucket) ?? [] }).isEmpty == false {
                warn(package, "the model's package has UML \(bucket.dropFirst(11).dropLast(7).lowercased()), which are not part of a Core Data model and were ignored")
            }
        }
        return package
    }

    // MARK: - Entities

    /// Keys of an `XDPMEntity` that the decoder reads.
    private static let entityKeys: Set<String> = [
        "_name", "_isAbstract", "XDBucketForStereotypesstorage", "XDBucketForOwnedAttributesstorage",
        "XDBucketForGeneralizationsstorage", "XDBucketForSpecializationsstorage",
    ]

    /// Settings of `XD_PStereotype`, the entity's.
    private static let entitySettings: Set<String> = [
        "XD_PSK_entityClassName", "XD_PSK_isAbstract", "XD_PSK_userInfo", "XD_PSK_elementID",
        "XD_PSK_versionHashModifier", "XD_PSK_fetchRequestsArray", "XDPMCompoundIndexes",
        "XD_PSK_classMapping",   // the editor's class for the diagram (XDGenericRecordClass)
    ]

    /// The description of one archived entity, without its properties.
    private mutating func entity(_ object: ArchivedObject, listedAs key: ArchivedObject) throws -> EntityDescription {
        let listed = try reading("the model's entities") { try key.textValue() }
        guard object.isKind(of: "XDPMEntity") else {
            throw error(.malformedArchive, "the model lists \(listed ?? "an entry") as \(object.className ?? "a value"), not an entity (XDPMEntity) (\(object.path))")
        }
        guard entitiesByObject[object.identity] == nil else {
            throw error(.inconsistentModel, "the model lists entity \(listed ?? "?") twice")
        }
        guard let name = try reading(object.path, { try object.string("_name") }), !name.isEmpty else {
            throw error(.missingValue, "\(object.path): an entity has no name (_name)")
        }
        if let listed, listed != name {
            throw error(.inconsistentModel, "the model lists entity \(name) under the name \(listed)")
        }
        let context = "entity \(name)"
        checkElementKeys(of: object, known: Self.entityKeys, in: context)
        let entity = EntityDescription(name: name, managedObjectClass: ManagedObject.self)
        let stereotypes = try stereotypes(of: object, expected: ["XD_PStereotype"], in: context)
        let ownAbstract = try reading(context) { try object.bool("_isAbstract") }
        if let settings = stereotypes["XD_PStereotype"] {
            checkSettings(of: settings, known: Self.entitySettings, in: context)
            try reading(context) {
                entity.managedObjectClassName = try settings.string("XD_PSK_entityClassName").flatMap { $0.isEmpty ? nil : $0 }
                entity.isAbstract = try settings.bool("XD_PSK_isAbstract") ?? ownAbstract ?? false
                entity.renamingIdentifier = try settings.string("XD_PSK_elementID").flatMap { $0.isEmpty || $0 == name ? nil : $0 }
                entity.versionHashModifier = try settings.string("XD_PSK_versionHashModifier").flatMap { $0.isEmpty ? nil : $0 }
            }
            if let ownAbstract, ownAbstract != entity.isAbstract {
                warn(object, "\(context): the entity's own _isAbstract (\(ownAbstract)) differs from its setting XD_PSK_isAbstract; the setting is used")
            }
            entity.userInfo = try userInfo(settings, "XD_PSK_userInfo", in: context)
            try readEntityExtras(settings, of: entity, in: context)
        } else {
            entity.isAbstract = ownAbstract ?? false
            warn(object, "\(context) has no entity settings (XD_PStereotype); it loads without a class name or user info")
        }
        entitiesByObject[object.identity] = entity
        return entity
    }

    /// The entity's fetch requests (warned about: the model does not hold them)
    /// and compound indexes (kept as fetch indexes).
    private mutating func readEntityExtras(_ settings: LegacyModelStereotype, of entity: EntityDescription, in context: String) throws {
        if let requests = try reading("\(context) fetch requests", { try settings.value("XD_PSK_fetchRequestsArray")?.asElements() }), !requests.isEmpty {
            let names = try requests.map { request in try reading("\(context) fetch requests") { try request.string("_name") } ?? "?" }
            warn(settings.object, "\(context): fetch requests \(names.joined(separator: ", ")) are not part of the model here and were left out")
        }
        guard let indexes = try reading("\(context) compound indexes", { try settings.value("XDPMCompoundIndexes")?.asElements() }) else { return }
        for index in indexes {
            let names = try reading("\(context) compound indexes") {
                try index.asElements().map { try $0.textValue() ?? $0.string("_name") ?? "" }
            }
            guard !names.isEmpty, !names.contains("") else {
                warn(index, "\(context): a compound index whose members are not property names was ignored")
                continue
            }
            entity.indexes.append(FetchIndexDescription(name: "compoundIndex\(entity.indexes.count + 1)", propertyNames: names))
        }
    }

    /// Reads an element's stereotypes, warning about those not in `expected`.
    mutating func stereotypes(of object: ArchivedObject, expected: Set<String>, in context: String) throws -> [String: LegacyModelStereotype] {
        let stereotypes = try reading("\(context) settings") { try LegacyModelStereotype.stereotypes(of: object) }
        for (name, stereotype) in stereotypes.sorted(by: { $0.key < $1.key }) where !expected.contains(name) {
            warn(stereotype.object, "\(context): the stereotype \(name) is not understood and its settings were ignored")
        }
        return stereotypes
    }

    // MARK: - Inheritance

    /// Builds the inheritance tree from each entity's generalization, after
    /// checking that following parents never comes back to where it started.
    private mutating func linkInheritance(_ objects: [ArchivedObject]) throws {
        var parents: [Int: Int] = [:]
        for object in objects {
            guard let entity = entitiesByObject[object.identity] else { continue }
            let context = "entity \(entity.name)"
            let items = try reading("\(context) parents") { try object.objects("XDBucketForGeneralizationsstorage") ?? [] }
            guard let item = items.first else { continue }
            guard items.count == 1 else {
                throw error(.inconsistentModel, "\(context) has \(items.count) parent entities; an entity inherits from one at most")
            }
            // A UML generalization names the parent in `_general`; accept the parent entity itself too.
            let parent: ArchivedObject? = item.isKind(of: "XDPMEntity") ? item : try reading("\(context) parent") { try item.object("_general") }
            guard let parent, let parentEntity = entitiesByObject[parent.identity] else {
                throw error(.danglingReference, "\(context) inherits from \(item.className ?? "a value") (\(item.path)), which is not an entity of the model")
            }
            var ancestor: Int? = parent.identity
            var steps = 0
            while let current = ancestor {
                if current == object.identity || steps > objects.count {
                    throw error(.inconsistentModel, "entity \(entity.name) inherits from itself through \(parentEntity.name)")
                }
                ancestor = parents[current]
                steps += 1
            }
            parents[object.identity] = parent.identity
        }
        var children: [Int: [EntityDescription]] = [:]
        for object in objects {
            guard let parent = parents[object.identity], let entity = entitiesByObject[object.identity] else { continue }
            children[parent, default: []].append(entity)
        }
        for (parent, subentities) in children {
            entitiesByObject[parent]?.subentities = subentities
        }
    }

    /// Checks that no entity declares a property it inherits, which Core Data does not allow.
    private func checkInheritedNames(_ entities: [EntityDescription]) throws {
        for entity in entities {
            if let clash = entity.propertyOverridingAnAncestor {
                throw error(.inconsistentModel, "entity \(entity.name) declares \(clash.name), which it already inherits; Core Data does not allow overriding properties")
            }
        }
    }

    // MARK: - Configurations

    /// The model's configurations: each name with the names of its entities.
    private mutating func readConfigurations(of root: ArchivedObject) throws -> [String: [String]] {
        let entries = try reading("model._configurationsByName") { try root.entries("_configurationsByName") ?? [] }
        var configurations: [String: [String]] = [:]
        for (key, members) in entries {
            guard let name = try reading("model._configurationsByName", { try key.textValue() }), !name.isEmpty else {
                warn(root, "model: a configuration whose name is not a string was ignored")
                continue
            }
            let elements = try reading("configuration \(name)") { try members.asElements() }
            configurations[name] = try elements.map { member in
                if let entity = entitiesByObject[member.identity] { return entity.name }
                if let entityName = try reading("configuration \(name)", { try member.textValue() }),
                   entitiesByObject.values.contains(where: { $0.name == entityName }) {
                    return entityName
                }
                throw error(.danglingReference, "configuration \(name) lists \(member.className ?? "a value") (\(member.path)), which is not an entity of the model")
            }.sorted()
        }
        return configurations
    }
}
