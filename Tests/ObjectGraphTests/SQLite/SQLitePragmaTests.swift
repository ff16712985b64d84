import Foundation
import ObjectGraph
import Synchronization
import Testing
import DataStackSQLite
import DataStackStores

/// `SQLitePragma`: typed well-known pragmas, a checked escape hatch, and a
/// store that applies them.
@Suite struct SQLitePragmaTests {
    @Test(arguments: [
        ("foreign keys", "ON"),                  // space in the name
        ("1cache", "10"),                        // starts with a digit
        ("cache_size; DROP TABLE ZCOMPANY", "1"),
        ("cache_size", "10; DROP TABLE t"),
        ("cache_size", ""),
        ("cache_size", "'x'"),
    ])
    func aCustomPragmaWithABadNameOrValueThrowsAnErrorNamingIt(name: String, value: String) {
        let error = #expect(throws: SQLitePragmaError.self) {
            try SQLitePragma.custom(name: name, value: .keyword(value))
        }
        #expect(error?.name == name)
        #expect(error?.value == value)
        #expect(error.map { "\($0)" }?.contains("PRAGMA \(name) = \(value)") == true)
    }

    @Test(arguments: [("journal_mode", "journalMode"), ("SYNCHRONOUS", "synchronous"), ("busy_timeout", "busyMode")])
    func aPragmaThatATypedOptionSetsIsRefusedNamingTheOption(name: String, option: String) {
        let error = #expect(throws: SQLitePragmaError.self) {
            try SQLitePragma.custom(name: name, value: "delete")
        }
        #expect(error?.name == name)
        #expect(error?.message.contains("StoreOptions.\(option)") == true)
    }

    @Test func wellKnownPragmasWriteTheStatementsSQLiteDocuments() throws {
        #expect("\(SQLitePragma.pageSize(8192))" == "PRAGMA page_size = 8192")
        #expect("\(SQLitePragma.cacheSize(pages: 500))" == "PRAGMA cache_size = 500")
        #expect("\(SQLitePragma.cacheSize(kibibytes: 4000))" == "PRAGMA cache_size = -4000")
        #expect("\(SQLitePragma.walAutocheckpoint(pages: 1))" == "PRAGMA wal_autocheckpoint = 1")
        #expect("\(SQLitePragma.mmapSize(bytes: 1 << 28))" == "PRAGMA mmap_size = 268435456")
        #expect(SQLitePragma.cacheSize(pages: -3) == SQLitePragma.cacheSize(pages: 0), "negative counts count as 0")
        #expect(SQLitePragma.cacheSize(kibibytes: -3).value == .integer(0))
    }

    @Test func literalsMakeIntegerBooleanAndKeywordValues() throws {
        #expect("\(try SQLitePragma.custom(name: "user_version", value: 7))" == "PRAGMA user_version = 7")
        #expect("\(try SQLitePragma.custom(name: "recursive_triggers", value: true))" == "PRAGMA recursive_triggers = ON")
        #expect("\(try SQLitePragma.custom(name: "recursive_triggers", value: false))" == "PRAGMA recursive_triggers = OFF")
        #expect("\(try SQLitePragma.custom(name: "secure_delete", value: "FAST"))" == "PRAGMA secure_delete = FAST")
        #expect(try SQLitePragma.custom(name: "cache_size", value: -4000) == .cacheSize(kibibytes: 4000))
    }

    @Test func aNewStoreTakesItsPageSizeAndEveryConnectionItsCacheSize() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Pragmas.sqlite")
        let statements = Mutex<[String]>([])
        var options = StoreOptions()
        options.pragmas = [.cacheSize(pages: 10), .pageSize(8192), .cacheSize(kibibytes: 4000)]
        options.statementTrace = { sql in statements.withLock { $0.append(sql) } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: url, options: options)
        #expect(try RawStore.int(url, "PRAGMA page_size") == 8192)
        let pragmas = statements.withLock { $0 }.filter { $0.hasPrefix("PRAGMA cache_size") || $0.hasPrefix("PRAGMA page_size") }
        // In name order, the last of a name winning; once for the writer, once for the first reader.
        #expect(pragmas == ["PRAGMA cache_size = -4000", "PRAGMA page_size = 8192",
                            "PRAGMA cache_size = -4000", "PRAGMA page_size = 8192"])
    }
}
