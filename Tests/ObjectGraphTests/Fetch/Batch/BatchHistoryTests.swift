import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// What a batch request leaves in persistent history: one transaction by the
/// executing context's author and one change per row, in the file as a raw
/// SQLite reader sees it and through the history API.
@Suite struct BatchHistoryTests {
    /// A tracking store with ACME (three stock updates) and BETA, saved by "seeder".
    private func seeded(_ directory: TemporaryDirectory, model: ManagedObjectModel = TestModel.make())
        throws -> (coordinator: PersistentStoreCoordinator, acme: ObjectID, beta: ObjectID) {
        let coordinator = try PersistentHistoryTests.open(directory.file("Batch.sqlite"), model: model)
        let context = PersistentHistoryTests.context(coordinator, author: "seeder")
        let (acme, beta) = try context.performAndWait {
            let acme = Company(context: context)
            acme.symbol = "ACME"
            let beta = Company(context: context)
            beta.symbol = "BETA"
            for price in [1.0, 2, 3] {
                let update = StockUpdate(context: context)
                update.price = price
                update.company = acme
            }
            try context.save()
            return (acme.objectID, beta.objectID)
        }
        return (coordinator, acme, beta)
    }

    @Test func aBatchUpdateRecordsOneTransactionAndTheUpdatedColumnsOfEachRow() throws {
        let directory = TemporaryDirectory()
        let (coordinator, acme, beta) = try seeded(directory)
        // A save changing the same two attributes of BETA, for the mask a save records.
        let saver = PersistentHistoryTests.context(coordinator, author: "saver")
        try saver.performAndWait {
            let company = try #require(saver.existingObject(with: beta) as? Company)
            company.name = "Beta"
            company.employees = 5
            try saver.save()
        }
        let batch = PersistentHistoryTests.context(coordinator, author: "repricer", name: "BatchContext")
        var request = BatchUpdateRequest(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'"),
                                         propertiesToUpdate: ["name": "Acme", "employees": .keyPath("employees") + 7])
        request.resultType = .objectIDs
        let result = try batch.performAndWait { try batch.execute(request) }

        let raw = try SQLiteReference(directory.file("Batch.sqlite"))
        #expect(try raw.rows("SELECT COUNT(*) FROM ATRANSACTION") == [["3"]])
        let changes = try raw.rows("""
            SELECT ZCHANGETYPE, ZENTITYPK, hex(ZCOLUMNS) FROM ACHANGE WHERE ZTRANSACTIONID IN (2, 3) ORDER BY ZTRANSACTIONID
            """)
        #expect(changes.count == 2)
        #expect(changes.last?.prefix(2) == ["1", "\(acme.primaryKey ?? 0)"])
        #expect(changes.first?[2] == changes.last?[2], "the batch records the columns a save of the same change records")

        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        let last = try #require(history.last)
        #expect(last.author == "repricer" && last.contextName == "BatchContext")
        #expect(last.changes?.map(\.changedObjectID) == [acme])
        #expect(last.changes?.first?.updatedProperties == ["name", "employees"])
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: [acme], historyTokens: [last.token])))

        // A column the batch sets is recorded even where the row already held the value, as its SET clause names it.
        try batch.performAndWait {
            _ = try batch.execute(BatchUpdateRequest(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'BETA'"),
                                                     propertiesToUpdate: ["employees": 5]))
        }
        let same = try #require(try coordinator.fetchHistory(.fetchHistory(after: last.token)).first)
        #expect(same.changes?.map(\.updatedProperties) == [["employees"]])
    }

    @Test func aBatchDeleteRecordsEveryDeletedRowWithItsTombstone() throws {
        let directory = TemporaryDirectory()
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        (company.properties.first { $0.name == "symbol" } as? AttributeDescription)?.preservesValueInHistoryOnDeletion = true
        let (coordinator, acme, _) = try seeded(directory, model: model)
        let context = PersistentHistoryTests.context(coordinator, author: "cleaner")
        let request = BatchDeleteRequest(fetchRequest: FetchRequest<Company>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'ACME'")))
        _ = try context.performAndWait { try context.execute(request) }

        let raw = try SQLiteReference(directory.file("Batch.sqlite"))
        // Company = entity 1, StockUpdate = 2: the company and its three cascaded updates.
        #expect(try raw.rows("SELECT ZCHANGETYPE, ZENTITY, ZTOMBSTONE0, ZCOLUMNS FROM ACHANGE WHERE ZTRANSACTIONID = 2 ORDER BY Z_PK") == [
            ["2", "1", "ACME", nil], ["2", "2", nil, nil], ["2", "2", nil, nil], ["2", "2", nil, nil],
        ])
        let last = try #require(try coordinator.fetchHistory(.fetchHistory(after: nil)).last)
        #expect(last.author == "cleaner")
        #expect(last.changes?.allSatisfy { $0.changeType == .delete } == true)
        #expect(last.changes?.first { $0.changedObjectID == acme }?.tombstone == ["symbol": .string("ACME")])
    }

    @Test func aBatchRefusedInTheStoreWritesNoHistory() throws {
        let directory = TemporaryDirectory()
        let model = TestModel.make()
        try #require(model.entitiesByName["Company"]).uniquenessConstraints = [["symbol"]]
        let (coordinator, _, _) = try seeded(directory, model: model)
        let context = PersistentHistoryTests.context(coordinator)
        // The unique index refuses the second row inside the transaction, after the first was written.
        let request = BatchUpdateRequest(entityName: "Company", propertiesToUpdate: ["symbol": "SAME", "name": "x"])
        let error = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(request) } catch { return error }
            return nil
        }
        #expect(error is ObjectGraphError)
        #expect(try coordinator.fetchHistory(.fetchHistory(after: nil)).count == 1)
        let raw = try SQLiteReference(directory.file("Batch.sqlite"))
        let rows = try raw.rows("SELECT ZSYMBOL, ZNAME, Z_OPT FROM ZCOMPANY ORDER BY ZSYMBOL")
        #expect(rows == [["ACME", nil, "1"], ["BETA", nil, "1"]], "\(rows)")
    }

    @Test func aDeleteWithoutRulesCopiesEachRowsTombstoneAndKeysContinueAfterAPurge() throws {
        let directory = TemporaryDirectory()
        let model = TestModel.make()
        let company = try #require(model.entitiesByName["Company"])
        (company.properties.first { $0.name == "symbol" } as? AttributeDescription)?.preservesValueInHistoryOnDeletion = true
        // No rules: the rows are deleted and recorded by their condition, not read one by one.
        for entity in model.entities {
            for case let relationship as RelationshipDescription in entity.properties { relationship.deleteRule = .noAction }
        }
        let (coordinator, acme, beta) = try seeded(directory, model: model)
        // Every change deleted: the next change key is Z_MAX + 1, not the table's own next key.
        #expect(try coordinator.deleteHistory(.deleteHistory(before: Date.distantFuture)) > 0)
        let raw = try SQLiteReference(directory.file("Batch.sqlite"))
        let lastKey = try #require(try raw.rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'CHANGE'").first?.first ?? nil)

        let context = PersistentHistoryTests.context(coordinator, author: "cleaner")
        var request = BatchDeleteRequest(fetchRequest: FetchRequest<Company>(entityName: "Company", predicate: try FetchPredicate(format: "symbol != nil")))
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }

        let changes = try raw.rows("SELECT Z_PK, ZCHANGETYPE, ZENTITY, ZENTITYPK, ZTOMBSTONE0, ZCOLUMNS FROM ACHANGE ORDER BY Z_PK")
        let first = try #require(Int(lastKey)) + 1
        // In the rows' key order, numbered from there.
        let deleted = [(acme, "ACME"), (beta, "BETA")].sorted { ($0.0.primaryKey ?? 0) < ($1.0.primaryKey ?? 0) }
        #expect(changes == deleted.enumerated().map { offset, row in
            ["\(first + offset)", "2", "1", "\(row.0.primaryKey ?? 0)", row.1, nil]
        })
        #expect(try raw.rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'CHANGE'") == [["\(first + 1)"]])
        let last = try #require(try coordinator.fetchHistory(.fetchHistory(after: nil)).last)
        #expect(result == .objectIDs(ContextDidSave(deletedObjectIDs: [acme, beta], historyTokens: [last.token])))
        #expect(last.changes?.map(\.tombstone) == deleted.map { ["symbol": .string($0.1)] })
        #expect(try raw.rows("SELECT COUNT(*) FROM ZSTOCKUPDATE WHERE ZCOMPANY IS NOT NULL") == [["3"]], "no action leaves the updates alone")
    }
}
