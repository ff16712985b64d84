import CSQLite

extension Connection {
    /// Turns this connection's triggers on or off (`SQLITE_DBCONFIG_ENABLE_TRIGGER`):
    /// a statement prepared while they are off runs none. Other connections,
    /// and other programs, are not affected.
    ///
    /// SQLite expires every prepared statement of the connection when the
    /// setting changes; each is prepared again, on or off, the next time it runs.
    ///
    /// - Returns: Whether triggers are now enabled, as SQLite reports it.
    @discardableResult
    package func setTriggersEnabled(_ enabled: Bool) -> Bool {
        csqlite_set_triggers_enabled(db, enabled ? 1 : 0) == 1
    }
}
