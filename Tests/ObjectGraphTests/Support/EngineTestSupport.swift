@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Testing

// Models and helpers for the engine-core suites (Model, Object, Context, Fetch,
// Coordinator, Store). The Company/StockUpdate model lives in TestModel.swift.

/// A `Codable` value kept in a transformable attribute.
struct Tags: TransformableValue, Equatable {
    var names: [String]
    static let defaultManagedValue = Tags(names: [])
}

/// One `@Managed` property of every kind the wrapper supports.
final class Gadget: ManagedObject {
    @Managed var name: String
    @Managed var count: Int
    @Managed var small: Int16
    @Managed var medium: Int32
    @Managed var large: Int64
    @Managed var ratio: Double
    @Managed var weight: Float
    @Managed var enabled: Bool
    @Managed var created: Date
    @Managed var payload: Data
    @Managed var identifier: UUID
    @Managed var homepage: URL
    @Managed var price: Decimal
    @Managed var tags: Tags
    @Managed var nickname: String?
    @Managed var rank: Int?
    @Managed var score: Double?
    @Managed var flag: Bool?
    @Managed var seen: Date?
    @Managed var photo: Data?
    @Managed var token: UUID?
    @Managed var link: URL?
    @Managed var cost: Decimal?
    @Managed var labels: Tags?
    @Managed var box: Box?
}

final class Box: ManagedObject {
    @Managed var label: String?
    @Managed var gadgets: Set<Gadget>
}

/// Records every lifecycle hook called on it, in order.
final class Tracked: ManagedObject {
    var calls: [String] = []
    @Managed var title: String?

    override func awakeFromInsert() { calls.append("awakeFromInsert") }
    override func awakeFromFetch() { calls.append("awakeFromFetch") }
    override func willSave() { calls.append("willSave") }
    override func didSave() { calls.append("didSave") }
    override func prepareForDeletion() { calls.append("prepareForDeletion") }

    func count(of call: String) -> Int { calls.filter { $0 == call }.count }
}

enum EngineTestModel {
    /// Gadget/Box (every attribute type), Tracked (hooks), Rated (validation
    /// rules) and Asset ← Bond, Stock (an abstract parent sharing its table).
    static func make() -> ManagedObjectModel {
        func attribute(_ name: String, _ type: AttributeType) -> AttributeDescription {
            AttributeDescription(name: name, type: type)
        }
        let gadget = EntityDescription(name: "Gadget", managedObjectClass: Gadget.self, properties: [
            attribute("name", .string), attribute("count", .integer64), attribute("small", .integer16),
            attribute("medium", .integer32), attribute("large", .integer64), attribute("ratio", .double),
            attribute("weight", .float), attribute("enabled", .boolean), attribute("created", .date),
            attribute("payload", .binaryData), attribute("identifier", .uuid), attribute("homepage", .uri),
            attribute("price", .decimal), attribute("tags", .transformable),
            attribute("nickname", .string), attribute("rank", .integer64), attribute("score", .double),
            attribute("flag", .boolean), attribute("seen", .date), attribute("photo", .binaryData),
            attribute("token", .uuid), attribute("link", .uri), attribute("cost", .decimal),
            attribute("labels", .transformable),
            RelationshipDescription(name: "box", destination: "Box", inverse: "gadgets"),
        ])
        let box = EntityDescription(name: "Box", managedObjectClass: Box.self, properties: [
            attribute("label", .string),
            RelationshipDescription(name: "gadgets", destination: "Gadget", inverse: "box", isToMany: true),
        ])
        let tracked = EntityDescription(name: "Tracked", managedObjectClass: Tracked.self, properties: [
            attribute("title", .string),
        ])

        let name = AttributeDescription(name: "name", type: .string, isOptional: false)
        let score = AttributeDescription(name: "score", type: .integer32, defaultValue: .integer(5))
        score.minimumValue = .integer(0)
        score.maximumValue = .integer(10)
        let code = AttributeDescription(name: "code", type: .string, defaultValue: .string("AB"))
        code.minimumLength = 2
        code.maximumLength = 4
        code.regularExpression = "[A-Z]+"
        let ratio = AttributeDescription(name: "ratio", type: .double, defaultValue: .double(1))
        ratio.minimumValue = .double(0.5)
        ratio.maximumValue = .double(2.5)
        let rated = EntityDescription(name: "Rated", properties: [name, score, code, ratio])

        let asset = EntityDescription(name: "Asset", properties: [attribute("name", .string)])
        asset.isAbstract = true
        let bond = EntityDescription(name: "Bond", properties: [attribute("coupon", .double)])
        let stock = EntityDescription(name: "Stock", properties: [attribute("ticker", .string)])
        asset.subentities = [bond, stock]

        return ManagedObjectModel(entities: [gadget, box, tracked, rated, asset, bond, stock])
    }
}

