import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Optimistic locking: a save whose objects changed in the store since they
/// were read conflicts, and the context's merge policy decides the outcome.
///
/// In every scenario the company starts as (name nil, employees 10, founded nil).
/// The store side changes name → "store" and employees → 50 and saves first;
/// this context changes name → "mine" and founded → `founded`, then saves.
@Suite struct MergePolicyTests {
    static let founded = Date(timeIntervalSinceReferenceDate: 86_400)

    struct Outcome: Sendable, CustomTestStringConvertible {
        let policy: MergePolicy
        let name: String
        let employees: Int
        let founded: Date?
        var testDescription: String { "\(policy)" }
    }

    /// Every store whose contexts can share a coordinator: the two built-in
    /// ones and a store written against the public API only, which settles
    /// conflicts through the same `SaveConflictResolver` (the PostgreSQL
    /// package runs these policies against its store too).
    static let storeTypes: [StoreType] = allStoreTypes + [JSONFileStore.storeType]

    /// What each policy must produce (header semantics: reference §3.2).
    static let outcomes: [Outcome] = [
        // Property by property; both changed name: this context wins.
        Outcome(policy: .mergeByPropertyObjectTrump, name: "mine", employees: 50, founded: founded),
        // Property by property; both changed name: the store wins.
        Outcome(policy: .mergeByPropertyStoreTrump, name: "store", employees: 50, founded: founded),
        // This context's whole object replaces the row: the store's employees change is lost.
        Outcome(policy: .overwrite, name: "mine", employees: 10, founded: founded),
        // This context's changes are dropped: the row stays as the store has it.
        Outcome(policy: .rollback, name: "store", employees: 50, founded: nil),
    ]

