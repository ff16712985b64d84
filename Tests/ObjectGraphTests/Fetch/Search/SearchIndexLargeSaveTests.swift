@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStores
import Foundation
@testable import ObjectGraph
import Testing

/// A save inserting many rows into an indexed table (an import's chunk) indexes
/// them by key ranges with the writer connection's triggers off
/// (SearchIndexMaintenance.swift, `TriggerSuspension`), and turns them on again
/// whatever happens; a save that also updates indexed rows, or a file with a
/// trigger of anyone else's, keeps them on.
@Suite struct SearchIndexLargeSaveTests {
    typealias Library = SearchIndexTests.Library

    /// More rows than `TriggerSuspension.minimumRows`, half documents, half memos (one table).
    static let rows = TriggerSuspension.minimumRows + 200

    private static func insertMany(_ library: Library, in context: ManagedObjectContext, prefix: String = "Bulk") throws {
        for number in 0..<rows {
            if number.isMultiple(of: 2) {
                try library.insert("Document", ["title": "\(prefix) document \(number)"], in: context)
            } else {
                try library.insert("Memo", ["title": "\(prefix) memo \(number)", "body": "engine \(number)"], in: context)
            }
        }
    }

    /// Renames a document with a small save: only the update trigger indexes it.
    private static func renameThroughTheTrigger(_ library: Library, from old: String, to new: String) throws {
        let context = library.context
        try context.performAndWait {
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.predicate = try FetchPredicate(format: "title == %@", old)
            try #require(try context.fetch(request).first).setValue(new, forKey: "title")
            try context.save()
        }
    }

    @Test func aLargeSaveIndexesItsRowsByKeyRangeWithTheTriggersOff() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let log = try library.statements { context in
            try Self.insertMany(library, in: context)
            try context.save()
        }
        // No trigger ran (not even its WHEN), the flag was not needed, and one range statement indexed the rows.
        #expect(!log.contains { $0.hasPrefix("-- TRIGGER") }, "\(log.filter { $0.hasPrefix("--") }.prefix(3))")
        #expect(!log.contains { $0.contains("DS_SEARCH_WRITER") })
        #expect(log.filter { $0.contains("INSERT INTO DS_SEARCH_ZDOCUMENT") && $0.contains("BETWEEN") }.count == 1)
        #expect(try library.titles("title MATCHES[search] 'bulk'", entity: "Document").count == Self.rows)
        #expect(try library.titles("body MATCHES[search] 'engine'", entity: "Memo").count == Self.rows / 2)
        try library.checkIndexIntegrity()

        // The connection's triggers are on again: a small save's rename reaches the index through the update trigger.
        try Self.renameThroughTheTrigger(library, from: "Bulk document 0", to: "Renamed afterwards")
        #expect(try library.titles("title MATCHES[search] 'afterwards'") == ["Renamed afterwards"])
        try library.checkIndexIntegrity()
    }

    @Test func aLargeSaveThatAlsoRenamesAnIndexedRowKeepsTheTriggers() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let log = try library.statements { context in
            try Self.insertMany(library, in: context)
            var request = FetchRequest<ManagedObject>(entityName: "Document")
            request.predicate = try FetchPredicate(format: "title == 'Shopping'")
            try #require(try context.fetch(request).first).setValue("Shopping list", forKey: "title")
            try context.save()
        }
        #expect(log.contains { $0.contains("DS_SEARCH_WRITER") }, "the flag sets the insert trigger aside; the update trigger runs")
        #expect(try library.titles("title MATCHES[search] 'list'") == ["Shopping list"])
        #expect(try library.titles("title MATCHES[search] 'bulk'", entity: "Document").count == Self.rows)
        try library.checkIndexIntegrity()
    }

    /// A trigger the store did not make (the app's, Core Data's) fires for every row of any save.
    @Test func aLargeSaveLeavesAnotherTriggerFiring() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        let connection = try Connection(path: library.url.path)
        try connection.execute("CREATE TABLE AUDIT (Z_PK INTEGER)")
        try connection.execute("CREATE TRIGGER audit AFTER INSERT ON ZDOCUMENT BEGIN INSERT INTO AUDIT VALUES (new.Z_PK); END")
        let context = library.context
        try context.performAndWait {
            try Self.insertMany(library, in: context)
            try context.save()
        }
        let audited = try connection.prepare("SELECT count(*) FROM AUDIT")
        #expect(try audited.step() && audited.int64(at: 0) == Int64(Self.rows))
        #expect(try library.titles("title MATCHES[search] 'bulk'", entity: "Document").count == Self.rows)
        try library.checkIndexIntegrity()
    }

    /// A large save that fails after turning the triggers off: nothing of it stays,
    /// and the triggers are on again for the next save.
    @Test func aFailedLargeSaveTurnsTheTriggersOnAgain() throws {
        let directory = TemporaryDirectory()
        let library = try Library(directory)
        try library.seed()
        // Refuses a second row with the same title (an index, not a trigger: the triggers still go off).
        let connection = try Connection(path: library.url.path)
        try connection.execute("CREATE UNIQUE INDEX ZDOCUMENT_TITLE ON ZDOCUMENT (ZTITLE)")
        let context = library.context
        #expect(throws: (any Error).self) {
            try context.performAndWait {
                try Self.insertMany(library, in: context, prefix: "Failed")
                try library.insert("Document", ["title": "Failed document 0"], in: context)
                try context.save()
            }
        }
        context.performAndWait { context.rollback() }
        #expect(try library.titles("title MATCHES[search] 'failed'", entity: "Document").isEmpty)
        try library.checkIndexIntegrity()

        try Self.renameThroughTheTrigger(library, from: "Shopping", to: "Renamed after the failure")
        #expect(try library.titles("title MATCHES[search] 'failure'") == ["Renamed after the failure"])
        try library.checkIndexIntegrity()
    }
}