/// Raw reads of a store file, next to the store's own connections.
enum RawStore {
    static func open(_ url: URL, readOnly: Bool = false) throws -> Connection {
        var configuration = Connection.Configuration()
        configuration.isReadOnly = readOnly
        configuration.createsIfMissing = false
        return try Connection(path: url.path, configuration: configuration)
    }

    /// The first column of the first row as an integer, nil for no row or NULL.
    static func int(_ url: URL, _ sql: String) throws -> Int64? {
        let statement = try open(url).prepare(sql)
        guard try statement.step(), !statement.isNull(at: 0) else { return nil }
        return statement.int64(at: 0)
    }

    /// The first column of the first row as text.
    static func text(_ url: URL, _ sql: String) throws -> String? {
        let statement = try open(url).prepare(sql)
        guard try statement.step() else { return nil }
        return statement.string(at: 0)
    }

    /// The first column of the first row as a blob.
    static func data(_ url: URL, _ sql: String) throws -> Data? {
        let statement = try open(url).prepare(sql)
        guard try statement.step() else { return nil }
        return statement.data(at: 0)
    }

    /// The first column of every row, as text.
    static func texts(_ url: URL, _ sql: String) throws -> [String] {
        let statement = try open(url).prepare(sql)
        var rows: [String] = []
        while try statement.step() { rows.append(statement.string(at: 0) ?? "NULL") }
        return rows
    }

    /// Runs statements on the file, as another program would.
    static func execute(_ url: URL, _ sql: String) throws {
        try open(url).execute(sql)
    }
}

extension TestStack {
    /// A second coordinator, with its own copy of the model, on the same store file.
    func secondCoordinator(options: StoreOptions = StoreOptions()) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
        return coordinator
    }

    /// Inserts companies with these symbols (employees 10, 20, …) and saves.
    @discardableResult
    func seedCompanies(_ symbols: [String]) throws -> [ObjectID] {
        let context = newContext()
        return try context.performAndWait {
            let companies = symbols.enumerated().map { index, symbol in
                let company = Company(context: context)
                company.symbol = symbol
                company.employees = (index + 1) * 10
                return company
            }
            try context.save()
            return companies.map(\.objectID)
        }
    }
}

/// Store types for tests whose behaviour must not depend on the store.
let allStoreTypes: [StoreType] = [.sqlite, .inMemory]

/// A store written with the test model holding one company, `SAVED`, with 42
/// employees and one price update; closed again.
func makeStoreWithOneSavedCompany(in directory: TemporaryDirectory) throws -> URL {
    let url = directory.file("Existing.sqlite")
    let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
    let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    try context.performAndWait {
        let company = Company(context: context)
        company.symbol = "SAVED"
        company.employees = 42
        StockUpdate(context: context).company = company
        try context.save()
    }
    try coordinator.remove(store)
    return url
}

/// Opens a store made by ``makeStoreWithOneSavedCompany(in:)`` with the test
/// model and checks it still holds what was saved.
func expectStoreIntact(at url: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
    try coordinator.addPersistentStore(type: .sqlite, at: url)
    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    try context.performAndWait {
        let companies = try context.fetch(FetchRequest<Company>())
        #expect(companies.map(\.symbol) == ["SAVED"], sourceLocation: sourceLocation)
        #expect(companies.first?.employees == 42, sourceLocation: sourceLocation)
        #expect(companies.first?.updates.count == 1, sourceLocation: sourceLocation)
    }
}

extension ManagedObjectContext {
    /// Saves on the context's queue and returns the error instead of throwing
    /// it, for tests that save on one thread while another holds a lock.
    func saveReturningError() -> (any Error)? {
        performAndWait {
            do {
                try save()
                return nil
            } catch {
                return error
            }
        }
    }
}
