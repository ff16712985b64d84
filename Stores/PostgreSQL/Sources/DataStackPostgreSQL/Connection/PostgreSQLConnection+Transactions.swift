import CLibPQ
import Foundation

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
    /// PostgreSQL has no nested transactions; calling this inside a transaction
    /// throws, unless the session is lent to a staged migration's handlers
    /// (``nestsTransactions``): `body` then runs under a savepoint, released if
    /// it returns and rolled back to if it throws, and the open transaction goes on.
    ///
    /// - Throws: the error `body` threw, or a ``PostgreSQLError`` from BEGIN or COMMIT
    ///   (for example ``PostgreSQLError/Kind/serializationFailure``, after which the
    ///   whole transaction may be run again).
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        let connection = try openConnection()
        if nestsTransactions, PQtransactionStatus(connection) == PQTRANS_INTRANS {
            return try savepoint(body)
        }
        guard PQtransactionStatus(connection) == PQTRANS_IDLE else {
            throw PostgreSQLError(
                kind: .other,
                message: "transaction(_:) called while a transaction is open; PostgreSQL has no nested transactions (use a SAVEPOINT)")
        }
        try begin(connection)
        defer { transactionID = nil }
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
        let commit: PostgreSQLResult
        do {
            commit = try execute("COMMIT")
        } catch let error as PostgreSQLError where error.kind == .connectionLost {
            // The answer to COMMIT is lost: the transaction may have committed or not.
            guard let transactionID else { throw error }
            try resolveLostCommit(transactionID, error)
            return value
        }
        // COMMIT of an aborted transaction succeeds with the tag ROLLBACK.
        if let tag = PQcmdStatus(commit.result).map({ String(cString: $0) }), tag == "ROLLBACK" {
            throw PostgreSQLError(kind: .other, message: "the transaction was rolled back by the server instead of committed")
        }
        return value
    }

    /// Runs `body` under a savepoint of the open transaction, for ``transaction(_:)``.
    private func savepoint<T>(_ body: () throws -> T) throws -> T {
        let name = "datastack_nested_\(savepointDepth + 1)"
        _ = try execute("SAVEPOINT \(name)")
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let value: T
        do {
            value = try body()
        } catch {
            // body's error says why; a failed ROLLBACK TO leaves the outer transaction
            // aborted, which its own COMMIT then reports.
            _ = try? execute("ROLLBACK TO SAVEPOINT \(name)")
            _ = try? execute("RELEASE SAVEPOINT \(name)")
            throw error
        }
        _ = try execute("RELEASE SAVEPOINT \(name)")
        return value
    }

    /// `BEGIN`, learning the transaction's ID (``transactionID``) in the same
    /// round trip when ``verifiesCommits``.
    private func begin(_ connection: OpaquePointer) throws {
        guard verifiesCommits else {
            try execute("BEGIN")
            return
        }
        let begin = "BEGIN; SELECT pg_current_xact_id()::text"
        tracer.report(begin)
        // PQexec: the simple protocol runs both statements and returns the last one's rows.
        transactionID = try checked(PQexec(connection, begin), sql: begin).string(row: 0, column: 0)
    }

    /// Undoes everything the innermost transaction did and starts it again:
    /// `ROLLBACK` then `BEGIN`, or, in a transaction that runs as a savepoint
    /// (``nestsTransactions``), `ROLLBACK TO` its savepoint, so that the outer
    /// transaction keeps what it did before.
    ///
    /// The new transaction's ID replaces the rolled-back one's, so a COMMIT
    /// whose answer is lost is settled by the transaction it committed.
    func restartTransaction() throws {
        if savepointDepth > 0 {
            _ = try execute("ROLLBACK TO SAVEPOINT datastack_nested_\(savepointDepth)")
        } else {
            _ = try execute("ROLLBACK")
            try begin(try openConnection())
        }
    }

    /// Tells how a transaction whose COMMIT lost its answer ended, on a second
    /// session: returns when it committed; throws when it did not, or when that
    /// cannot be told (the server unreachable until the connect timeout).
    ///
    /// A transaction still in progress — its session alive on the server, the
    /// COMMIT never received (a link gone silent) — is ended first
    /// (`pg_terminate_backend`, which rolls it back), so its answer is final
    /// and its row locks go at once.
    func resolveLostCommit(_ transactionID: String, _ lost: PostgreSQLError) throws {
        let clock = ContinuousClock()
        let deadline = clock.now + (connectTimeout ?? .seconds(10))
        var lastError: any Error = lost
        while clock.now < deadline {
            do {
                // The store's session too: its statements are reported with the others.
                let check = try PostgreSQLConnection(conninfo: conninfo, settings: settings, preparedStatementCacheCapacity: 1, tracer: tracer)
                defer { check.close() }
                var status = try check.execute("SELECT pg_xact_status($1::xid8)", [.text(transactionID)]).string(row: 0, column: 0)
                if status == "in progress" {
                    _ = try check.execute("""
                        SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
                        WHERE backend_xid IS NOT NULL AND backend_xid::text::numeric = $1::numeric % 4294967296
                        """, [.text(transactionID)])
                    status = try check.execute("SELECT pg_xact_status($1::xid8)", [.text(transactionID)]).string(row: 0, column: 0)
                }
                switch status {
                case "committed":
                    return
                case "aborted":
                    throw PostgreSQLError(kind: .connectionLost, message: """
                        \(lost.message) (the connection was lost during COMMIT; the server says the transaction did not commit)
                        """, sql: "COMMIT")
                default:
                    throw PostgreSQLError(kind: .connectionLost, message: """
                        \(lost.message) (the connection was lost during COMMIT, and whether the transaction committed is \
                        unknown: the server reports \(status ?? "nothing") for transaction \(transactionID))
                        """, sql: "COMMIT")
                }
            } catch let error as PostgreSQLError where error.kind == .connectionFailed {
                lastError = error
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        throw PostgreSQLError(kind: .connectionLost, message: """
            \(lost.message) (the connection was lost during COMMIT, and the server could not be reached again to tell \
            whether the transaction committed: its outcome is unknown; last: \(lastError))
            """, sql: "COMMIT")
    }
}
