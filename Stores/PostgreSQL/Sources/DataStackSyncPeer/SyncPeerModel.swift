import DataStack

/// The replica's model, built in code so that the peer needs no resources:
/// `Company` (name, employees, symbol; tags; staff), `Tag` (label; companies)
/// and `Person` (name; employer). Every object carries `key`, a name its
/// creating peer chose (`c.A.7.12`) and never changes, so that a dump and the
/// edit log name objects the same way on every replica.
///
/// `Company.tags` travels as adds and removes (it sorts before its inverse
/// `Tag.companies`); `Person.employer` carries `Company.staff`.
enum SyncPeerModel {
    /// The model; with `unique`, `Company.symbol` is unique (a uniqueness
    /// constraint), which every replica of one hub must then agree on.
    static func make(unique: Bool) -> ManagedObjectModel {
        let company = EntityDescription(name: "Company", properties: [
            AttributeDescription(name: "key", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "employees", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "symbol", type: .string),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "companies", isToMany: true),
            RelationshipDescription(name: "staff", destination: "Person", inverse: "employer", isToMany: true),
        ])
        if unique { company.uniquenessConstraints = [["symbol"]] }
        let tag = EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "key", type: .string, isOptional: false),
            AttributeDescription(name: "label", type: .string),
            RelationshipDescription(name: "companies", destination: "Company", inverse: "tags", isToMany: true),
        ])
        let person = EntityDescription(name: "Person", properties: [
            AttributeDescription(name: "key", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            RelationshipDescription(name: "employer", destination: "Company", inverse: "staff"),
        ])
        return ManagedObjectModel(entities: [company, tag, person])
    }

    /// The entities, in the order a dump lists them.
    static let entityNames = ["Company", "Person", "Tag"]

    /// The attributes an edit may change, by entity (never `key`).
    static let editableAttributes: [String: [String]] = [
        "Company": ["name", "employees", "symbol"],
        "Tag": ["label"],
        "Person": ["name"],
    ]

    /// The key prefix of an entity's objects.
    static func prefix(of entity: String) -> String {
        switch entity {
        case "Company": "c"
        case "Tag": "t"
        default: "p"
        }
    }
}
