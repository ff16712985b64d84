@_spi(DataStackInternal) import DataStackSupport
import Foundation

// MARK: - Setting up

extension StackManager {
    /// Opens (or creates) the store and builds the two coordinators and the main context.
    ///
    /// - Parameters:
    ///   - model: the model; it is frozen by the coordinators.
    ///   - storeURL: the SQLite file; nil for ``defaultStoreURL``. A URL of
    ///     another scheme (`postgresql://`) opens the store type registered for
    ///     it (``ObjectGraph/StoreType/register(_:forURLScheme:)``) when
    ///     `storeType` is left at `.sqlite`.
    ///   - seedDatabaseURL: a store copied to `storeURL` (with its `-wal` and
    ///     `-shm` files) when no store exists there yet, as RestKit does. It
    ///     wins over `options.seedDatabaseURL` when both are given.
    ///   - storeType: `.sqlite` (the default). A type whose stores share their
    ///     location (``ObjectGraph/StoreType/isShared``: SQLite, PostgreSQL) gets
    ///     the two-coordinator stack; `.inMemory` and other types use one
    ///     coordinator for everything.
    ///   - options: how the store is opened; the default,
    ///     ``ObjectGraph/StoreOptions/stackDefaults``, migrates a store written
    ///     with an older model version, records persistent history (which grows
    ///     until ``purgeHistory(olderThan:)``) and merges other processes'
    ///     saves. Both coordinators open the migrated file. Progress of a migration reaches `options.migrationProgress`
    ///     and ``migrationProgress``.
    /// - Throws: ``StackError/Code/alreadySetUp`` on a second call,
    ///   ``StackError/Code/closed`` after ``close()``,
    ///   ``PersistentStoreError`` saying what is wrong with the location or the
    ///   file, or why a migration failed (the store is left as it was), or the
    ///   model's validation error.
    ///
    /// The store is opened, and migrated, on a queue of its own: the caller's
    /// thread — the main thread of an app — never waits on the disk.
    public func setup(model: ManagedObjectModel, storeURL: URL? = nil, seedDatabaseURL: URL? = nil,
                      storeType: StoreType = .sqlite, options: StoreOptions = .stackDefaults) async throws {
        try state.withLock { state in
            if state.closing != nil {
                throw StackError(.closed, message: "the stack was closed (close()); make a new StackManager to open the store again")
            }
            if state.setup != nil || state.isSettingUp {
                throw StackError(.alreadySetUp, message: "the stack is already set up; call resetPersistentStores() to start over")
            }
            state.isSettingUp = true
        }
        defer { finishMigrationProgress() }
        do {
            var storeOptions = options
            storeOptions.seedDatabaseURL = seedDatabaseURL ?? options.seedDatabaseURL
            storeOptions.migrationProgress = reportingMigrationProgress(to: options.migrationProgress)
            let setup = try await Self.onSetupQueue { [self, storeOptions] in
                let createsStore = Self.createsStore(at: storeURL, options: storeOptions)
                let setup = try makeSetup(model: model, storeURL: storeURL, storeType: storeType, options: storeOptions)
                try resetHistoryBookmark(for: setup, fromStart: createsStore)
                return setup
            }
            state.withLock { state in
                setup.mainContext.isReadOnly = state.isMainContextReadOnly
                state.setup = setup
                state.isSettingUp = false
            }
            installObservers(for: setup)
        } catch {
            state.withLock { $0.isSettingUp = false }
            throw error
        }
    }

    /// Sets up with the model the classes declare (``ObjectGraph/ManagedObjectModel/init(classes:)``):
    ///
    /// ```swift
    /// try await StackManager.default.setup(classes: [Company.self, StockUpdate.self], storeURL: url)
    /// ```
    ///
    /// The other parameters are those of ``setup(model:storeURL:seedDatabaseURL:storeType:options:)``;
    /// a store written with an earlier version of the classes' model is
    /// migrated, as for any model.
    ///
    /// - Throws: ``ObjectGraph/ModelDeclarationError`` naming the class and
    ///   property when the classes declare no valid model, or what
    ///   ``setup(model:storeURL:seedDatabaseURL:storeType:options:)`` throws.
    public func setup(classes: [ManagedObject.Type], storeURL: URL? = nil, seedDatabaseURL: URL? = nil,
                      storeType: StoreType = .sqlite, options: StoreOptions = .stackDefaults) async throws {
        let model = try ManagedObjectModel(classes: classes)
        try await setup(model: model, storeURL: storeURL, seedDatabaseURL: seedDatabaseURL, storeType: storeType, options: options)
    }

    /// Sets up with the model `NAME.xcdatamodeld` (or `NAME.xcdatamodel`) found
    /// in a bundle's resources; SwiftPM's `Bundle.module` works.
    ///
    /// - Parameter managedObjectClasses: subclasses to bind to the model's
    ///   entities by class name (see ``ManagedObjectModel/bindManagedObjectClasses(_:)``).
    /// - Throws: ``StackError/Code/modelNotFound`` naming the bundle when there is
    ///   no such model, ``ModelLoadingError`` when the model file is broken.
    public func setup(modelNamed name: String, in bundle: Bundle = .main, storeURL: URL? = nil,
                      managedObjectClasses: [ManagedObject.Type] = [], options: StoreOptions = .stackDefaults) async throws {
        guard let url = bundle.url(forResource: name, withExtension: "xcdatamodeld")
                ?? bundle.url(forResource: name, withExtension: "xcdatamodel") else {
            throw StackError(.modelNotFound, message: "no model named \(name).xcdatamodeld or \(name).xcdatamodel in the bundle at \(bundle.bundlePath)")
        }
        let model = try ManagedObjectModel(contentsOf: url)
        model.bindManagedObjectClasses(managedObjectClasses)
        try await setup(model: model, storeURL: storeURL, options: options)
    }

