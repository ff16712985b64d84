import DataStackPostgreSQL
import Dispatch
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// Staged migration (``StagedMigrationManager``) run against the SQLite store
/// and the PostgreSQL store alike: a store written with version 1 of the
/// people model and opened with version 4 goes through a lightweight stage, a
/// custom stage whose handlers read and write rows, and another lightweight
/// stage, and must come out the same on both; a stage that fails must leave
/// the store as it was on both.
///
/// The chain (StagedMigrationContractFixtures.swift): v1 Person(personID,
/// fullName, nickname) → lightweight → v2 (+ email) → custom "split names":
/// `willMigrate` keeps each fullName and gives a nickname to those without
/// one, `didMigrate` fills the required firstName and lastName that replace
/// fullName → v3 → lightweight → v4 (+ visits, required, default 0).
@Suite("Staged migration contract", .serialized)
struct StagedMigrationContractTests {
    // MARK: - 1. Lightweight and custom stages

    @Test("lightweight and custom stages: the handlers read and write rows, each with its stage's model, and progress ends at 1",
          arguments: StoreKind.allCases)
    func stages(_ kind: StoreKind) throws {
        let location = try seedPeople(kind)
        let chain = PeopleChain()
        let reports = Mutex<[Double]>([])
        var options = chain.options
        options.migrationProgress = { fraction in reports.withLock { $0.append(fraction) } }
        let migrated = try kind.coordinator(chain.versions[3], at: location, options: options)
        #expect(chain.seen.withLock { $0 } == ["willMigrate: model 2, privateQueue", "didMigrate: model 3"])
        #expect(try people(in: makeContext(migrated)) == Self.splitPeople)
        let fractions = reports.withLock { $0 }
        #expect(fractions.last == 1.0 && fractions == fractions.sorted() && fractions.allSatisfy { (0...1).contains($0) },
                "progress is reported, never goes back, and ends at 1: \(fractions)")

        // The migrated store saves, and opens with version 4 and no migration options.
        let context = makeContext(migrated)
        try context.performAndWait {
            let person = ManagedObject(entity: try #require(migrated.managedObjectModel.entitiesByName["Person"]), insertInto: context)
            for (key, value) in ["personID": "p4", "firstName": "Edsger", "lastName": "Dijkstra"] { try person.setValue(value, forKey: key) }
            try context.save()
        }
        try close(migrated)
        let reopened = try kind.coordinator(PeopleChain.people(version: 4), at: location)
        let rows = try people(in: makeContext(reopened))
        #expect(rows.map(\.personID) == ["p1", "p2", "p3", "p4"])
        #expect(rows.last == PersonRow(personID: "p4", firstName: "Edsger", lastName: "Dijkstra", nickname: nil, visits: 0))
        try close(reopened)

        // Opening again with the manager migrates nothing: the handlers do not run again.
        let again = PeopleChain()
        try close(try kind.coordinator(again.versions[3], at: location, options: again.options))
        #expect(again.seen.withLock { $0 }.isEmpty)
    }

    // MARK: - 2. A failing stage

    @Test("a failing custom stage names the stage, and the store is as it was: version 1, every row unchanged",
          arguments: StoreKind.allCases, ["throws in willMigrate", "throws in didMigrate", "has no didMigrate"])
    func failingStage(_ kind: StoreKind, failure: String) throws {
        let location = try seedPeople(kind)
        let chain = PeopleChain(failure: failure)
        let error = try #require(expectRefusal(kind, chain.versions[3], at: location, options: chain.options))
        #expect(error.code == .migrationFailed, "\(error)")
        #expect(error.message.contains("stage 2 (custom, \"split names\")"), "\(error)")
        #expect(error.message.contains("the store was not changed"), "\(error)")
        if failure == "has no didMigrate" {
            // Checked after the stage: the schema change leaves the new required attributes empty.
            #expect(error.message.contains("Person.firstName is a required attribute, but 3 Person rows have no value for it"), "\(error)")
        } else {
            #expect(error.message.contains(failure.hasSuffix("willMigrate") ? "its willMigrate handler" : "its didMigrate handler"), "\(error)")
            #expect(error.underlyingDescription == "\(PeopleChain.HandlerError())", "\(error)")
        }
        // Both handlers saved before failing; nothing of it, nor of the stage before, is left.
        try expectPeopleUnchanged(kind, at: location)
        // And a manager whose stages succeed migrates the store afterwards.
        let working = PeopleChain()
        let migrated = try kind.coordinator(working.versions[3], at: location, options: working.options)
        #expect(try people(in: makeContext(migrated)) == Self.splitPeople)
        try close(migrated)
    }

    // MARK: - 3. A store the stages do not know

