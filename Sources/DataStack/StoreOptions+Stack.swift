import ObjectGraph

extension StoreOptions {
    /// The options ``StackManager`` opens its store with unless told
    /// otherwise: a store written with an older version of the model is
    /// migrated when the stack is set up, with the mapping inferred
    /// (RTCoreDataStack turns on automatic migration too). Changes that cannot
    /// be inferred need a ``StagedMigrationManager`` in
    /// ``StoreOptions/stagedMigrationManager``.
    ///
    /// Saves record persistent history and the store notices commits by other
    /// processes (``StoreOptions/persistentHistoryTracking``,
    /// ``StoreOptions/remoteChangeNotifications``), so the main context merges
    /// another process's imports as it merges its own importers'
    /// (``StackManager/followsPersistentHistory``). History grows with every
    /// save until ``StackManager/purgeHistory(olderThan:)`` deletes it; turn
    /// tracking off for a store no other process writes to and whose history
    /// nobody reads.
    ///
    /// ```swift
    /// var options = StoreOptions.stackDefaults
    /// options.recreatesStoreWhenMigrationFails = true   // a cache: start empty rather than fail
    /// try await stack.setup(model: model, options: options)
    /// ```
    public static var stackDefaults: StoreOptions {
        var options = StoreOptions()
        options.migratesAutomatically = true
        options.infersMappingModel = true
        options.persistentHistoryTracking = true
        options.remoteChangeNotifications = true
        return options
    }
}