    /// Sets up in the background and calls `callback` on the main queue with
    /// nil, or the error that stopped it.
    public func setup(model: ManagedObjectModel, storeURL: URL? = nil, options: StoreOptions = .stackDefaults,
                      callback: @escaping @Sendable ((any Error)?) -> Void) {
        Task.detached {
            do {
                try await self.setup(model: model, storeURL: storeURL, options: options)
                DispatchQueue.main.async { callback(nil) }
            } catch {
                DispatchQueue.main.async { callback(error) }
            }
        }
    }

    /// Where a stack keeps its store when no URL is given:
    /// `$XDG_DATA_HOME/<executable>/<executable>.sqlite`, or
    /// `~/.local/share/<executable>/<executable>.sqlite`. The folders are created.
    public static var defaultStoreURL: URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            base = URL(fileURLWithPath: dataHome, isDirectory: true)
        } else {
            base = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share", isDirectory: true)
        }
        let name = URL(fileURLWithPath: CommandLine.arguments.first ?? ProcessInfo.processInfo.processName).lastPathComponent
        let folder = base.appendingPathComponent(name, isDirectory: true)
        // A failure shows when the store cannot be opened there, with the path.
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appendingPathComponent("\(name).sqlite")
    }

    /// Runs blocking store work (opening, migrating) off the caller's thread
    /// and off the cooperative thread pool, which a long migration would hold.
    static func onSetupQueue<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try work() })
            }
        }
    }

    /// The writer coordinator's options: the stack's, without remote-change
    /// notifications when a main coordinator of its own watches the file.
    /// The main coordinator opens the file the writer created, seeded or
    /// migrated: it never seeds or recreates it.
    static func mainOptions(_ options: StoreOptions) -> StoreOptions {
        var options = options
        options.seedDatabaseURL = nil
        options.recreatesStoreWhenMigrationFails = false
        return options
    }

    static func writerOptions(_ options: StoreOptions, storeType: StoreType) -> StoreOptions {
        var options = options
        if storeType.isShared { options.remoteChangeNotifications = false }
        return options
    }


    /// The store type for `storeURL`: the type registered for its scheme
    /// (``ObjectGraph/StoreType/register(_:forURLScheme:)``: `postgresql://`
    /// once DataStackPostgreSQL registered it) when the caller left the
    /// default, SQLite, and the URL is not a file's.
    static func storeType(_ storeType: StoreType, for storeURL: URL?) throws -> StoreType {
        guard storeType == .sqlite, let scheme = storeURL?.scheme?.lowercased(), scheme != "file" else { return storeType }
        guard let registered = StoreType.registered(forURLScheme: scheme) else {
            throw StackError(.unknownStoreScheme, message: "no store type is registered for \(scheme):// URLs; "
                             + "for PostgreSQL, import DataStackPostgreSQL and call PostgreSQLStore.register() before setup")
        }
        return registered
    }

    /// Whether setting up creates the store file: none is at the location, and no seed is copied there.
    static func createsStore(at storeURL: URL?, options: StoreOptions) -> Bool {
        let url = storeURL ?? defaultStoreURL
        return url.isFileURL && options.seedDatabaseURL == nil && !FileManager.default.fileExists(atPath: url.path)
    }

    func makeSetup(model: ManagedObjectModel, storeURL: URL?, storeType requestedType: StoreType, options: StoreOptions) throws -> Setup {
        let storeType = try Self.storeType(requestedType, for: storeURL)
        let url: URL? = storeType == .inMemory ? nil : (storeURL ?? Self.defaultStoreURL)
        let writer = PersistentStoreCoordinator(managedObjectModel: model)
        // The writer opens first: it creates, seeds or migrates the store. Only
        // the main coordinator watches for remote changes: they are merged there.
        try writer.addPersistentStore(type: storeType, at: url, options: Self.writerOptions(options, storeType: storeType))
        var main = writer
        if storeType.isShared {
            // The second coordinator opens the store the first one created, seeded or migrated.
            main = PersistentStoreCoordinator(managedObjectModel: model)
            try main.addPersistentStore(type: storeType, at: url, options: Self.mainOptions(options))
        }
        let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: main)
        context.name = "main"
        context.mergePolicy = .mergeByPropertyStoreTrump
        let author = Self.makeTransactionAuthor()
        context.transactionAuthor = author
        let followsHistory = main !== writer && options.persistentHistoryTracking && options.remoteChangeNotifications
            && main.persistentStores.contains { ($0 as? any PersistentHistoryStore)?.tracksPersistentHistory == true }
        return Setup(model: model, storeURL: url, storeType: storeType, options: options,
                     mainCoordinator: main, writerCoordinator: writer, mainContext: context, transactionAuthor: author,
                     followsPersistentHistory: followsHistory)
    }
}