    @Test("a store written with a model none of the stages has is refused, saying so, and unchanged", arguments: StoreKind.allCases)
    func unknownVersion(_ kind: StoreKind) throws {
        let location = try kind.makeLocation()
        let seeder = try kind.coordinator(PeopleChain.stranger(), at: location)
        let context = makeContext(seeder)
        try context.performAndWait {
            let person = ManagedObject(entity: try #require(seeder.managedObjectModel.entitiesByName["Person"]), insertInto: context)
            try person.setValue("p1", forKey: "personID")
            try person.setValue(36, forKey: "age")
            try context.save()
        }
        try close(seeder)

        let chain = PeopleChain()
        let error = try #require(expectRefusal(kind, chain.versions[3], at: location, options: chain.options))
        #expect(error.code == .migrationFailed, "\(error)")
        #expect(error.message.contains("the store's model") && error.message.contains("is none of the stages' 4 model versions"), "\(error)")
        #expect(error.message.contains("the store was not changed"), "\(error)")
        if kind == .postgreSQL {
            #expect(error.message.contains("the store's model (version checksum "), "it names the store's version: \(error)")
        }
        #expect(chain.seen.withLock { $0 }.isEmpty, "no handler ran")
        let reopened = try kind.coordinator(PeopleChain.stranger(), at: location)
        let reader = makeContext(reopened)
        let ages = try reader.performAndWait {
            try reader.fetch(FetchRequest<ManagedObject>(entityName: "Person")).map { try $0.value(forKey: "age") as? Int }
        }
        #expect(ages == [36])
        try close(reopened)
    }

    // MARK: - 4. Persistent history

    @Test("with history, each stage's schema change restarts the history: after a last custom stage, its schema change and its didMigrate save are left",
          arguments: StoreKind.allCases)
    func history(_ kind: StoreKind) throws {
        var tracking = StoreOptions()
        tracking.persistentHistoryTracking = true
        let location = try seedPeople(kind, options: tracking)
        let chain = PeopleChain()
        // The chain up to version 3: the last stage is the custom one.
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.persistentHistoryTracking = true
        options.stagedMigrationManager = StagedMigrationManager(stages: Array(chain.manager.stages.prefix(2)))
        let migrated = try kind.coordinator(chain.versions[2], at: location, options: options)
        let history = try migrated.fetchHistory(.fetchHistory(after: nil))
        #expect(history.count == 2, "\(history.map { "\($0.author ?? "nil"): \($0.changes?.count ?? 0)" })")
        #expect(history.first?.author?.hasPrefix("com.apple.coredata.schemamigrator: ") == true, "\(history.map(\.author))")
        #expect(history.first?.changes?.isEmpty != false)
        let saved = try #require(history.last)
        #expect(saved.contextName == "didMigrate of a staged migration")
        let changes = saved.changes ?? []
        #expect(changes.map { "\($0.changedObjectID.entity.name) \($0.changeType)" } == Array(repeating: "Person update", count: 3))
        #expect(Set(changes.compactMap(\.updatedProperties)) == [["firstName", "lastName"]])

        // A later save is recorded after them.
        let start = try #require(try migrated.currentPersistentHistoryToken())
        let context = makeContext(migrated)
        context.transactionAuthor = "after-migration"
        try context.performAndWait {
            let ada = try #require(try context.fetch(FetchRequest<ManagedObject>(
                entityName: "Person", predicate: try FetchPredicate(format: "personID == 'p1'"))).first)
            try ada.setValue("countess", forKey: "nickname")
            try context.save()
        }
        #expect(try migrated.fetchHistory(.fetchHistory(after: start)).map(\.author) == ["after-migration"])
        try close(migrated)
    }

    // MARK: - 5. Concurrent opens (PostgreSQL)

    @Test("a coordinator opening the database while another migrates it waits, then opens it migrated: the stages ran once",
          arguments: [StoreKind.postgreSQL])
    func concurrentOpen(_ kind: StoreKind) throws {
        let location = try seedPeople(kind)
        let willMigrateRuns = Mutex(0)
        let results = Mutex<[Result<PersistentStoreCoordinator, any Error>]>([])
        let done = DispatchGroup()
        let firstIsMigrating = DispatchSemaphore(value: 0)
        for opener in 0..<2 {
            done.enter()
            DispatchQueue.global().async {
                if opener == 1 { firstIsMigrating.wait() }
                let chain = PeopleChain(beforeWillMigrate: {
                    willMigrateRuns.withLock { $0 += 1 }
                    firstIsMigrating.signal()
                    // The stage goes on once the other coordinator is waiting for the store's lock.
                    try Self.waitForAnotherSessionWaitingOnALock(at: location)
                })
                let result = Result { try kind.coordinator(chain.versions[3], at: location, options: chain.options) }
                results.withLock { $0.append(result) }
                done.leave()
            }
        }
        #expect(done.wait(timeout: .now() + 120) == .success, "the two opens finished")
        #expect(willMigrateRuns.withLock { $0 } == 1, "the stages ran once")
        for result in results.withLock({ $0 }) {
            switch result {
            case .success(let coordinator):
                #expect(try people(in: makeContext(coordinator)) == Self.splitPeople)
                try close(coordinator)
            case .failure(let error):
                Issue.record("an open failed: \(error)")
            }
        }
    }

    /// Returns once a session of the database at `location` other than the
    /// caller's waits for an advisory lock (the schema's, taken by every
    /// opening coordinator); throws after 30 s.
    private static func waitForAnotherSessionWaitingOnALock(at location: URL) throws {
        let watcher = try PostgreSQLConnection(url: location)
        defer { watcher.close() }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let waiting = try watcher.execute("""
                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """).string(row: 0, column: 0)
            if waiting != "0" { return }
            // The other coordinator's request reaches the server at a moment no event here marks.
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw PeopleChain.HandlerError()
    }
}
