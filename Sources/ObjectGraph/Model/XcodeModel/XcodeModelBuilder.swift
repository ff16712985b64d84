import Foundation

/// Maps the element tree of one `contents` file onto entities, properties and
/// configurations.
///
/// The builder works in two passes. The first reads every `<entity>` and its
/// children in document order; names of other entities and relationships are kept
/// as written. The second resolves them: parent entities (which builds the
/// inheritance tree), relationship destinations and inverses, and the property
/// names used by uniqueness constraints, fetch indexes and configurations. A name
/// that resolves to nothing throws with the line of the element that used it, so a
/// broken model fails here rather than when a coordinator first uses it.
///
/// What the file says that the model cannot hold is collected in ``warnings``,
/// one line each, starting with `path:line:`.
struct XcodeModelBuilder {
    /// The file being read, for messages.
    let path: String
    private(set) var warnings: [String] = []
    private(set) var fetchRequestTemplates: [XcodeModelLoader.FetchRequestTemplate] = []

    /// Entities with the element that declared them, for the second pass.
    var declared: [(entity: EntityDescription, node: XcodeModelXMLNode)] = []
    /// Relationships with their element, for the second pass.
    var relationshipNodes: [(relationship: RelationshipDescription, node: XcodeModelXMLNode)] = []

    init(path: String) {
        self.path = path
    }

    // MARK: - Messages

    func error(_ code: ModelLoadingError.Code, at node: XcodeModelXMLNode, _ message: String) -> ModelLoadingError {
        ModelLoadingError(code, path: path, line: node.line, message: message)
    }

    mutating func warn(at node: XcodeModelXMLNode, _ message: String) {
        warnings.append("\(path):\(node.line): \(message)")
    }

    /// Warns about each XML attribute of `node` that is neither mapped (`known`) nor
    /// deliberately ignored (`ignored`: code generation and editor settings that
    /// have no effect on the stored data).
    mutating func checkAttributes(of node: XcodeModelXMLNode, known: Set<String>, ignored: Set<String> = [], in context: String) {
        for name in node.attributes.keys.sorted() where !known.contains(name) && !ignored.contains(name) {
            warn(at: node, "\(context): the XML attribute \(name)=\"\(node.attributes[name] ?? "")\" is not understood and was ignored")
        }
    }

    /// The value of a required XML attribute.
    func required(_ attribute: String, of node: XcodeModelXMLNode, in context: String) throws -> String {
        guard let value = node[attribute], !value.isEmpty else {
            throw error(.missingValue, at: node, "\(context) has no \(attribute)")
        }
        return value
    }

    // MARK: - The model

    /// Reads the `<model>` root and everything in it.
    mutating func build(_ root: XcodeModelXMLNode) throws -> ModelDefinition {
        guard root.name == "model" else {
            throw error(.notAModel, at: root, "the root element is <\(root.name)>, not <model>: this is not a Core Data model file")
        }
        checkAttributes(of: root, known: ["userDefinedModelVersionIdentifier", "type", "documentVersion"], ignored: [
            "name", "lastSavedToolsVersion", "systemVersion", "minimumToolsVersion", "sourceLanguage",
            "macOSVersion", "iOSVersion", "watchOSVersion", "tvOSVersion", "visionOSVersion", "usedWithSwiftData",
            "usedWithCloudKit",
        ], in: "model")
        if let type = root["type"], type != "com.apple.IDECoreDataModeler.DataModel" {
            warn(at: root, "model: unexpected type \"\(type)\"; read as an Xcode data model")
        }
        if let version = root["documentVersion"], version != "1.0" {
            warn(at: root, "model: document version \(version) is not the 1.0 this loader knows; read as 1.0")
        }

        var output = ModelDefinition()
        if let identifier = root["userDefinedModelVersionIdentifier"], !identifier.isEmpty {
            output.versionIdentifiers = [identifier]
        }
        var configurationNodes: [XcodeModelXMLNode] = []
        for child in root.children {
            switch child.name {
            case "entity":
                let entity = try readEntity(child)
                declared.append((entity, child))
            case "configuration":
                configurationNodes.append(child)
            case "fetchRequest":
                recordFetchRequest(child, owner: nil)
                warn(at: child, "fetch request template \(child["name"] ?? "?") is not part of the model here; it is listed in fetchRequestTemplates")
            case "elements":
                break   // the diagram layout of the model editor
            default:
                warn(at: child, "model: the element <\(child.name)> is not understood and was ignored")
            }
        }
        output.entities = declared.map(\.entity)
        try resolveEntities()
        let model = ManagedObjectModel(entities: output.entities)
        try resolveRelationships(in: model)
        try checkPropertyReferences(in: model)
        output.configurations = try readConfigurations(configurationNodes, model: model)
        // `model` only served to resolve names; the caller adopts the entities into its own model.
        return output
    }

