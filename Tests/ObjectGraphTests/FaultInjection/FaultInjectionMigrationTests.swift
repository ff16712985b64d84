import CFaultVFS
import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// Every I/O call a lightweight migration makes fails once, one at a time:
/// opening the store throws an error naming it, the file keeps its data in
/// the old model's layout (it still opens with the old model), no temporary
/// copy is left beside it, and opening it again migrates it.
@Suite struct FaultInjectionMigrationTests {
    /// The stock-ticker model with one more (optional) attribute on Company,
    /// which lightweight migration adds as a column.
    static func modelWithSector() -> ManagedObjectModel {
        let model = TestModel.make()
        if let company = model.entitiesByName["Company"] {
            company.properties.append(AttributeDescription(name: "sector", type: .string))
        }
        return model
    }

    static var migrating: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        return options
    }

    static let operations: [(FaultPlan.Operation, Int32)] = [
        (.open, SQLITE_CANTOPEN), (.read, CFAULTVFS_IOERR_READ), (.write, CFAULTVFS_IOERR_WRITE),
        (.sync, CFAULTVFS_IOERR_FSYNC), (.truncate, CFAULTVFS_IOERR_TRUNCATE), (.fileSize, CFAULTVFS_IOERR_FSTAT),
        (.lock, CFAULTVFS_IOERR_LOCK), (.shmMap, CFAULTVFS_IOERR_SHMMAP), (.shmLock, CFAULTVFS_IOERR_SHMLOCK),
    ]

    /// A copy of the old store in a fresh folder watched by a plan.
    private struct OldStore {
        let directory = TemporaryDirectory()
        let plan: FaultPlan
        let url: URL

        init(copying template: StoreTemplate) throws {
            plan = FaultPlan(directory: directory.url)
            url = directory.file("Faults.sqlite")
            try FileManager.default.copyItem(at: template.url, to: url)
        }

        /// Opens the store with the new model, migrating it.
        func migrate() throws {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: FaultInjectionMigrationTests.modelWithSector())
            try coordinator.addPersistentStore(type: .sqlite, at: url, options: FaultInjectionMigrationTests.migrating)
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }

        /// Whether the file has the new model's column.
        func isMigrated() throws -> Bool {
            try RawStore.open(url, readOnly: true).columns(in: "ZCOMPANY").contains { $0.name == "ZSECTOR" }
        }

        /// Files in the folder other than the store and its sidecars: a migration's leftovers.
        func strayFiles() throws -> [String] {
            let kept = Set([""] + SQLiteStoreFile.sidecarSuffixes).map { url.lastPathComponent + $0 }
            return try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { !kept.contains($0) }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func eachFailingCallOfAMigrationLeavesTheOldStoreAndTheNextOpenMigrates() throws {
        let template = try StoreTemplate(companies: 20, updatesEach: 2)
        let expected = try StoreContents.read(template.url).contents

        let dryRun = try OldStore(copying: template)
        dryRun.plan.reset()
        try dryRun.migrate()
        #expect(try dryRun.isMigrated())
        let calls = dryRun.plan.callCounts(of: Self.operations.map(\.0))

        var tally = FaultTally()
        var migratedThenFailedToOpen = 0
        for (operation, code) in Self.operations {
            for call in 0..<calls[operation, default: 0] {
                let what = "migration, \(operation) call \(call + 1) failing with \(code)"
                let store = try OldStore(copying: template)
                tally.cases += 1
                store.plan.reset()
                store.plan.arm(operation, code: code, after: call)
                let failure: (any Error)? = Result { try store.migrate() }.failure
                store.plan.disarm()

                let file = try StoreContents.read(store.url)
                if !file.integrityProblems.isEmpty {
                    tally.integrityFailures += 1
                    Issue.record("\(what): the file fails integrity_check: \(file.integrityProblems)")
                }
                if file.contents != expected {
                    tally.lostCommits += 1
                    Issue.record("\(what): the file holds\n\(file.contents)\nnot\n\(expected)")
                }
                #expect(try store.strayFiles().isEmpty, "\(what): no copy is left beside the store")
                if let failure {
                    tally.errors += 1
                    if let storeError = failure as? PersistentStoreError {
                        #expect(storeError.url?.standardizedFileURL == store.url.standardizedFileURL, "\(what): the error names the store")
                    } else {
                        Issue.record("\(what): a PersistentStoreError naming the store, not \(type(of: failure)): \(failure)")
                    }
                    let reportedMigrationFailure = (failure as? PersistentStoreError)?.code == .migrationFailed
                    if try !store.isMigrated() {
                        // Still the old store: the old model opens it as it is.
                        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
                        try coordinator.addPersistentStore(type: .sqlite, at: store.url)
                        for opened in coordinator.persistentStores { try coordinator.remove(opened) }
                    } else if reportedMigrationFailure {
                        tally.wrongResults += 1
                        Issue.record("\(what): the migration reports failing, but the file has the new layout: \(failure)")
                    } else {
                        // The migration was done; reading the migrated store failed, and said so.
                        migratedThenFailedToOpen += 1
                    }
                } else if store.plan.injectedCount > 0 {
                    tally.absorbed += 1
                }
                do {
                    try store.migrate()
                    #expect(try store.isMigrated(), "\(what): opening again migrates")
                    #expect(try StoreContents.read(store.url).contents == expected, "\(what): the migrated store keeps every row")
                } catch {
                    tally.lostCommits += 1
                    Issue.record("\(what): opening again, with no fault, fails: \(error)")
                }
            }
        }
        let callList = Self.operations.compactMap { operation, _ in
            calls[operation].flatMap { $0 > 0 ? "\(operation) \($0)" : nil }
        }
        print(tally.summary("migration") + " (\(migratedThenFailedToOpen) of the errors after the migration was done, opening it)"
              + "; calls per migration: " + callList.joined(separator: ", "))
        #expect(tally.integrityFailures == 0)
        #expect(tally.lostCommits == 0)
        #expect(tally.wrongResults == 0)
    }
}

extension Result {
    /// The error, or nil for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