    /// Two contexts on one coordinator: works the same for every store.
    @Test(arguments: storeTypes, outcomes)
    func eachPolicyResolvesAConflictBetweenTwoContexts(type: StoreType, outcome: Outcome) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let mine = stack.newContext()
        mine.mergePolicy = outcome.policy
        let theirs = stack.newContext()
        try check(outcome, id: id, mine: mine, theirs: theirs, reader: stack.newContext())
    }

    /// Two coordinators on one SQLite file, as the writer + main stack uses them.
    @Test(arguments: outcomes)
    func eachPolicyResolvesAConflictBetweenTwoCoordinators(outcome: Outcome) throws {
        let stack = try TestStack(type: .sqlite)
        let id = try stack.seedCompanies(["A"])[0]
        let mine = stack.newContext()
        mine.mergePolicy = outcome.policy
        let other = try stack.secondCoordinator()
        let theirs = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        try check(outcome, id: id, mine: mine, theirs: theirs,
                  reader: ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try stack.secondCoordinator()))
        let row = try RawStore.texts(stack.storeURL, "SELECT coalesce(ZNAME, '-') || ':' || ZEMPLOYEES || ':' || coalesce(ZFOUNDED, '-') FROM ZCOMPANY")
        // A whole number of seconds in a TIMESTAMP (numeric affinity) column reads back as an integer.
        #expect(row == ["\(outcome.name):\(outcome.employees):\(outcome.founded.map { "\(Int($0.timeIntervalSinceReferenceDate))" } ?? "-")"])
    }

    private func check(_ outcome: Outcome, id: ObjectID, mine: ManagedObjectContext, theirs: ManagedObjectContext,
                       reader: ManagedObjectContext) throws {
        let company = try mine.performAndWait {
            var request = FetchRequest<Company>()
            request.returnsObjectsAsFaults = false
            let company = try #require(try mine.fetch(request).first)
            #expect(company.employees == 10)
            return company
        }
        try theirs.performAndWait {
            let company = try #require(try theirs.existingObject(with: id) as? Company)
            company.name = "store"
            company.employees = 50
            try theirs.save()
        }
        try mine.performAndWait {
            company.name = "mine"
            company.founded = Self.founded
            try mine.save()
            #expect(!mine.hasChanges)
            #expect(!company.hasChanges)
            #expect(company.name == outcome.name)
            #expect(company.employees == outcome.employees)
            #expect(company.founded == outcome.founded)
        }
        try reader.performAndWait {
            let stored = try #require(try reader.existingObject(with: id) as? Company)
            #expect(stored.name == outcome.name)
            #expect(stored.employees == outcome.employees)
            #expect(stored.founded == outcome.founded)
        }
        // The saved object is current again: a further change saves without conflict.
        try mine.performAndWait {
            company.symbol = "B"
            try mine.save()
        }
    }

    @Test(arguments: storeTypes)
    func theErrorPolicyThrowsTheConflictAndWritesNothing(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let mine = stack.newContext()
        #expect(mine.mergePolicy == .error, "the default, as in Core Data")
        let theirs = stack.newContext()
        let company = try mine.performAndWait { try #require(try mine.existingObject(with: id) as? Company) }
        try theirs.performAndWait { () throws in
            try #require(try theirs.existingObject(with: id) as? Company).employees = 50
            try theirs.save()
        }
        let conflict = MergeConflict(objectID: id, objectSnapshotVersion: 1, persistedSnapshotVersion: 2)
        let fresh = try mine.performAndWait { () throws in
            company.name = "mine"
            let fresh = Company(context: mine)
            fresh.symbol = "NEW"
            #expect(throws: ObjectGraphError.mergeConflict([conflict])) { try mine.save() }
            #expect(company.isUpdated && fresh.isInserted, "the changes stay in the context")
            #expect(company.name == "mine")
            return fresh
        }
        #expect("\(ObjectGraphError.mergeConflict([conflict]))".contains("was read at version 1 but the store has version 2"))

        // Nothing of that save was written.
        let reader = stack.newContext()
        try reader.performAndWait { () throws in
            #expect(try reader.count(for: FetchRequest<Company>()) == 1)
            #expect(try #require(try reader.existingObject(with: id) as? Company).name == nil)
        }

        // Choosing a policy and saving again resolves it.
        try mine.performAndWait { () throws in
            mine.mergePolicy = .mergeByPropertyObjectTrump
            try mine.save()
            #expect(company.name == "mine")
            #expect(company.employees == 50)
            #expect(!fresh.objectID.isTemporaryID)
        }
    }

    @Test func twoCoordinatorsConflictUnderTheErrorPolicy() throws {
        let stack = try TestStack(type: .sqlite)
        let id = try stack.seedCompanies(["A"])[0]
        let first = stack.newContext()
        let second = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try stack.secondCoordinator())
        let a = try first.performAndWait { try #require(try first.existingObject(with: id) as? Company) }
        let b = try second.performAndWait { try #require(try second.existingObject(with: id) as? Company) }
        try first.performAndWait {
            a.employees = 11
            try first.save()
        }
        try second.performAndWait { () throws in
            b.employees = 12
            let error = #expect(throws: ObjectGraphError.self) { try second.save() }
            guard error?.code == .mergeConflict, let conflicts = error?.mergeConflicts else { Issue.record("got \(String(describing: error))"); return }
            #expect(conflicts.map(\.objectID) == [id])
            #expect(conflicts.first?.persistedSnapshotVersion == 2)
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT ZEMPLOYEES FROM ZCOMPANY") == 11)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_OPT FROM ZCOMPANY") == 2)
    }

    @Test(arguments: storeTypes)
    func updatingARowDeletedElsewhereConflictsWithNoStoreVersion(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let mine = stack.newContext()
        let theirs = stack.newContext()
        let company = try mine.performAndWait { try #require(try mine.existingObject(with: id) as? Company) }
        try theirs.performAndWait {
            theirs.delete(try theirs.existingObject(with: id))
            try theirs.save()
        }
        try mine.performAndWait { () throws in
            company.name = "mine"
            let conflict = MergeConflict(objectID: id, objectSnapshotVersion: 1, persistedSnapshotVersion: nil)
            #expect(throws: ObjectGraphError.mergeConflict([conflict])) { try mine.save() }
            #expect("\(conflict)".hasSuffix("but the store has deleted it"))
            #expect(company.isUpdated)
        }
    }

    @Test(arguments: storeTypes)
    func deletingARowChangedElsewhereConflicts(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let mine = stack.newContext()
        let theirs = stack.newContext()
        let company = try mine.performAndWait { try mine.existingObject(with: id) }
        try theirs.performAndWait {
            try #require(try theirs.existingObject(with: id) as? Company).employees = 99
            try theirs.save()
        }
        try mine.performAndWait {
            mine.delete(company)
            #expect(throws: ObjectGraphError.mergeConflict([MergeConflict(objectID: id, objectSnapshotVersion: 1, persistedSnapshotVersion: 2)])) {
                try mine.save()
            }
            #expect(company.isDeleted)
            mine.mergePolicy = .overwrite
            try mine.save()
            #expect(try mine.count(for: FetchRequest<Company>()) == 0)
        }
    }
}