    // MARK: - Entities

    private mutating func readEntity(_ node: XcodeModelXMLNode) throws -> EntityDescription {
        let name = try required("name", of: node, in: "an <entity>")
        let context = "entity \(name)"
        checkAttributes(of: node, known: [
            "name", "representedClassName", "parentEntity", "isAbstract", "renamingIdentifier", "elementID",
            "versionHashModifier",
        ], ignored: ["syncable", "codeGenerationType"], in: context)

        let entity = EntityDescription(name: name, managedObjectClass: ManagedObject.self)
        entity.managedObjectClassName = node["representedClassName"]
        entity.isAbstract = node.flag("isAbstract")
        // Xcode writes the editor's "Renaming ID" as elementID; older files use renamingIdentifier.
        entity.renamingIdentifier = node["renamingIdentifier"] ?? node["elementID"]
        entity.versionHashModifier = node["versionHashModifier"]

        var properties: [PropertyDescription] = []
        var names = Set<String>()
        for child in node.children {
            var property: PropertyDescription?
            switch child.name {
            case "attribute":
                property = try readAttribute(child, entity: name)
            case "relationship":
                property = try readRelationship(child, entity: name)
            case "fetchedProperty":
                let propertyName = child["name"] ?? "?"
                for request in child.children where request.name == "fetchRequest" {
                    recordFetchRequest(request, owner: "\(name).\(propertyName)")
                }
                warn(at: child, "\(context): fetched property \(propertyName) is not supported and was left out; its request is listed in fetchRequestTemplates")
            case "userInfo":
                entity.userInfo.merge(readUserInfo(child, in: context)) { _, new in new }
            case "uniquenessConstraints":
                entity.uniquenessConstraints += readUniquenessConstraints(child, in: context)
            case "fetchIndex":
                entity.indexes.append(try readFetchIndex(child, in: context))
            case "compoundIndexes":
                entity.indexes += readCompoundIndexes(child, in: context, existing: entity.indexes.count)
            case "compositeAttribute":
                throw error(.unknownAttributeType, at: child,
                            "\(context): composite attribute \(child["name"] ?? "?") is not supported; flatten it into separate attributes")
            default:
                warn(at: child, "\(context): the element <\(child.name)> is not understood and was ignored")
            }
            guard let property else { continue }
            if !names.insert(property.name).inserted {
                throw error(.inconsistentModel, at: child, "\(context) declares two properties named \(property.name)")
            }
            properties.append(property)
        }
        entity.properties = properties
        return entity
    }

    /// Builds the inheritance tree from the `parentEntity` names.
    private mutating func resolveEntities() throws {
        var byName: [String: EntityDescription] = [:]
        for (entity, node) in declared {
            if byName.updateValue(entity, forKey: entity.name) != nil {
                throw error(.inconsistentModel, at: node, "the model declares two entities named \(entity.name)")
            }
        }
        var children: [ObjectIdentifier: [EntityDescription]] = [:]
        for (entity, node) in declared {
            guard let parentName = node["parentEntity"], !parentName.isEmpty else { continue }
            guard let parent = byName[parentName] else {
                throw error(.danglingReference, at: node, "entity \(entity.name) inherits from \(parentName), which the model does not declare")
            }
            // Walk up from the parent: meeting the entity again means a cycle.
            var ancestor: String? = parentName
            var steps = 0
            while let current = ancestor {
                if current == entity.name || steps > declared.count {
                    throw error(.inconsistentModel, at: node, "entity \(entity.name) inherits from itself through \(parentName)")
                }
                ancestor = declared.first { $0.entity.name == current }?.node["parentEntity"]
                steps += 1
            }
            children[ObjectIdentifier(parent), default: []].append(entity)
        }
        for (entity, _) in declared {
            if let subentities = children[ObjectIdentifier(entity)] { entity.subentities = subentities }
        }
        for (entity, node) in declared {
            if let clash = entity.propertyOverridingAnAncestor {
                throw error(.inconsistentModel, at: node,
                            "entity \(entity.name) declares \(clash.name), which it already inherits; Core Data does not allow overriding properties")
            }
        }
    }

    // MARK: - Entity children

