import Foundation
import DataStack
import DataStackSync

/// `datastack dump FILE [--entity NAME] [--where PREDICATE] [--json] [--global-ids] [--model PATH]`:
/// every object with its attribute values and the objects its relationships
/// hold, streamed a page at a time (``ObjectPager``).
///
/// `--global-ids`, for a replica (DataStackSync): objects and the objects
/// their relationships hold are named by their global IDs, and each entity's
/// objects come in the order of those IDs — what every replica calls them —
/// so two converged replicas dump the same text, though each numbers its rows
/// its own way. An object saved after the replica last recorded its changes
/// has no global ID yet: the dump refuses, naming how many, rather than print
/// a mixture.
///
/// The readable output is one block per object: its entity, key and URI,
/// then one aligned line per property, attributes first, then relationships
/// (`→`), each by name. `--json` prints one JSON object per line (JSON Lines):
/// `{"entity", "id" (URI), "attributes": {name: value}, "relationships":
/// {name: URI or [URI]}}`; values as ``ValueFormat`` describes.
struct DumpCommand: ToolCommand {
    let file: URL
    let json: Bool
    let modelPath: String?
    let entityName: String?
    let predicateFormat: String?
    let byGlobalIDs: Bool

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json", "--global-ids"], options: ["--model", "--entity", "--where"])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
        byGlobalIDs = parsed.flags.contains("--global-ids")
        modelPath = parsed.values["--model"]
        entityName = parsed.values["--entity"]
        predicateFormat = parsed.values["--where"]
    }

    func run() throws {
        // A predicate that does not parse fails before the store is opened, with its offset.
        let predicate = try predicateFormat.map { try FetchPredicate(format: $0) }
        let opened = try OpenedStore(file, modelPath: modelPath)
        let names = try byGlobalIDs ? GlobalNames(file: file, store: opened.store) : nil
        let entities = try selectedEntities(of: opened.model)
        let context = opened.makeContext()
        try context.performAndWait {
            var firstMismatch: (any Error)?
            var dumped = 0
            for entity in entities {
                if let predicate {
                    // With every entity, those whose properties the predicate does not name are left out.
                    do { try predicate.validate(for: entity) } catch {
                        if entityName != nil { throw error }
                        firstMismatch = firstMismatch ?? error
                        continue
                    }
                }
                dumped += 1
                if let names {
                    try names.forEachPage(of: entity, predicate: predicate, in: context) { page in
                        for object in page { try write(object, names: names) }
                    }
                } else {
                    try ObjectPager(context: context, entity: entity, predicate: predicate).forEachPage { page in
                        for object in page { try write(object, names: nil) }
                    }
                }
            }
            if dumped == 0, let firstMismatch {
                throw ToolError.usage("--where fits no entity of the model; the first: \(firstMismatch)")
            }
        }
    }

    /// `--entity` and its subentities, or every entity; in the model's order.
    private func selectedEntities(of model: ManagedObjectModel) throws -> [EntityDescription] {
        guard let entityName else { return model.entities }
        guard let entity = model.entitiesByName[entityName] else {
            let names = model.entities.map(\.name).sorted().joined(separator: ", ")
            throw ToolError.usage("the model has no entity \(entityName) (its entities: \(names))")
        }
        return model.entities.filter { $0.isKind(of: entity) }
    }

    /// Writes one object, named by the store's IDs or, with `names`, by global IDs.
    private func write(_ object: ManagedObject, names: GlobalNames?) throws {
        try object.loadValues()
        let properties = object.entity.slotProperties.filter { !$0.isTransient }
        let attributes = properties.compactMap { $0 as? AttributeDescription }.sorted { $0.name < $1.name }
        let relationships = properties.compactMap { $0 as? RelationshipDescription }.sorted { $0.name < $1.name }
        let id = object.objectID
        let name = try names?.name(of: id) ?? id.uriRepresentation().absoluteString
        if json {
            var values: [String: Any] = [:]
            for attribute in attributes {
                values[attribute.name] = ValueFormat.json(try object.primitivePropertyValue(forKey: attribute.name))
            }
            var related: [String: Any] = [:]
            for relationship in relationships { related[relationship.name] = try relationshipJSON(relationship, of: object, names: names) }
            Output.standard.write(try JSONText.line([
                "entity": id.entityName, "id": name, "attributes": values, "relationships": related,
            ] as [String: Any]))
        } else {
            Output.standard.write(names == nil ? "\(ValueFormat.text(id))  \(name)" : "\(id.entityName) \(name)")
            var rows = try attributes.map { [$0.name, ValueFormat.text(try object.primitivePropertyValue(forKey: $0.name))] }
            for relationship in relationships {
                rows.append([relationship.name, "→ " + (try relationshipText(relationship, of: object, names: names))])
            }
            TextTable.lines(rows, indent: "  ").forEach { Output.standard.write($0) }
            Output.standard.write("")
        }
    }

    /// What a relationship holds, each named for the output: in order for an
    /// ordered one, otherwise by key (or by global ID).
    private func members(_ relationship: RelationshipDescription, of object: ManagedObject, names: GlobalNames?) throws -> [String] {
        let ids = try object.objectIDs(forRelationshipNamed: relationship.name)
        if let names {
            let members = try ids.map(names.name(of:))
            return relationship.isOrdered ? members : members.sorted()
        }
        let sorted = relationship.isOrdered ? ids : ids.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
        return sorted.map { json ? $0.uriRepresentation().absoluteString : ValueFormat.text($0) }
    }

    /// The key of a to-one whose destination an inferred model could not tell
    /// (given as the number it is, not as an ID of some entity); nil otherwise.
    private static func keyOfUnknownDestination(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> Int64? {
        guard !relationship.isToMany,
              relationship.userInfo[ManagedObjectModel.inferredDestinationUserInfoKey] == "none" else { return nil }
        return try object.objectIDs(forRelationshipNamed: relationship.name).first.map { $0.primaryKey ?? 0 }
    }

    private func relationshipJSON(_ relationship: RelationshipDescription, of object: ManagedObject, names: GlobalNames?) throws -> Any {
        if let key = try Self.keyOfUnknownDestination(relationship, of: object) { return Int(key) }
        let members = try members(relationship, of: object, names: names)
        return relationship.isToMany ? members : (members.first.map { $0 as Any } ?? NSNull())
    }

    private func relationshipText(_ relationship: RelationshipDescription, of object: ManagedObject, names: GlobalNames?) throws -> String {
        if let key = try Self.keyOfUnknownDestination(relationship, of: object) { return "p\(key) (destination not known)" }
        let members = try members(relationship, of: object, names: names)
        return relationship.isToMany ? "[" + members.joined(separator: ", ") + "]" : members.first ?? "nil"
    }
}
