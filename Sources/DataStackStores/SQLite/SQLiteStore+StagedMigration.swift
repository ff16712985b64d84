import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// One staged migration of a store file: the stages of a
/// ``StagedMigrationManager`` run on one copy of the file, which replaces the
/// file only when every stage succeeded.
///
/// The original is not opened for writing until the end, so after any failure
/// its files are byte for byte as they were. Only then is its write-ahead log
/// folded into it: the check that no other connection has it open, without
/// which renaming over it would be unsafe (see
/// ``SQLiteStoreFile/leaveWriteAheadLog(_:)``).
struct StagedSQLiteMigration {
    let url: URL
    let configuration: StoreConfiguration
    let manager: StagedMigrationManager
    /// Why the store did not open with the coordinator's model.
    let incompatibility: PersistentStoreError

    func run() throws {
        let progress = MonotonicProgress(configuration.options.migrationProgress)
        progress.report(0)
        let plan = try manager.plan(url: url)
        guard let target = plan.index(of: configuration.model) else {
            throw failure("the coordinator's model is none of the stages' models; the last stage must end with it")
        }
        let copyURL = SQLiteStoreFile.temporarySibling(of: url, purpose: "migrating")
        // Nothing to report: the copy is ours, and a copy left behind is only litter beside the store.
        defer { try? SQLiteStoreFile.removeFiles(at: copyURL) }
        try makeCopy(at: copyURL)
        progress.report(0.02)

        let start: Int
        do {
            start = try storeModelIndex(in: plan, copy: copyURL)
        } catch let error as PersistentStoreError where error.code != .migrationFailed {
            throw failure("reading the copy of the store failed: \(error.message)", underlying: error.underlyingDescription)
        }
        guard start <= target else {
            throw failure("""
                cannot migrate backwards: the store was written with \(plan.modelNames[start]), \
                a later version than the coordinator's model (\(plan.modelNames[target]))
                """)
        }
        guard target == plan.models.count - 1 else {
            throw failure("""
                the last stage ends with \(plan.modelNames[plan.models.count - 1]), not with the coordinator's model \
                (\(plan.modelNames[target])); the last stage must end with the coordinator's model
                """)
        }
        guard start < target else {
            throw failure("the store's version hashes are those of the coordinator's model, but it does not open with it: \(incompatibility.message)")
        }
        let steps = plan.steps[start..<target]
        let share = 0.93 / Double(steps.count)
        for (number, step) in steps.enumerated() {
            let base = 0.02 + share * Double(number)
            try run(step, in: plan, copy: copyURL) { progress.report(base + share * $0) }
        }
        try swapIn(copyURL)
        progress.report(1)
    }

    // MARK: - The copy

    /// Copies the store with its log, and folds the log into the copy.
    private func makeCopy(at copyURL: URL) throws {
        do {
            // Read-only: a missing file or another program's database says so, and nothing is written.
            _ = try SQLiteStoreFile.openExisting(url, readOnly: true, busyMode: configuration.options.busyMode)
            try SQLiteStoreFile.copyFiles(from: url, to: copyURL)
            // Opening the copy in rollback-journal mode folds the copied log into it.
            _ = try SQLiteMigration.openCopy(copyURL, busyMode: configuration.options.busyMode)
        } catch let error as SQLiteError {
            throw failure("the store could not be copied: \(SQLiteMigration.reason(for: error))", underlying: "\(error)")
        } catch let error as PersistentStoreError {
            throw failure("the store could not be copied: \(error.message)", underlying: error.underlyingDescription)
        } catch {
            throw failure("the store could not be copied", underlying: "\(error)")
        }
    }

    /// Renames the migrated copy over the store, once no other connection has the store open.
    private func swapIn(_ copyURL: URL) throws {
        do {
            // The original's connection is closed (at the end of the closure) before the rename.
            let alone = try {
                let original = try SQLiteStoreFile.openExisting(url, readOnly: false, busyMode: configuration.options.busyMode)
                return SQLiteStoreFile.leaveWriteAheadLog(original)
            }()
            guard alone else {
                throw failure("another connection has the store open; close it (remove the store from other coordinators) before migrating")
            }
            try SQLiteStoreFile.swap(url, with: copyURL)
        } catch let error as PersistentStoreError where error.code != .migrationFailed {
            throw failure(error.message, underlying: error.underlyingDescription)
        }
    }

    /// Options for opening the copy: its rollback journal kept (it must stay one
    /// file), never migrated.
    private var copyOptions: StoreOptions {
        var options = StoreOptions()
        options.journalMode = .delete
        options.busyMode = configuration.options.busyMode
        // A store with history refuses saves opened without tracking: the
        // handlers' saves must be recorded as the store's other saves are.
        options.persistentHistoryTracking = configuration.options.persistentHistoryTracking
        return options
    }

    // MARK: - Finding the store's model

    /// The position in the chain of the model that wrote the store: the one
    /// whose version hashes equal the store's, else the newest the store opens
    /// with (Apple's Core Data writes other hashes than ours).
    private func storeModelIndex(in plan: StagedMigrationManager.Plan, copy copyURL: URL) throws -> Int {
        let metadata = try SQLiteStoreFile.metadata(at: copyURL)
        let name = configuration.configurationName
        if let exact = plan.models.lastIndex(where: { $0.isConfiguration(withName: name, compatibleWithStoreMetadata: metadata) }) {
            return exact
        }
        for index in plan.models.indices.reversed() where try opens(copyURL, with: plan.models[index]) {
            return index
        }
        throw failure("""
            the store's model is none of the stages' \(plan.models.count) model versions (\(incompatibility.message)); \
            a store written with a newer model version than the app's cannot be migrated backwards, \
            and one written with an older version needs a stage that starts with that version
            """)
    }

