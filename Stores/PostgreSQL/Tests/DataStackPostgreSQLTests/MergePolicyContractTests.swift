import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// The merge-policy contract, run against the SQLite store and the PostgreSQL
/// store alike: each policy settles a conflict between two coordinators the
/// same way, and the store hands its conflicts to the save's
/// `SaveConflictResolver` inside its write transaction, with the rows as they
/// are now, as the main package's `MergePolicyTests` and
/// `SaveConflictResolverContractTests` check for SQLite and in-memory.
@Suite("Merge policy contract", .serialized)
struct MergePolicyContractTests {
    static let founded = Date(timeIntervalSinceReferenceDate: 86_400)

    /// What a policy makes of the conflict of ``eachPolicySettlesAConflict(_:_:)``.
    struct Outcome: Sendable, CustomTestStringConvertible {
        let policy: MergePolicy
        let name: String
        let employees: Int
        let founded: Date?
        var testDescription: String { "\(policy)" }
    }

    static let outcomes: [Outcome] = [
        Outcome(policy: .mergeByPropertyObjectTrump, name: "mine", employees: 50, founded: founded),
        Outcome(policy: .mergeByPropertyStoreTrump, name: "store", employees: 50, founded: founded),
        Outcome(policy: .overwrite, name: "mine", employees: 10, founded: founded),
        Outcome(policy: .rollback, name: "store", employees: 50, founded: nil),
    ]

    /// A store holding company ACME (name nil, 10 employees, founded nil).
    private func seed(_ kind: StoreKind) throws -> (location: URL, model: ManagedObjectModel, id: ObjectID) {
        let model = StoreTestModel.make()
        let location = try kind.makeLocation()
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(model, at: location))
        let id = try context.performAndWait {
            let company = ManagedObject(entity: try #require(model.entitiesByName["Company"]), insertInto: context)
            try company.setValue("ACME", forKey: "symbol")
            try company.setValue(10, forKey: "employees")
            try context.save()
            return company.objectID
        }
        return (location, model, id)
    }

