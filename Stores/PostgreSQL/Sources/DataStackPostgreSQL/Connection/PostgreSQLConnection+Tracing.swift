// MARK: - Statement tracing

extension PostgreSQLConnection {
    /// Starts reporting the SQL of every statement this session runs to
    /// `observer`, replacing the one it had; nil stops it.
    ///
    /// ```swift
    /// connection.traceStatements { sql in print("SQL:", sql) }
    /// try connection.execute("SELECT name FROM item WHERE id = $1", [PostgreSQLValue(1)])
    /// // SQL: SELECT name FROM item WHERE id = $1
    /// ```
    ///
    /// Each statement is reported as it is sent, before the server answers,
    /// whether it then succeeds or fails: ``execute(_:_:)``,
    /// ``execute(cached:_:)`` (and the `DEALLOCATE` that makes room in its
    /// cache), ``executeScript(_:)`` (the script as one text),
    /// ``transaction(_:)``'s `BEGIN`, `COMMIT` and `ROLLBACK`, `LISTEN`,
    /// ``copy(into:columns:rows:)``'s `COPY … FROM STDIN` (not the rows), and
    /// the `SET tcp_keepalives_…` a (re)connection over TCP runs. The text is
    /// the statement with `$1`…`$n` where parameters go; the values are never
    /// passed. ``ping(timeout:)``'s empty query is not a statement, and is not reported.
    ///
    /// Unlike the rest of the connection, this may be called from any thread,
    /// while another uses the session; `observer` is called on the thread
    /// running the statement, which waits for it, so it must be quick.
    public func traceStatements(_ observer: (@Sendable (String) -> Void)?) {
        tracer.set(observer)
    }
}
