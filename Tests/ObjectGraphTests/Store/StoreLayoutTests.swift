@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) @testable import DataStackStorage
@_spi(StoreImplementation) @testable import DataStackStores
import Foundation
@_spi(StoreImplementation) @testable import ObjectGraph
import Testing

/// `StoreLayout` is the SQLite store's own layout, written in a dialect: in
/// SQLite's it creates exactly what the store creates. (Another dialect's
/// layout is tested with its store: Stores/PostgreSQL's PostgreSQLDialectTests.)
@Suite struct StoreLayoutTests {
    /// Every table and index of a file (but SQLite's own), with its SQL.
    private func schemaObjects(_ url: URL) throws -> [String: String] {
        let statement = try RawStore.open(url).prepare(
            "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")
        var objects: [String: String] = [:]
        while try statement.step() { objects[statement.string(at: 0) ?? ""] = statement.string(at: 1) ?? "" }
        return objects
    }

    @Test("in SQLite's dialect it creates exactly the tables and indexes the SQLite store creates for the model")
    func sqliteLayoutIsTheStoresOwn() throws {
        let directory = TemporaryDirectory()
        let model = GraphTestModel.make()
        let storeURL = directory.file("store.sqlite")
        try PersistentStoreCoordinator(managedObjectModel: model).addPersistentStore(type: .sqlite, at: storeURL)
        let store = try schemaObjects(storeURL)

        let layoutURL = directory.file("layout.sqlite")
        let connection = try Connection(path: layoutURL.path)
        for sql in try StoreLayout(model: GraphTestModel.make(), configurationName: nil, dialect: .sqlite).creationStatements() {
            try connection.execute(sql)
        }
        let layout = try schemaObjects(layoutURL)
        #expect(layout.count > 5)
        #expect(layout.filter { store[$0.key] != $0.value }.isEmpty, "every statement is the store's, word for word")
        // The store adds only what it keeps for itself: the model cache.
        #expect(Set(store.keys).subtracting(layout.keys) == ["Z_MODELCACHE"])
    }

    @Test("a value binds in the stores' storage form")
    func storedValues() {
        #expect(StoredValue(.bool(true)) == .integer(1))
        #expect(StoredValue(.date(Date(timeIntervalSinceReferenceDate: 12.5))) == .real(12.5))
        #expect(StoredValue(.uri(URL(string: "https://example.com/a")!)) == .text("https://example.com/a"))
        #expect(StoredValue(.double(.nan)) == .null)
        #expect(StoredValue(.uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))))
                == .blob(Data(1...16)))
    }
}

/// A store's own dialect plugs into the shared compiler: what it cannot write
/// reaches the caller as the predicate's error, with the dialect's reason.
@Suite struct SQLDialectPlugInTests {
    private let model = GraphTestModel.make()

    private func fetch(_ format: String, _ arguments: Any...) throws -> StoreFetch {
        StoreFetch(entity: model.entitiesByName["Author"]!, predicate: try FetchPredicate(format: format, argumentArray: arguments),
                          sortDescriptors: [], fetchLimit: 0, fetchOffset: 0, includesSubentities: true,
                          resultType: .managedObject, propertiesToFetch: nil, returnsDistinctResults: false)
    }

    @Test func whatADialectCannotWriteIsThePredicatesError() throws {
        let layout = try StoreLayout(model: model, configurationName: nil, dialect: DefaultSpellingsDialect(refusesStringTests: true))
        let error = try #require(throws: FetchPredicateError.self) { _ = try layout.query(for: fetch("name BEGINSWITH %@", "A")) }
        #expect(error.message == "this database has no BEGINSWITH")
        // What it can write, it writes: SQLite's spelling, through the defaults.
        let query = try layout.query(for: fetch("name == %@", "A"))
        #expect(query.sql.contains("?1"))
    }
}
