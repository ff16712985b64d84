@_spi(StoreImplementation) import DataStackStorage
@_spi(DataStackInternal) import DataStackSupport
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Statement tracing

extension SQLiteStore {
    /// Starts reporting the SQL of every statement the store runs to
    /// `observer`, replacing the observer it had (``StoreOptions/statementTrace``
    /// or an earlier call); nil stops it.
    ///
    /// ```swift
    /// let store = try coordinator.addPersistentStore(type: .sqlite, at: url) as! SQLiteStore
    /// let statements = Mutex<[String]>([])
    /// store.traceStatements { sql in statements.withLock { $0.append(sql) } }
    /// defer { store.traceStatements(nil) }
    /// _ = try context.fetch(FetchRequest<Ticker>())   // statements: ["SELECT … FROM ZTICKER …"]
    /// ```
    ///
    /// It covers every connection of the store: the writer, which takes it
    /// once a save in progress ends, and each reader — those opened later too —
    /// which takes it before its next read. So calls come from several threads,
    /// at the same time; `observer` must be quick, because each statement
    /// waits for it. The text is the statement as prepared, with `?` where
    /// values are bound (the values are never passed); inside a trigger,
    /// SQLite reports a `-- TRIGGER name` comment instead. The remote-change
    /// watcher's check is not reported (see ``StoreOptions/statementTrace``).
    ///
    /// Related SQLite documentation: <https://sqlite.org/c3ref/trace_v2.html>
    public func traceStatements(_ observer: (@Sendable (String) -> Void)?) {
        // Stored first: a reader opened from now on installs it when it opens.
        statementObserver.withLock { $0 = observer }
        readers.setTrace(observer)
        _ = writer.withConnection { $0.trace(observer) }
    }
}
