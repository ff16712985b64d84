import DataStack
import DataStackSync
import Foundation

/// A seeded random edit script on one replica: inserts of companies, tags and
/// people, attribute edits, tag adds and removes, employer moves and deletes,
/// each its own save, with a sync every few edits. Objects are picked among
/// everything the replica holds (its own and those it pulled), so replicas
/// edit the same objects concurrently.
///
/// Every saved edit is written as a ``SyncPeerOutput/Edit`` line; a save the
/// store refuses is rolled back and written as a `failed` sync line, never as
/// an edit. (A local save onto a unique key the store holds already is not
/// refused: the importer context's `mergeByPropertyObjectTrump` merges it
/// into the holder, so with `--unique` that count stays 0.)
struct SyncPeerEditor {
    let stack: StackManager
    let engine: SyncEngine
    /// The peer's name, in the keys of the objects it inserts.
    let name: String
    let seed: UInt64
    let count: Int
    /// Edits between two syncs.
    let syncEvery: Int
    let interval: Duration

    func run() throws {
        var random = SplitMix64(seed: seed)
        for edit in 0..<count {
            do {
                try perform(edit, &random)
            } catch {
                SyncPeerOutput.write(SyncPeerOutput.Synced(sync: "edit \(edit) failed", error: "\(error)"))
            }
            if (edit + 1) % syncEvery == 0 { SyncPeerSync.once(engine, storeURL: stack.storeURL) }
            if interval > .zero { Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18 + Double(interval.components.seconds)) }
        }
        SyncPeerSync.once(engine, storeURL: stack.storeURL)
    }

    /// One save; its lines are written once it is committed.
    private func perform(_ edit: Int, _ random: inout SplitMix64) throws {
        let context = stack.importerContext()
        try context.performAndWait {
            var lines: [SyncPeerOutput.Edit] = []
            func line(_ op: String, _ object: ManagedObject, _ field: String? = nil, _ value: String? = nil) throws {
                lines.append(SyncPeerOutput.Edit(edit: edit, op: op, entity: object.entity.name,
                                                 object: try Self.key(of: object), field: field, value: value))
            }
            let companies = try Self.objects("Company", in: context)
            let tags = try Self.objects("Tag", in: context)
            let people = try Self.objects("Person", in: context)
            // The first edits make what the others need: a company, a tag, a person.
            let roll = companies.isEmpty ? 0 : tags.isEmpty ? 12 : people.isEmpty ? 20 : Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<12:
                let company = try insert("Company", edit, in: context)
                try line("insert", company)
                try set(company, "name", .string("\(name)-name-\(edit)"), line: line)
                try set(company, "employees", .integer(Int64(edit) * 10 + Int64(seed % 10)), line: line)
                try set(company, "symbol", .string("S\(Int.random(in: 0..<5, using: &random))"), line: line)
            case 12..<20:
                let tag = try insert("Tag", edit, in: context)
                try line("insert", tag)
                try set(tag, "label", .string("\(name)-label-\(edit)"), line: line)
            case 20..<30:
                let person = try insert("Person", edit, in: context)
                try line("insert", person)
                try set(person, "name", .string("\(name)-person-\(edit)"), line: line)
                let employer = companies.randomElement(using: &random)
                try person.setValue(employer, forKey: "employer")
                try line("set", person, "employer", try employer.map(Self.key(of:)))
            case 30..<60:
                let pool = [companies, tags, people].randomElement(using: &random) ?? companies
                guard let object = pool.randomElement(using: &random) else { return }
                // With `--unique` a symbol edit may move a company onto a key another holds: where
                // that one is here already the importer context's merge policy settles it (an
                // upsert); where it is not yet, the edit syncs and loses the key in the hub's
                // order (SyncEvent.uniqueKeyConflict) if the other got there first.
                let fields = SyncPeerModel.editableAttributes[object.entity.name] ?? []
                guard let field = fields.randomElement(using: &random) else { return }
                switch field {
                case "employees": try set(object, field, .integer(Int64(edit) * 10 + Int64(seed % 10)), line: line)
                case "symbol": try set(object, field, .string("S\(Int.random(in: 0..<5, using: &random))"), line: line)
                default: try set(object, field, .string("\(name)-\(field)-\(edit)"), line: line)
                }
            case 60..<72:
                guard let company = companies.randomElement(using: &random) else { return }
                let members = try Self.members(company, "tags")
                guard let tag = tags.filter({ tag in !members.contains { $0 === tag } }).randomElement(using: &random) else { return }
                try company.setValue(Set(members + [tag]), forKey: "tags")
                try line("add", company, "tags", try Self.key(of: tag))
            case 72..<80:
                guard let company = companies.filter({ (try? Self.members($0, "tags").isEmpty) == false }).randomElement(using: &random),
                      let tag = try Self.members(company, "tags").randomElement(using: &random) else { return }
                try company.setValue(Set(try Self.members(company, "tags").filter { $0 !== tag }), forKey: "tags")
                try line("remove", company, "tags", try Self.key(of: tag))
            case 80..<92:
                guard let person = people.randomElement(using: &random), let company = companies.randomElement(using: &random) else { return }
                try person.setValue(company, forKey: "employer")
                try line("set", person, "employer", try Self.key(of: company))
            default:
                let pool = [companies, tags, people].randomElement(using: &random) ?? companies
                guard let object = pool.randomElement(using: &random) else { return }
                try line("delete", object)
                context.delete(object)
            }
            do {
                try context.save()
            } catch {
                context.rollback()
                throw error
            }
            for line in lines { SyncPeerOutput.write(line) }
        }
    }

    private enum Value {
        case string(String)
        case integer(Int64)
    }

    private func set(_ object: ManagedObject, _ field: String, _ value: Value,
                     line: (String, ManagedObject, String?, String?) throws -> Void) throws {
        switch value {
        case .string(let text):
            try object.setValue(text, forKey: field)
            try line("set", object, field, text)
        case .integer(let number):
            try object.setValue(number, forKey: field)
            try line("set", object, field, String(number))
        }
    }

    private func insert(_ entity: String, _ edit: Int, in context: ManagedObjectContext) throws -> ManagedObject {
        guard let description = stack.writerCoordinator.managedObjectModel.entitiesByName[entity] else {
            throw SyncError(.notInModel, message: "the peer's model has no \(entity)")
        }
        let object = ManagedObject(entity: description, insertInto: context)
        try object.setValue("\(SyncPeerModel.prefix(of: entity)).\(name).\(seed).\(edit)", forKey: "key")
        return object
    }

    /// Every object of `entity`, by key (the order the seed's picks index).
    static func objects(_ entity: String, in context: ManagedObjectContext) throws -> [ManagedObject] {
        try context.fetch(FetchRequest<ManagedObject>(entityName: entity, predicate: nil, sortDescriptors: [FetchSort(key: "key")]))
    }

    static func members(_ object: ManagedObject, _ relationship: String) throws -> [ManagedObject] {
        let members = try object.value(forKey: relationship) as? Set<ManagedObject> ?? []
        return try members.sorted { try key(of: $0) < key(of: $1) }
    }

    static func key(of object: ManagedObject) throws -> String {
        try object.value(forKey: "key") as? String ?? "?"
    }
}

/// SplitMix64: a small seeded generator, the same sequence on every platform.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
