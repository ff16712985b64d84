import Foundation

/// Migrates a store through a list of stages, from whichever model version
/// wrote it to the current one (Core Data: `NSStagedMigrationManager`).
///
/// Use it when a change between two versions cannot be inferred, for example
/// a new required relationship whose values your code computes:
///
/// ```swift
/// let v = try ManagedObjectModel.versions(in: modelURL)     // v1 … v4
/// let hexByPost = Mutex<[String: String]>([:])
/// let manager = StagedMigrationManager(stages: [
///     .lightweight([v[0], v[1]]),
///     .custom(from: v[1], to: v[2], label: "colors become entities",
///         willMigrate: { context in          // v2: Post.hexColor still exists
///             for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
///                 let id = try post.value(forKey: "postID") as! String
///                 let hex = try post.value(forKey: "hexColor") as? String
///                 hexByPost.withLock { $0[id] = hex }
///             }
///         },
///         didMigrate: { context in           // v3: a required Post.color, empty for now
///             let colorEntity = context.persistentStoreCoordinator!.managedObjectModel.entitiesByName["Color"]!
///             for post in try context.fetch(FetchRequest<ManagedObject>(entityName: "Post")) {
///                 let id = try post.value(forKey: "postID") as! String
///                 let color = ManagedObject(entity: colorEntity, insertInto: context)
///                 try color.setValue(hexByPost.withLock { $0[id] }, forKey: "hex")
///                 try post.setValue(color, forKey: "color")
///             }
///             try context.save()
///         }),
///     .lightweight([v[2], v[3]]),
/// ])
/// var options = StoreOptions()
/// options.migratesAutomatically = true
/// options.stagedMigrationManager = manager
/// try PersistentStoreCoordinator(managedObjectModel: v[3]).addPersistentStore(type: .sqlite, at: url, options: options)
/// ```
///
/// When a SQLite store that does not match the coordinator's model is added
/// with the manager and ``StoreOptions/migratesAutomatically``:
/// 1. the stages are checked: they join end to end (each starts with the
///    model the one before ends with), no model appears twice, and the last
///    ends with the coordinator's model;
/// 2. the store file (with its write-ahead log) is copied beside itself;
/// 3. the store's model is found among the stages' models: first the one
///    whose version hashes equal the store's `NSStoreModelVersionHashes`, else
///    the newest that opens the store's tables and columns without a
///    difference (stores written by Apple's Core Data carry Apple's hashes);
/// 4. every step after it runs on the copy, one after another, each schema
///    change in its own transaction, the handlers' saves in theirs;
/// 5. when all succeed, the store's write-ahead log is folded into it (which
///    fails while another connection has it open) and the copy is renamed
///    over it. If anything fails before that, the copy is removed and the
///    store's files (the database and its `-wal`) are byte for byte as they
///    were; the store is opened for writing only at this last step.
///
/// The PostgreSQL store (`Stores/PostgreSQL`) runs the same steps inside the
/// transaction that opens it, the handlers' saves included: all or nothing too.
///
/// ``StoreOptions/migrationProgress`` reports the fraction done over all the
/// steps. Errors are ``PersistentStoreError/Code/migrationFailed`` naming the
/// stage, and, for a handler's error, carrying its description.
///
/// - Complexity: each step copies the rows of the tables it changes; the file is copied once.
///
/// ## Topics
/// - ``MigrationStage``
/// - ``validate()``
public struct StagedMigrationManager: Sendable {
    /// The stages, in the order they run.
    public let stages: [MigrationStage]

    /// A manager for these stages, oldest first. They are checked by
    /// ``validate()``, which adding a store calls.
    public init(stages: [MigrationStage]) {
        self.stages = stages
    }

    /// Checks the stages: at least one; no lightweight stage without a model;
    /// each stage starting with the model the stage before ends with; no model
    /// version twice (compared by their entities' version hashes); each model valid.
    ///
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` naming the stage.
    public func validate() throws {
        _ = try plan(url: nil)
    }

    // MARK: - The chain of versions

    /// One step between neighbouring model versions of the chain.
    @_spi(StoreImplementation)
    public struct Step {
        public let stageIndex: Int
        public let stage: MigrationStage
        public let from: ManagedObjectModel
        public let to: ManagedObjectModel
        var isCustom: Bool {
            if case .custom = stage.kind { return true }
            return false
        }
    }

    /// The stages flattened: every model once, oldest first, and the step
    /// from each to the next (`steps[i]` goes from `models[i]` to `models[i + 1]`).
    /// (Stores run it: the SQLite store on a copy of its file, the PostgreSQL
    /// store in the transaction that opens it.)
    @_spi(StoreImplementation)
    public struct Plan {
        public var models: [ManagedObjectModel] = []
        /// Where each model comes from, for messages: "model 2 of stage 1".
        public var modelNames: [String] = []
        public var steps: [Step] = []

        /// The position of `model` in the chain.
        public func index(of model: ManagedObjectModel) -> Int? {
            models.firstIndex { StagedMigrationManager.isSameVersion($0, model) }
        }
    }

    /// Builds and checks the chain.
    ///
    /// - Throws: ``PersistentStoreError/Code/migrationFailed`` naming the stage, `url` as the store's location.
    @_spi(StoreImplementation)
    public func plan(url: URL?) throws -> Plan {
        func failure(_ message: String) -> PersistentStoreError {
            PersistentStoreError(.migrationFailed, url: url,
                                 message: "the staged migration manager's stages are invalid, and the store was not changed: " + message)
        }
        guard !stages.isEmpty else { throw failure("there are no stages") }
        var plan = Plan()
        for (index, stage) in stages.enumerated() {
            let models = stage.models
            guard let first = models.first else {
                throw failure("\(stage.name(at: index)) lists no model")
            }
            for (position, model) in models.enumerated() {
                do {
                    try model.validate()
                } catch {
                    throw failure("model \(position + 1) of \(stage.name(at: index)) is invalid: \(error)")
                }
            }
            var rest = models[...]
            if let last = plan.models.last {
                guard Self.isSameVersion(last, first) else {
                    throw failure("""
                        there is a gap between \(stages[index - 1].name(at: index - 1)) and \(stage.name(at: index)): \
                        the first model of \(stage.name(at: index)) is not the last model of the stage before it \
                        (each stage must start with the model the stage before it ends with)
                        """)
                }
                rest = rest.dropFirst()
            }
            for (offset, model) in zip(rest.indices, rest) {
                if let earlier = plan.index(of: model) {
                    throw failure("""
                        model \(offset + 1) of \(stage.name(at: index)) is the same version as \(plan.modelNames[earlier]) \
                        (their entities have the same version hashes); each model version may appear once
                        """)
                }
                if let previous = plan.models.last {
                    plan.steps.append(Step(stageIndex: index, stage: stage, from: previous, to: model))
                }
                plan.models.append(model)
                plan.modelNames.append("model \(offset + 1) of \(stage.name(at: index))")
            }
        }
        return plan
    }

    /// Whether two models are the same version: the same object, or entities
    /// with the same names and version hashes (Core Data compares the models'
    /// version checksums, which are made of the same hashes).
    static func isSameVersion(_ lhs: ManagedObjectModel, _ rhs: ManagedObjectModel) -> Bool {
        lhs === rhs || lhs.entityVersionHashesByName == rhs.entityVersionHashesByName
    }
}
