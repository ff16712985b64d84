import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// A save's updated objects changed the same way are recorded a run of
/// consecutive primary keys per statement (`SQLiteStore+HistoryUpdates.swift`),
/// as inserts are: each object still has exactly one `ACHANGE` row, with its
/// own changed columns, and the keys of the changes leave no gap.
@Suite struct HistoryUpdateRunsTests {
    @Test func updatesChangedTheSameWayAreRecordedEachWithItsColumns() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("History.sqlite")
        let coordinator = try PersistentHistoryTests.open(url)
        let context = PersistentHistoryTests.context(coordinator)
        // Which properties each of 14 companies changes in the second save: runs of
        // keys changed alike, broken by one changed otherwise, lone rows, an untouched one.
        let plan: [Set<String>] = [["name"], ["name"], ["name"], ["name"], ["employees"], ["name"], ["name"], [],
                                   ["name"], ["employees", "name"], ["employees", "name"], ["employees", "name"], ["name"], ["active"]]
        let ids = try context.performAndWait {
            let companies = plan.indices.map { index -> Company in
                let company = Company(context: context)
                company.symbol = "C\(index)"
                return company
            }
            try context.save()
            // Changed in an order other than the keys'.
            for (index, company) in companies.enumerated().reversed() {
                if plan[index].contains("name") { company.name = "Company \(index)" }
                if plan[index].contains("employees") { company.employees = index + 1 }
                if plan[index].contains("active") { company.active = false }  // true by default
            }
            try context.save()
            return companies.map(\.objectID)
        }
        let history = try coordinator.fetchHistory(.fetchHistory(after: nil))
        #expect(history.count == 2)
        let changes = try #require(history.last?.changes)
        #expect(changes.allSatisfy { $0.changeType == .update })
        #expect(changes.count == plan.filter { !$0.isEmpty }.count)
        var recorded: [ObjectID: Set<String>] = [:]
        for change in changes { recorded[change.changedObjectID, default: []].formUnion(change.updatedProperties ?? []) }
        #expect(recorded == Dictionary(uniqueKeysWithValues: zip(ids, plan).filter { !$0.1.isEmpty }))
        let first = try #require(history.first?.changes?.map(\.changeID).max())
        #expect(changes.map(\.changeID).sorted() == Array((first + 1)...(first + Int64(changes.count))))
        #expect(try SQLiteReference(url).rows("SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = 16001") == [[String(first + Int64(changes.count))]])
    }
}
