import Foundation
@_spi(StoreImplementation) import ObjectGraph
import Testing
import DataStackSQLite

/// `StoreLayout` is the SQLite store's own layout, written in a dialect: in
/// SQLite's it creates exactly what the store creates; in PostgreSQL's, the
/// same tables, columns and indexes in PostgreSQL's types.
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

    @Test("in PostgreSQL's dialect the same names are declared with PostgreSQL's types")
    func postgreSQLTypes() throws {
        let sqlite = try StoreLayout(model: GraphTestModel.make(), configurationName: nil, dialect: .sqlite).creationStatements()
        let postgreSQL = try StoreLayout(model: GraphTestModel.make(), configurationName: nil, dialect: .postgreSQL).creationStatements()
        #expect(postgreSQL.count == sqlite.count)
        let all = postgreSQL.joined(separator: "\n")
        for sqliteOnly in ["VARCHAR", "BLOB", "TIMESTAMP", " FLOAT", " INTEGER", "COLLATE BINARY"] {
            #expect(!all.contains(sqliteOnly), "\(sqliteOnly) in \(all)")
        }
        #expect(all.contains("Z_PK BIGINT PRIMARY KEY"))
        // Names in the same order: only the types differ.
        let names = { (sql: String) in
            sql.split { !($0.isLetter || $0.isNumber || $0 == "_") }.filter { $0.hasPrefix("Z") }.map(String.init)
        }
        #expect(postgreSQL.map(names) == sqlite.map(names))
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
