import CLibPQ

// MARK: - Transactions

extension PostgreSQLConnection {
    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` if `body` returns, or
    /// `ROLLBACK` if it throws (the error is then rethrown).
    ///
    /// ```swift
    /// try connection.transaction {
    ///     try connection.execute("UPDATE account SET balance = balance - 10 WHERE id = 1")
    ///     try connection.execute("UPDATE account SET balance = balance + 10 WHERE id = 2")
    /// }
    /// ```
    ///
    /// If a statement in `body` failed and `body` caught the error and returned anyway,
    /// PostgreSQL has already aborted the transaction: nothing is committed, and this
    /// throws instead of reporting a commit that did not happen.
    ///
    /// PostgreSQL has no nested transactions; calling this inside a transaction throws.
    ///
    /// - Throws: the error `body` threw, or a ``PostgreSQLError`` from BEGIN or COMMIT
    ///   (for example ``PostgreSQLError/Kind/serializationFailure``, after which the
    ///   whole transaction may be run again).
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        let connection = try openConnection()
        guard PQtransactionStatus(connection) == PQTRANS_IDLE else {
            throw PostgreSQLError(
                kind: .other,
                message: "transaction(_:) called while a transaction is open; PostgreSQL has no nested transactions (use a SAVEPOINT)")
        }
        try execute("BEGIN")
        let value: T
        do {
            value = try body()
        } catch {
            // The caller needs body's error, which says why the transaction failed. A
            // ROLLBACK error adds nothing it can act on: if ROLLBACK fails the
            // connection is broken, and the server rolls back a broken session's
            // transaction itself; the next call on the connection reports the break.
            _ = try? execute("ROLLBACK")
            throw error
        }
        if PQtransactionStatus(connection) == PQTRANS_INERROR {
            // Same reasoning as above: the ROLLBACK only leaves the aborted state.
            _ = try? execute("ROLLBACK")
            throw PostgreSQLError(
                kind: .other,
                message: "the transaction was rolled back because a statement in it failed (its error was caught inside the transaction)")
        }
        let commit = try execute("COMMIT")
        // COMMIT of an aborted transaction succeeds with the tag ROLLBACK.
        if let tag = PQcmdStatus(commit.result).map({ String(cString: $0) }), tag == "ROLLBACK" {
            throw PostgreSQLError(kind: .other, message: "the transaction was rolled back by the server instead of committed")
        }
        return value
    }
}
