import Foundation
import DataStack

/// `datastack dump FILE [--entity NAME] [--where PREDICATE] [--json] [--model PATH]`:
/// every object with its attribute values and the objects its relationships
/// hold, streamed a page at a time (``ObjectPager``).
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

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json"], options: ["--model", "--entity", "--where"])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
        modelPath = parsed.values["--model"]
        entityName = parsed.values["--entity"]
        predicateFormat = parsed.values["--where"]
    }

    func run() throws {
        // A predicate that does not parse fails before the store is opened, with its offset.
        let predicate = try predicateFormat.map { try FetchPredicate(format: $0) }
        let opened = try OpenedStore(file, modelPath: modelPath)
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
                try ObjectPager(context: context, entity: entity, predicate: predicate).forEachPage { page in
                    for object in page { try write(object) }
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

    private func write(_ object: ManagedObject) throws {
        try object.loadValues()
        let properties = object.entity.slotProperties.filter { !$0.isTransient }
        let attributes = properties.compactMap { $0 as? AttributeDescription }.sorted { $0.name < $1.name }
        let relationships = properties.compactMap { $0 as? RelationshipDescription }.sorted { $0.name < $1.name }
        let id = object.objectID
        if json {
            var values: [String: Any] = [:]
            for attribute in attributes {
                values[attribute.name] = ValueFormat.json(try object.primitivePropertyValue(forKey: attribute.name))
            }
            var related: [String: Any] = [:]
            for relationship in relationships { related[relationship.name] = try Self.json(relationship, of: object) }
            Output.standard.write(try JSONText.line([
                "entity": id.entityName, "id": id.uriRepresentation().absoluteString,
                "attributes": values, "relationships": related,
            ] as [String: Any]))
        } else {
            Output.standard.write("\(ValueFormat.text(id))  \(id.uriRepresentation().absoluteString)")
            var rows = try attributes.map { [$0.name, ValueFormat.text(try object.primitivePropertyValue(forKey: $0.name))] }
            for relationship in relationships { rows.append([relationship.name, "→ " + (try Self.text(relationship, of: object))]) }
            TextTable.lines(rows, indent: "  ").forEach { Output.standard.write($0) }
            Output.standard.write("")
        }
    }

    /// The IDs a relationship holds: in order for an ordered one, by key otherwise.
    private static func ids(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> [ObjectID] {
        let ids = try object.objectIDs(forRelationshipNamed: relationship.name)
        return relationship.isOrdered ? ids : ids.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
    }

    /// Whether the model is an inferred one that could not tell this to-one's destination.
    private static func hasUnknownDestination(_ relationship: RelationshipDescription) -> Bool {
        relationship.userInfo[ManagedObjectModel.inferredDestinationUserInfoKey] == "none"
    }

    private static func json(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> Any {
        let ids = try ids(relationship, of: object)
        if relationship.isToMany { return ids.map { $0.uriRepresentation().absoluteString } }
        guard let id = ids.first else { return NSNull() }
        // A key whose destination is not known is given as the number it is.
        if hasUnknownDestination(relationship) { return Int(id.primaryKey ?? 0) }
        return id.uriRepresentation().absoluteString
    }

    private static func text(_ relationship: RelationshipDescription, of object: ManagedObject) throws -> String {
        let ids = try ids(relationship, of: object)
        if relationship.isToMany { return "[" + ids.map(ValueFormat.text).joined(separator: ", ") + "]" }
        guard let id = ids.first else { return "nil" }
        if hasUnknownDestination(relationship) { return "p\(id.primaryKey ?? 0) (destination not known)" }
        return ValueFormat.text(id)
    }
}