    mutating func readUserInfo(_ node: XcodeModelXMLNode, in context: String) -> [String: String] {
        var info: [String: String] = [:]
        for entry in node.children {
            guard entry.name == "entry", let key = entry["key"] else {
                warn(at: entry, "\(context): userInfo holds <\(entry.name)> without a key; ignored")
                continue
            }
            info[key] = entry["value"] ?? ""
        }
        return info
    }

    private mutating func readUniquenessConstraints(_ node: XcodeModelXMLNode, in context: String) -> [[String]] {
        var constraints: [[String]] = []
        for constraintNode in node.children {
            guard constraintNode.name == "uniquenessConstraint" else {
                warn(at: constraintNode, "\(context): <\(constraintNode.name)> in uniquenessConstraints is not understood and was ignored")
                continue
            }
            var keys: [String] = []
            for part in constraintNode.children {
                guard part.name == "constraint", let value = part["value"], !value.isEmpty else {
                    warn(at: part, "\(context): a uniqueness constraint part without a value was ignored")
                    continue
                }
                keys.append(value)
            }
            if !keys.isEmpty { constraints.append(keys) }
        }
        return constraints
    }

    private mutating func readFetchIndex(_ node: XcodeModelXMLNode, in context: String) throws -> FetchIndexDescription {
        let name = try required("name", of: node, in: "a fetch index of \(context)")
        checkAttributes(of: node, known: ["name"], in: "\(context) fetch index \(name)")
        var properties: [String] = []
        for element in node.children {
            guard element.name == "fetchIndexElement" else {
                warn(at: element, "\(context) fetch index \(name): <\(element.name)> is not understood and was ignored")
                continue
            }
            checkAttributes(of: element, known: ["property", "type", "order"], in: "\(context) fetch index \(name)")
            guard let property = element["property"], !property.isEmpty else {
                throw error(.invalidValue, at: element,
                            "\(context) fetch index \(name): an element without a property (expression indexes are not supported)")
            }
            if let type = element["type"], type != "Binary" {
                warn(at: element, "\(context) fetch index \(name): \(type) indexes are not supported; a plain (binary) index is used")
            }
            if let order = element["order"], order != "ascending" {
                warn(at: element, "\(context) fetch index \(name): \(property) is \(order); the index is kept ascending")
            }
            properties.append(property)
        }
        return FetchIndexDescription(name: name, propertyNames: properties)
    }

    /// Reads the compound indexes of Xcode 7–8 files, which fetch indexes replaced.
    private mutating func readCompoundIndexes(_ node: XcodeModelXMLNode, in context: String, existing: Int) -> [FetchIndexDescription] {
        var indexes: [FetchIndexDescription] = []
        for indexNode in node.children where indexNode.name == "compoundIndex" {
            let properties = indexNode.children.compactMap { $0.name == "index" ? $0["value"] : nil }
            guard !properties.isEmpty else { continue }
            let name = "compoundIndex\(existing + indexes.count + 1)"
            warn(at: indexNode, "\(context): compound index (\(properties.joined(separator: ", "))) is kept as fetch index \(name)")
            indexes.append(FetchIndexDescription(name: name, propertyNames: properties))
        }
        return indexes
    }

    private mutating func recordFetchRequest(_ node: XcodeModelXMLNode, owner: String?) {
        fetchRequestTemplates.append(XcodeModelLoader.FetchRequestTemplate(
            name: node["name"] ?? "", entityName: node["entity"] ?? "", predicateFormat: node["predicateString"],
            fetchedPropertyOwner: owner, attributes: node.attributes, line: node.line))
    }

    // MARK: - Configurations

    private mutating func readConfigurations(_ nodes: [XcodeModelXMLNode], model: ManagedObjectModel) throws -> [String: [String]] {
        var configurations: [String: [String]] = [:]
        for node in nodes {
            let name = try required("name", of: node, in: "a <configuration>")
            checkAttributes(of: node, known: ["name"], ignored: ["usedWithCloudKit"], in: "configuration \(name)")
            var members: [String] = []
            for member in node.children {
                guard member.name == "memberEntity" else {
                    warn(at: member, "configuration \(name): <\(member.name)> is not understood and was ignored")
                    continue
                }
                let entityName = try required("name", of: member, in: "a member of configuration \(name)")
                guard model.entitiesByName[entityName] != nil else {
                    throw error(.danglingReference, at: member, "configuration \(name) names entity \(entityName), which the model does not declare")
                }
                members.append(entityName)
            }
            configurations[name, default: []] += members
        }
        return configurations
    }
}