    /// Whether the store at `copyURL` opens with `model` without an incompatibility.
    private func opens(_ copyURL: URL, with model: ManagedObjectModel) throws -> Bool {
        let store = try SQLiteStore(configuration: StoreConfiguration(
            model: model, configurationName: configuration.configurationName, url: copyURL, options: copyOptions))
        do {
            try store.loadMetadata()
        } catch let error as PersistentStoreError where error.code == .incompatibleModel {
            return false
        }
        store.willRemove()
        return true
    }

    // MARK: - Steps

    /// A handler's error, with the handler's name.
    private struct HandlerFailure: Error {
        let handler: String
        let error: any Error
    }

    private func run(_ step: StagedMigrationManager.Step, in plan: StagedMigrationManager.Plan, copy copyURL: URL,
                     progress: (Double) -> Void) throws {
        let from = plan.index(of: step.from) ?? 0
        let name = "\(step.stage.name(at: step.stageIndex)), from \(plan.modelNames[from]) to \(plan.modelNames[from + 1])"
        do {
            guard case .custom(_, _, let willMigrate, let didMigrate) = step.stage.kind else {
                try migrateSchema(of: copyURL, to: step.to, requiresValues: true, progress: progress)
                return
            }
            if let willMigrate { try run(willMigrate, named: "willMigrate", model: step.from, copy: copyURL) }
            progress(0.3)
            try migrateSchema(of: copyURL, to: step.to, requiresValues: false) { progress(0.3 + 0.4 * $0) }
            if let didMigrate { try run(didMigrate, named: "didMigrate", model: step.to, copy: copyURL) }
            progress(0.9)
            try checkRequiredValues(of: copyURL, model: step.to)
            progress(1)
        } catch let failure as HandlerFailure {
            throw self.failure("\(name): its \(failure.handler) handler threw an error", underlying: "\(failure.error)")
        } catch let error as SQLiteError {
            throw failure("\(name): \(SQLiteMigration.reason(for: error))", underlying: "\(error)")
        } catch let error as PersistentStoreError {
            throw failure("\(name): \(error.message)", underlying: error.underlyingDescription)
        }
    }

    /// Migrates the copy's schema and rows to `model` in one transaction.
    private func migrateSchema(of copyURL: URL, to model: ManagedObjectModel, requiresValues: Bool,
                               progress: (Double) -> Void) throws {
        let connection = try SQLiteMigration.openCopy(copyURL, busyMode: configuration.options.busyMode)
        try connection.inWriteTransaction {
            let entities = model.entities(forConfigurationName: configuration.configurationName)
            let migration = try SQLiteMigration.inferMapping(on: connection, to: entities, url: url, requiresValues: requiresValues)
            try SQLiteMigration.migrate(connection, migration, to: model,
                                        recordsHistory: configuration.options.persistentHistoryTracking, progress: progress)
        }
    }

    /// Runs a custom stage's handler on a private-queue context over the copy
    /// opened with `model`, and saves what it left unsaved.
    private func run(_ handler: MigrationStage.Handler, named handlerName: String, model: ManagedObjectModel,
                     copy copyURL: URL) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .sqlite, configuration: configuration.configurationName,
                                                       at: copyURL, options: copyOptions)
        defer {
            // Removing only closes the store's connections; the copy is ours and checked after the stage.
            try? coordinator.remove(store)
        }
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.name = "\(handlerName) of a staged migration"
        do {
            try context.performAndWait {
                try handler(context)
                if context.hasChanges { try context.save() }
            }
        } catch {
            throw HandlerFailure(handler: handlerName, error: error)
        }
    }

    /// Checks that every row has a value for every required attribute and
    /// to-one relationship of `model`, as a custom stage must leave it.
    private func checkRequiredValues(of copyURL: URL, model: ManagedObjectModel) throws {
        let store = try SQLiteStore(configuration: StoreConfiguration(
            model: model, configurationName: configuration.configurationName, url: copyURL, options: copyOptions))
        try store.loadMetadata()
        defer { store.willRemove() }
        let schema = try store.schema
        let problems = try store.read { connection in
            // One scan per table counts every column's NULLs.
            let database = SQLiteMigratingDatabase(connection: connection)
            let snapshot = try StoreSchemaSnapshot(database: database, metadata: try SQLiteStoreFile.readMetadata(connection, url: copyURL))
            let counter = StoreRowCounter(database: database, snapshot: snapshot)
            var problems: [String] = []
            for entity in model.entities(forConfigurationName: configuration.configurationName) {
                let mapping = try schema.mapping(for: entity)
                for property in entity.properties where !property.isOptional && !property.isTransient && property.index >= 0 {
                    guard let column = mapping.columns[property.index] else { continue }   // to-many: no column
                    let empty = try counter.count(in: mapping.table, entityNumbers: mapping.numbersWithDescendants, whereNull: column.name)
                    if empty > 0 {
                        problems.append("""
                            \(entity.name).\(property.name) is a required \(property.kindName), \
                            but \(empty) \(entity.name) row\(empty == 1 ? " has" : "s have") no value for it
                            """)
                    }
                }
            }
            return problems
        }
        if !problems.isEmpty {
            throw PersistentStoreError(.migrationFailed, url: url, message: """
                after the stage, \(problems.joined(separator: "; ")) \
                (fill them in the stage's didMigrate handler, or give the attribute a default value)
                """)
        }
    }

    private func failure(_ message: String, underlying: String? = nil) -> PersistentStoreError {
        var error = PersistentStoreError(.migrationFailed, url: url,
                                         message: "staged migration failed, and the store was not changed: " + message)
        error.underlyingDescription = underlying
        return error
    }
}
