import Foundation
@_spi(StoreImplementation) import ObjectGraph
@_spi(StoreImplementation) import DataStackStorage

/// One staged migration of a PostgreSQL store: the stages of a
/// ``ObjectGraph/StagedMigrationManager`` run one after another inside the
/// transaction that opens the store, which commits only when every stage
/// succeeded — all or nothing, as the SQLite store's staged migration, which
/// runs them on a copy of its file and renames the copy over it at the end.
///
/// A custom stage's handlers get a coordinator with the stage's model whose
/// store runs every statement on the migrating session itself
/// (``PostgreSQLStore/migratingSession``): they read the tables as the
/// transaction has left them, uncommitted, which no other session can see,
/// and their saves go into the same transaction, each under a savepoint
/// (``PostgreSQLConnection/nestsTransactions``). The opening transaction holds
/// the schema's advisory lock and the open-store lock exclusively, so other
/// coordinators opening the store meanwhile wait, then find it migrated; and
/// any failure — a handler's error, a schema change, rows a stage leaves
/// without a required value — rolls back everything, so the store stays at the
/// version it had, as if never opened.
struct PostgreSQLStagedMigration {
    let store: PostgreSQLStore
    /// The session of the opening transaction.
    let connection: PostgreSQLConnection
    let manager: StagedMigrationManager
    /// How the coordinator's model differs from the store's.
    let problems: [String]

    private var configuration: StoreConfiguration { store.configuration }
    private var url: URL { store.reportedURL }

    /// Runs the stages from the model recorded in `metadata` to the
    /// coordinator's, and returns the metadata the store then has.
    func run(from metadata: StoreMetadata) throws -> StoreMetadata {
        let progress = MonotonicProgress(configuration.options.migrationProgress)
        progress.report(0)
        let plan = try manager.plan(url: url)
        guard let target = plan.index(of: configuration.model) else {
            throw failure("the coordinator's model is none of the stages' models; the last stage must end with it")
        }
        let start = try storeModelIndex(in: plan, metadata: metadata)
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
            throw failure("""
                the store's version hashes are those of the coordinator's model, but it does not open with it: \
                \(problems.joined(separator: "; "))
                """)
        }
        progress.report(0.02)
        let steps = plan.steps[start..<target]
        let share = 0.93 / Double(steps.count)
        var metadata = metadata
        for (number, step) in steps.enumerated() {
            let base = 0.02 + share * Double(number)
            metadata = try run(step, in: plan, from: metadata) { progress.report(base + share * $0) }
        }
        progress.report(0.95)
        return metadata
    }

    // MARK: - Finding the store's model

    /// The position in the chain of the model whose version hashes the
    /// store's metadata records. (The SQLite store also tries the models
    /// against the file's tables, for files Apple's Core Data wrote with its own
    /// hashes; a PostgreSQL store is only ever written by this store, with ours.)
    private func storeModelIndex(in plan: StagedMigrationManager.Plan, metadata: StoreMetadata) throws -> Int {
        let name = configuration.configurationName
        if let exact = plan.models.lastIndex(where: { $0.isConfiguration(withName: name, compatibleWithStoreMetadata: metadata) }) {
            return exact
        }
        let checksum = (metadata[StoreMetadataKey.modelVersionChecksum] as? String).map { " (version checksum \($0))" } ?? ""
        throw failure("""
            the store's model\(checksum) is none of the stages' \(plan.models.count) model versions \
            (\(problems.joined(separator: "; "))); a store written with a newer model version than the app's \
            cannot be migrated backwards, and one written with an older version needs a stage that starts with that version
            """)
    }

    // MARK: - Steps

    /// A handler's error, with the handler's name.
    private struct HandlerFailure: Error {
        let handler: String
        let error: any Error
    }

    /// Runs one step; returns the metadata the store has after it.
    private func run(_ step: StagedMigrationManager.Step, in plan: StagedMigrationManager.Plan, from metadata: StoreMetadata,
                     progress: (Double) -> Void) throws -> StoreMetadata {
        let from = plan.index(of: step.from) ?? 0
        let name = "\(step.stage.name(at: step.stageIndex)), from \(plan.modelNames[from]) to \(plan.modelNames[from + 1])"
        do {
            guard case .custom(_, _, let willMigrate, let didMigrate) = step.stage.kind else {
                return try store.migrateSchema(from: metadata, to: step.to, requiresValues: true, connection, progress: progress)
            }
            if let willMigrate { try run(willMigrate, named: "willMigrate", model: step.from) }
            progress(0.3)
            // The handler may have changed the metadata (setMetadata): the schema change starts from what it left.
            let migrated = try store.migrateSchema(from: try currentMetadata(), to: step.to, requiresValues: false, connection) {
                progress(0.3 + 0.4 * $0)
            }
            if let didMigrate { try run(didMigrate, named: "didMigrate", model: step.to) }
            progress(0.9)
            try checkRequiredValues(of: step.to)
            progress(1)
            return didMigrate == nil ? migrated : try currentMetadata()
        } catch let failure as HandlerFailure {
            throw self.failure("\(name): its \(failure.handler) handler threw an error", underlying: "\(failure.error)")
        } catch let error as PostgreSQLError {
            throw failure("\(name): \(PostgreSQLStore.reason(for: error))", underlying: "\(error)")
        } catch let error as PersistentStoreError {
            throw failure("\(name): \(error.message)", underlying: error.underlyingDescription)
        }
    }

    /// Runs a custom stage's handler on a private-queue context whose
    /// coordinator has `model` and a store on the migrating session, and saves
    /// what it left unsaved.
    private func run(_ handler: MigrationStage.Handler, named handlerName: String, model: ManagedObjectModel) throws {
        let session = connection
        // The store type's name, so that the metadata's NSStoreType matches; its stores run on the session.
        let type = StoreType(rawValue: PostgreSQLStore.storeType.rawValue, isShared: true) {
            try PostgreSQLStore(configuration: $0, migratingSession: session)
        }
        var options = StoreOptions()
        // A store with history refuses saves opened without tracking: the
        // handlers' saves are recorded as the store's other saves are.
        options.persistentHistoryTracking = configuration.options.persistentHistoryTracking
        session.nestsTransactions = true
        defer { session.nestsTransactions = false }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let handlerStore = try coordinator.addPersistentStore(type: type, configuration: configuration.configurationName,
                                                              at: store.databaseURL, options: options)
        defer {
            // Removing a store on the migrating session closes nothing: the session is the migration's.
            try? coordinator.remove(handlerStore)
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

    /// The metadata as the migrating transaction has it now.
    private func currentMetadata() throws -> StoreMetadata {
        try PostgreSQLStore.storedMetadata(connection)
    }

    /// Checks that every row has a value for every required attribute and
    /// to-one relationship of `model`, as a custom stage must leave it.
    private func checkRequiredValues(of model: ManagedObjectModel) throws {
        let layout = try StoreLayout(model: model, configurationName: configuration.configurationName, dialect: .postgreSQL)
        let problems = try layout.rowsMissingRequiredValues(in: PostgreSQLMigratingDatabase(connection: connection))
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