    /// A context on a coordinator of its own.
    private func context(_ kind: StoreKind, _ seeded: (location: URL, model: ManagedObjectModel, id: ObjectID),
                         policy: MergePolicy = .error) throws -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(seeded.model, at: seeded.location))
        context.mergePolicy = policy
        return context
    }

    /// The company as a coordinator of its own reads it: name, employees, founded.
    private func stored(_ kind: StoreKind, _ seeded: (location: URL, model: ManagedObjectModel, id: ObjectID),
                        symbol: String = "ACME") throws -> (name: String?, employees: Int?, founded: Date?) {
        let reader = try context(kind, seeded)
        return try reader.performAndWait {
            let request = FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == %@", symbol))
            let company = try #require(try reader.fetch(request).first)
            return (try company.value(forKey: "name") as? String, try company.value(forKey: "employees") as? Int,
                    try company.value(forKey: "founded") as? Date)
        }
    }

    @Test("each merge policy settles a conflict between two coordinators as Core Data defines it",
          arguments: StoreKind.allCases, outcomes)
    func eachPolicySettlesAConflict(_ kind: StoreKind, _ outcome: Outcome) throws {
        let seeded = try seed(kind)
        let mine = try context(kind, seeded, policy: outcome.policy)
        let company = try mine.performAndWait { try mine.existingObject(with: seeded.id) }
        let theirs = try context(kind, seeded)
        try theirs.performAndWait {
            let company = try theirs.existingObject(with: seeded.id)
            try company.setValue("store", forKey: "name")
            try company.setValue(50, forKey: "employees")
            try theirs.save()
        }
        try mine.performAndWait {
            try company.setValue("mine", forKey: "name")
            try company.setValue(Self.founded, forKey: "founded")
            try mine.save()
            #expect(!mine.hasChanges)
            #expect(try company.value(forKey: "name") as? String == outcome.name)
            #expect(try company.value(forKey: "employees") as? Int == outcome.employees)
        }
        let row = try stored(kind, seeded)
        #expect(row.name == outcome.name)
        #expect(row.employees == outcome.employees)
        #expect(row.founded == outcome.founded)
        // The saved object is current again: a further change saves without conflict.
        try mine.performAndWait {
            try company.setValue(11, forKey: "employees")
            try mine.save()
        }
        #expect(try stored(kind, seeded).employees == 11)
    }

    @Test("under the error policy the conflict is the save's error and nothing of the save is written",
          arguments: StoreKind.allCases)
    func theErrorPolicyWritesNothing(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let mine = try context(kind, seeded)
        let company = try mine.performAndWait { try mine.existingObject(with: seeded.id) }
        let theirs = try context(kind, seeded)
        try theirs.performAndWait {
            try theirs.existingObject(with: seeded.id).setValue(50, forKey: "employees")
            try theirs.save()
        }
        let error = try mine.performAndWait {
            try company.setValue("mine", forKey: "name")
            let fresh = ManagedObject(entity: try #require(seeded.model.entitiesByName["Company"]), insertInto: mine)
            try fresh.setValue("NEW", forKey: "symbol")
            return #expect(throws: ObjectGraphError.self) { try mine.save() }
        }
        guard let error, error.code == .mergeConflict else {
            Issue.record("expected a merge conflict, got \(String(describing: error))")
            return
        }
        let conflicts = error.mergeConflicts
        #expect(conflicts.map(\.objectSnapshotVersion) == [1])
        #expect(conflicts.map(\.persistedSnapshotVersion) == [2])
        let check = try context(kind, seeded)
        #expect(try check.performAndWait { try check.count(for: FetchRequest<ManagedObject>(entityName: "Company")) } == 1)
        #expect(try stored(kind, seeded).name == nil)
    }

    // MARK: - The store's side

    /// A resolver that keeps what it was given and answers as the test says.
    final class RecordingResolver: SaveConflictResolver, @unchecked Sendable {
        // @unchecked Sendable: a store calls it on the thread of the save the
        // test runs, before that save returns; the test reads it after.
        private(set) var received: [SaveConflicts] = []
        private let answer: (SaveConflicts) throws -> SaveChangesRequest

        init(_ answer: @escaping (SaveConflicts) throws -> SaveChangesRequest) { self.answer = answer }

        func resolve(_ conflicts: SaveConflicts) throws -> SaveChangesRequest {
            received.append(conflicts)
            return try answer(conflicts)
        }
    }

    @Test("a stale update goes to the resolver with the row as it is now, which no other writer can move meanwhile",
          arguments: StoreKind.allCases)
    func theStoreResolvesInsideItsTransaction(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let coordinator = try kind.coordinator(seeded.model, at: seeded.location)
        let store = try #require(coordinator.persistentStores.first)
        let read = try store.newValues(forObjectWith: seeded.id, in: nil)
        let theirs = try context(kind, seeded)
        try theirs.performAndWait {
            try theirs.existingObject(with: seeded.id).setValue(50, forKey: "employees")
            try theirs.save()
        }
        let name = try #require(seeded.model.entitiesByName["Company"]?.propertiesByName["name"]).index
        let employees = try #require(seeded.model.entitiesByName["Company"]?.propertiesByName["employees"]).index
        var mine = read
        mine.values[name] = .string("mine")
        let otherWriterIsKeptOut = try Self.probeForAnotherWriter(kind, seeded)
        var otherWriterWasKeptOut = false
        let resolver = RecordingResolver { conflicts in
            otherWriterWasKeptOut = try otherWriterIsKeptOut()
            var merged = try #require(conflicts.currentRows[seeded.id])
            merged.values[name] = .string("mine")
            return SaveChangesRequest(updatedObjects: [merged])
        }
        _ = try store.execute(.save(SaveChangesRequest(updatedObjects: [mine], conflictResolver: resolver)), in: nil)
        let received = try #require(resolver.received.first)
        #expect(resolver.received.count == 1)
        #expect(received.versionConflicts.map(\.persistedSnapshotVersion) == [2])
        #expect(received.currentRows[seeded.id]?.version == 2)
        #expect(received.currentRows[seeded.id]?.values[employees] == .integer(50))
        #expect(otherWriterWasKeptOut)
        let row = try stored(kind, seeded)
        #expect(row.name == "mine")
        #expect(row.employees == 50)
    }

    /// A check, made ready before the save, of whether another writer is
    /// refused now — SQLite: any write, by a coordinator that does not wait
    /// for the write lock; PostgreSQL: a lock on the conflicting row, asked
    /// for by another session without waiting.
    private static func probeForAnotherWriter(_ kind: StoreKind, _ seeded: (location: URL, model: ManagedObjectModel, id: ObjectID))
        throws -> () throws -> Bool {
        switch kind {
        case .sqlite:
            var options = StoreOptions()
            options.busyMode = .immediateError
            let impatient = ManagedObjectContext(concurrencyType: .privateQueue,
                                                 coordinator: try kind.coordinator(seeded.model, at: seeded.location, options: options))
            return {
                impatient.performAndWait {
                    do {
                        let company = ManagedObject(entity: seeded.id.entity, insertInto: impatient)
                        try company.setValue("OTHER", forKey: "symbol")
                        try impatient.save()
                        return false
                    } catch {
                        return (error as? PersistentStoreError)?.code == .busy
                    }
                }
            }
        case .postgreSQL:
            let connection = try PostgreSQLConnection(url: seeded.location)
            return {
                defer { connection.close() }
                do {
                    _ = try connection.execute("SELECT Z_PK FROM ZCOMPANY WHERE Z_PK = $1 FOR UPDATE NOWAIT",
                                               [PostgreSQLValue(seeded.id.primaryKey ?? 0)])
                    return false
                } catch let error as PostgreSQLError {
                    return error.code == "55P03"   // lock_not_available
                }
            }
        }
    }

    @Test("a row a uniqueness constraint refuses goes to the resolver, whose answer is written", arguments: StoreKind.allCases)
    func theStoreHandsAUniquenessConflictToTheResolver(_ kind: StoreKind) throws {
        let seeded = try seed(kind)
        let coordinator = try kind.coordinator(seeded.model, at: seeded.location)
        let store = try #require(coordinator.persistentStores.first)
        let entity = seeded.id.entity
        let row = try store.newValues(forObjectWith: seeded.id, in: nil)
        let employees = try #require(entity.propertiesByName["employees"]).index
        var values = ContiguousArray(repeating: PropertyValue.null, count: row.values.count)
        values[try #require(entity.propertiesByName["symbol"]).index] = .string("ACME")
        values[employees] = .integer(99)
        // A new object with the stored row's key, as a context that checked before the row was saved would send it.
        let duplicate = ManagedObject(entity: entity, insertInto: nil).objectID
        let resolver = RecordingResolver { _ in
            var merged = row
            merged.values[employees] = .integer(99)
            return SaveChangesRequest(updatedObjects: [merged])
        }
        let request = SaveChangesRequest(insertedObjects: [IncrementalStoreNode(objectID: duplicate, values: values, version: 0)],
                                         conflictResolver: resolver)
        _ = try store.execute(.save(request), in: nil)
        let received = try #require(resolver.received.first)
        #expect(received.uniquenessConflicts.map(\.entityName) == ["Company"])
        #expect(received.versionConflicts.isEmpty)
        let check = try context(kind, seeded)
        #expect(try check.performAndWait { try check.count(for: FetchRequest<ManagedObject>(entityName: "Company")) } == 1, "one row per key")
        #expect(try stored(kind, seeded).employees == 99)
    }

    /// The race the resolver exists for: another session saves a row with the
    /// same key after this context checked the constraint, and the store's
    /// unique index refuses this save's row; the context checks again inside
    /// the store's transaction (reading the store on the saving thread) and
    /// merges into the row by its policy. The other session holds its insert
    /// uncommitted until this save waits for it, so the order is forced.
    @Test("a duplicate committed after the context's check is merged inside the save under object trump")
    func aDuplicateSavedMeanwhileIsMergedInsideTheSave() throws {
        let seeded = try seed(.postgreSQL)
        let mine = try context(.postgreSQL, seeded, policy: .mergeByPropertyObjectTrump)
        try mine.performAndWait {
            let company = ManagedObject(entity: seeded.id.entity, insertInto: mine)
            try company.setValue("RACE", forKey: "symbol")
            try company.setValue(7, forKey: "employees")
        }
        let other = try PostgreSQLConnection(url: seeded.location)
        defer { other.close() }
        _ = try other.execute("BEGIN")
        _ = try other.execute("""
            INSERT INTO ZCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL, ZNAME, ZEMPLOYEES, ZACTIVE)
            SELECT 1000, Z_ENT, 1, 'RACE', 'Theirs', 1, 1 FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'
            """)
        let save = BackgroundSave(mine)
        try #require(try other.waitUntilAnotherSessionWaitsForALock(), "the save never reached the other session's uncommitted row")
        _ = try other.execute("COMMIT")
        let outcome = try #require(save.outcome(within: 20), "the save did not return within 20 s")
        #expect(outcome == nil, "\(outcome.map { "\($0)" } ?? "")")
        let check = try context(.postgreSQL, seeded)
        #expect(try check.performAndWait {
            try check.count(for: FetchRequest<ManagedObject>(entityName: "Company", predicate: try FetchPredicate(format: "symbol == 'RACE'")))
        } == 1, "one row per key")
        let row = try stored(.postgreSQL, seeded, symbol: "RACE")
        #expect(row.employees == 7, "this context's value wins")
        #expect(row.name == "Theirs", "the other session's value stays where this context set none")
        #expect(mine.performAndWait { !mine.hasChanges })
    }
}
