import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage
@_spi(StoreImplementation) import DataStackPostgreSQL
import Testing

/// The shared Core Data layout in PostgreSQL's dialect: the tables, columns
/// and indexes the SQLite store creates, in PostgreSQL's types.
@Suite struct PostgreSQLDialectTests {
    @Test("the same names are declared with PostgreSQL's types")
    func postgreSQLTypes() throws {
        let sqlite = try StoreLayout(model: StoreTestModel.make(), configurationName: nil, dialect: .sqlite).creationStatements()
        let postgreSQL = try StoreLayout(model: StoreTestModel.make(), configurationName: nil, dialect: .postgreSQL).creationStatements()
        #expect(postgreSQL.count == sqlite.count)
        let all = postgreSQL.joined(separator: "\n")
        for sqliteOnly in ["VARCHAR", "BLOB", "TIMESTAMP", " FLOAT", " INTEGER", "COLLATE BINARY"] {
            #expect(!all.contains(sqliteOnly), "\(sqliteOnly) in \(all)")
        }
        #expect(all.contains("Z_PK BIGINT PRIMARY KEY"))
        #expect(all.contains("CREATE TABLE Z_METADATA (Z_VERSION BIGINT PRIMARY KEY, Z_UUID TEXT, Z_PLIST BYTEA)"))
        // Names in the same order: only the types differ.
        let names = { (sql: String) in
            sql.split { !($0.isLetter || $0.isNumber || $0 == "_") }.filter { $0.hasPrefix("Z") }.map(String.init)
        }
        #expect(postgreSQL.map(names) == sqlite.map(names))
    }

    @Test("key arrays, typed parameters and string tests are PostgreSQL's")
    func spellings() throws {
        let dialect = PostgreSQLDialect()
        #expect(dialect.keyArray([3, 1, 2]) == .text("{3,1,2}"))
        #expect(dialect.keyMembership(parameter: 2) == "= ANY($2::bigint[])")
        #expect(dialect.parameter(4, boundTo: .string("a")) == "$4::text")
        #expect(dialect.quotedIdentifier("ZCOMPANY\"X") == "\"zcompany\"\"x\"")
        let text = SQLOperand(sql: "t0.ZNAME", family: .text)
        #expect(try dialect.stringTest(.beginsWith, text, SQLOperand(sql: "$1::text", family: .text), options: [.caseInsensitive])
                == "starts_with(lower(t0.ZNAME), lower($1::text))")
        #expect(throws: (any Error).self) {
            try dialect.stringTest(.contains, text, SQLOperand(sql: "$1::bigint", family: .numeric), options: [])
        }
        var mixed = [text, SQLOperand(sql: "$1::bigint", family: .numeric)]
        #expect(throws: (any Error).self) { try dialect.prepareComparison(&mixed) }
    }

}
