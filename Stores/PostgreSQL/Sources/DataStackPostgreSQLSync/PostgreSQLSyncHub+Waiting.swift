import DataStackPostgreSQL
import DataStackSync
import Synchronization

// MARK: - Waiting for changes

extension PostgreSQLSyncHub {
    /// True: ``waitForChanges(after:timeout:)`` waits for a push's `NOTIFY`.
    public var notifiesChanges: Bool { true }

    /// Waits until the log holds a change after `sequence`, or `timeout`
    /// passes; returns whether it does.
    ///
    /// A sync engine calls this between pulls instead of polling: it returns
    /// as soon as another replica's push commits, woken by the push's
    /// `NOTIFY datastack_sync` (PostgreSQL's LISTEN/NOTIFY), and at once when
    /// the log holds changes after `sequence` already.
    ///
    /// ```swift
    /// while running {
    ///     applied = try applyAll(hub.pull(after: applied, limit: 500))
    ///     _ = try hub.waitForChanges(after: applied, timeout: .seconds(30))
    /// }
    /// ```
    ///
    /// It listens on a session of its own, opened on the first call and kept,
    /// so pushes and pulls on the same hub go on while it waits. It listens
    /// before it looks at the last sequence, so a push that commits between
    /// the look and the wait still wakes it. Calls on one hub take turns (one
    /// engine waits on a hub); a call's deadline counts from when it was made.
    ///
    /// - Returns: true when the log has a change after `sequence`; false when
    ///   `timeout` passed without one (a `timeout` of zero or less only looks).
    /// - Throws: ``DataStackSync/SyncError`` `.offline` when the server cannot be
    ///   reached or the session broke while waiting (a broken session is never
    ///   reported as "nothing came"); `.hubFailure`.
    public func waitForChanges(after sequence: Int64, timeout: Duration) throws -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        do {
            return try listener.withLock { slot throws -> Bool in
                let connection: PostgreSQLConnection
                if let open = slot {
                    connection = open
                } else {
                    connection = try openSession(applicationName: Self.listenerApplicationName)
                    do {
                        try connection.listen(Self.channel)
                    } catch {
                        connection.close()
                        throw error
                    }
                    slot = connection
                }
                do {
                    return try Self.wait(on: connection, after: sequence, until: deadline, clock)
                } catch let error as PostgreSQLError where Self.isConnectionFailure(error) {
                    connection.close()
                    slot = nil
                    throw error
                }
            }
        } catch {
            throw syncError(error, while: "waiting for changes after sequence \(sequence)")
        }
    }

    /// The `application_name` of ``waitForChanges(after:timeout:)``'s session.
    package static let listenerApplicationName = "datastack_sync_listener"

    /// Looks at the last sequence, then waits for notifications until `deadline`.
    private static func wait(on connection: PostgreSQLConnection, after sequence: Int64,
                             until deadline: ContinuousClock.Instant, _ clock: ContinuousClock) throws -> Bool {
        // Notifications that came before the look below tell nothing it does not.
        _ = try connection.notifications(waitingUpTo: .zero)
        if try lastSequence(connection) > sequence { return true }
        while true {
            let remaining = clock.now.duration(to: deadline)
            if remaining <= .zero { return false }
            for notification in try connection.notifications(waitingUpTo: remaining) where notification.channel == channel {
                // The payload is the push's last sequence; one that does not read
                // (sent by something else) is checked against the table.
                if let last = Int64(notification.payload) {
                    if last > sequence { return true }
                } else if try lastSequence(connection) > sequence {
                    return true
                }
            }
        }
    }
}
