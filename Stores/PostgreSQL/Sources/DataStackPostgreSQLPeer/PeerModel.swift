import DataStack

/// The peer's model, built in code so that the peer needs no resources:
/// `Entry` (one per importer save, its `name` unique) and `Counter` (one row,
/// `name` "shared", that every importer save increments).
enum PeerModel {
    /// The `name` of the one counter every importer increments.
    static let sharedCounterName = "shared"

    static func make() -> ManagedObjectModel {
        let entry = EntityDescription(name: "Entry", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
        ])
        entry.uniquenessConstraints = [["name"]]
        let counter = EntityDescription(name: "Counter", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
            AttributeDescription(name: "value", type: .integer64, isOptional: false, defaultValue: .integer(0)),
        ])
        counter.uniquenessConstraints = [["name"]]
        return ManagedObjectModel(entities: [entry, counter])
    }

    /// The request for the shared counter.
    static var counterRequest: FetchRequest<ManagedObject> {
        get throws {
            FetchRequest<ManagedObject>(entityName: "Counter",
                                        predicate: try FetchPredicate(format: "name == %@", sharedCounterName))
        }
    }

    /// The names of every entry `context` can fetch, sorted.
    static func entryNames(in context: ManagedObjectContext) throws -> [String] {
        try context.fetch(FetchRequest<ManagedObject>(entityName: "Entry"))
            .map { try $0.value(forKey: "name") as? String ?? "" }.sorted()
    }

    /// The counter's value (integer attributes read back as `Int`).
    static func value(of counter: ManagedObject) throws -> Int64 {
        Int64(try counter.value(forKey: "value") as? Int ?? 0)
    }
}
