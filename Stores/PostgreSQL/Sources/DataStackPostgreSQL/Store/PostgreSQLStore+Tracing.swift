import ObjectGraph

// MARK: - Statement tracing

extension PostgreSQLStore {
    /// Starts reporting the SQL of every statement the store runs to
    /// `observer`, replacing the observer it had (``ObjectGraph/StoreOptions/statementTrace``
    /// or an earlier call); nil stops it.
    ///
    /// ```swift
    /// let store = try coordinator.addPersistentStore(type: PostgreSQLStore.storeType, at: url) as! PostgreSQLStore
    /// let statements = Mutex<[String]>([])
    /// store.traceStatements { sql in statements.withLock { $0.append(sql) } }
    /// defer { store.traceStatements(nil) }
    /// _ = try context.fetch(FetchRequest<Ticker>())   // statements: ["SELECT … FROM ZTICKER …"]
    /// ```
    ///
    /// It covers every session of the store at once, from the next statement
    /// each runs: the writer (even during a save: the save's later statements
    /// are reported), each pooled reader — those opened later too — and the
    /// standby's readers, as well as the session that asks a lost COMMIT's
    /// outcome. So calls come from several threads, at the same time;
    /// `observer` must be quick, because each statement waits for it. The text
    /// is the statement as sent, with `$1`…`$n` where parameters go (the values
    /// are never passed); a statement is reported as it is sent, whether it
    /// then succeeds or fails (see ``PostgreSQLConnection/traceStatements(_:)``
    /// for the list). The remote-change listener's session
    /// (``ObjectGraph/StoreOptions/remoteChangeNotifications``) is not reported:
    /// it runs only its `LISTEN` and heartbeats, as the SQLite store's change
    /// watcher runs only its check, which that store's trace leaves out too.
    ///
    /// With no observer, a statement costs one atomic load more.
    public func traceStatements(_ observer: (@Sendable (String) -> Void)?) {
        tracer.set(observer)
    }
}
