import Foundation

/// Rebuilds a ``ManagedObjectModel`` from the keyed archive of a compiled
/// `NSManagedObjectModel`: what `momc` writes into a `.mom` file and what Core
/// Data caches in a store's `Z_MODELCACHE`.
///
/// The archive holds the model's object graph: an `NSManagedObjectModel` whose
/// `NSEntities` maps names to `NSEntityDescription`s, each with its
/// `NSProperties` (attributes, relationships, fetched and derived properties),
/// `NSSuperentity` and `NSSubentities`. A subentity's properties include the
/// inherited ones, as copies or as `_NSPropertyDescriptionProxy` objects; only
/// the properties its superentity does not have are its own here, since an
/// ``EntityDescription`` inherits the rest.
///
/// What the model cannot hold (fetched properties, fetch request templates,
/// partial indexes) and keys the decoder does not know are warnings naming their
/// path in the archive; what would make the model wrong (an unknown attribute
/// type, a dangling destination, an inheritance cycle) throws, naming the
/// entity and property.
struct CompiledModelDecoder: ArchivedModelReader {
    let path: String
    var warnings: [String] = []

    /// Entities by archive object, so that references between them resolve to one description.
    private(set) var entitiesByObject: [Int: EntityDescription] = [:]
    /// The names each archived entity lists in `NSProperties`, inherited ones included.
    private var propertyNamesByObject: [Int: Set<String>] = [:]

    init(path: String) {
        self.path = path
    }

    // MARK: - The model

    /// Decodes the archive's root `NSManagedObjectModel`.
    mutating func decode(_ archive: KeyedArchive) throws -> ModelDefinition {
        guard let root = try reading("the archive", { try archive.topObject() }) else {
            throw error(.malformedArchive, "the archive has no root object")
        }
        guard root.classChain.contains("NSManagedObjectModel") else {
            throw error(.notAModel, "the archive's root object is \(root.className ?? "an object without class"), not an NSManagedObjectModel")
        }
        checkKeys(of: root, known: ["NSEntities", "NSConfigurations", "NSFetchRequestTemplates", "NSVersionIdentifiers"], in: "model")

        let entityObjects = try reading("model.NSEntities") { try root.entries("NSEntities") ?? [] }
        var entities: [EntityDescription] = []
        for (_, object) in entityObjects {
            entities.append(try entity(for: object))
        }
        try linkInheritance(entityObjects.map(\.value))
        for (_, object) in entityObjects {
            try readProperties(of: object)
        }

        var output = ModelDefinition(entities: entities)
        let identifiers = try reading("model.NSVersionIdentifiers") { try root.objects("NSVersionIdentifiers") ?? [] }
        for identifier in identifiers {
            guard let string = try reading("model.NSVersionIdentifiers", { try identifier.textValue() }) else {
                warn(identifier, "model: a version identifier that is not a string was ignored")
                continue
            }
            if !string.isEmpty { output.versionIdentifiers.insert(string) }
        }
        output.configurations = try readConfigurations(of: root)
        if let templates = try reading("model.NSFetchRequestTemplates", { try root.entries("NSFetchRequestTemplates") }), !templates.isEmpty {
            let names = try templates.map { template in try reading("model.NSFetchRequestTemplates") { try template.key.textValue() ?? "?" } }
            warn(root, "model: fetch request templates \(names.sorted().joined(separator: ", ")) are not part of the model here and were left out")
        }
        return output
    }

    // MARK: - Entities

    /// The description of one archived entity, made on first use.
    private mutating func entity(for object: ArchivedObject) throws -> EntityDescription {
        if let entity = entitiesByObject[object.identity] { return entity }
        guard object.classChain.contains("NSEntityDescription") else {
            throw error(.malformedArchive, "\(object.path) is \(object.className ?? "an object without class"), not an NSEntityDescription")
        }
        guard let name = try reading(object.path, { try object.string("NSEntityName") }), !name.isEmpty else {
            throw error(.missingValue, "\(object.path): an entity has no name (NSEntityName)")
        }
        let context = "entity \(name)"
        checkKeys(of: object, known: [
            "NSEntityName", "NSClassNameForEntity", "NSSuperentity", "NSSubentities", "NSProperties", "NSIsAbstract",
            "NSUniqueTuples", "NSFetchIndexDescriptions", "NSCompoundIndexes", "NSUserInfo", "NSVersionHashModifier",
            "NSRenamingIdentifier", "NSManagedObjectModel",
        ], in: context)
        let entity = EntityDescription(name: name, managedObjectClass: ManagedObject.self)
        try reading(context) {
            entity.managedObjectClassName = try object.string("NSClassNameForEntity")
            entity.isAbstract = try object.bool("NSIsAbstract") ?? false
            entity.renamingIdentifier = try object.string("NSRenamingIdentifier").flatMap { $0 == name ? nil : $0 }
            entity.versionHashModifier = try object.string("NSVersionHashModifier")
        }
        entity.userInfo = try userInfo(of: object, in: context)
        entitiesByObject[object.identity] = entity
        return entity
    }

    /// Builds the inheritance tree from each entity's `NSSuperentity`, after
    /// checking that following it never comes back to where it started.
    private mutating func linkInheritance(_ objects: [ArchivedObject]) throws {
        var children: [Int: [EntityDescription]] = [:]
        var order: [Int] = []
        for object in objects {
            let entity = try entity(for: object)
            var ancestor = try reading("entity \(entity.name).NSSuperentity") { try object.object("NSSuperentity") }
            guard let parent = ancestor else { continue }
            guard let parentEntity = entitiesByObject[parent.identity] else {
                throw error(.danglingReference, "entity \(entity.name) inherits from an entity the model's NSEntities does not list")
            }
            var steps = 0
            while let current = ancestor {
                if current.identity == object.identity || steps > objects.count {
                    throw error(.inconsistentModel, "entity \(entity.name) inherits from itself through \(parentEntity.name)")
                }
                ancestor = try reading("entity \(entity.name) ancestors") { try current.object("NSSuperentity") }
                steps += 1
            }
            if children[parent.identity] == nil { order.append(parent.identity) }
            children[parent.identity, default: []].append(entity)
        }
        for index in order {
            entitiesByObject[index]?.subentities = children[index] ?? []
        }
    }

    /// Reads the entity's own properties (those its superentity does not list),
    /// its uniqueness constraints and its fetch indexes.
    private mutating func readProperties(of object: ArchivedObject) throws {
        if propertyNamesByObject[object.identity] != nil { return }
        let entity = try entity(for: object)
        let context = "entity \(entity.name)"
        let entries = try reading("\(context).NSProperties") {
            try (object.entries("NSProperties") ?? []).map { (name: try $0.key.textValue() ?? "", value: $0.value) }
        }
        propertyNamesByObject[object.identity] = Set(entries.map(\.name))
        let parent = try reading("\(context).NSSuperentity") { try object.object("NSSuperentity") }
        var inherited = Set<String>()
        if let parent {
            if propertyNamesByObject[parent.identity] == nil { try readProperties(of: parent) }
            inherited = propertyNamesByObject[parent.identity] ?? []
        }
        var properties: [PropertyDescription] = []
        for (name, value) in entries where !inherited.contains(name) {
            if let property = try property(value, named: name, in: entity) {
                properties.append(property)
            }
        }
        entity.properties = properties

        let tuples = try reading("\(context).NSUniqueTuples") { try object.objects("NSUniqueTuples") ?? [] }
        entity.uniquenessConstraints = try tuples.map { tuple in
            try reading("\(context).NSUniqueTuples") {
                try (tuple.asElements()).map { part in
                    if let name = try part.textValue() { return name }
                    if let name = try part.string("NSPropertyName") { return name }
                    throw KeyedArchiveError(.wrongType, path: part.path, message: "a uniqueness constraint part is neither a name nor a property")
                }
            }
        }
        entity.indexes = try fetchIndexes(of: object, in: context)
        removeCompiledIndexes(of: entity)
    }
}

extension ArchivedObject {
    /// The archived object's identity: the index of its entry in `$objects`.
    var identity: Int { uid ?? -1 }

    /// The object as a string when it is one (inline, or an `NSString`), else nil.
    func textValue() throws(KeyedArchiveError) -> String? {
        guard case .string = value else {
            return isKind(of: "NSString") ? try asString() : nil
        }
        return try asString()
    }
}
